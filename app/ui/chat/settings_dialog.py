"""Per-conversation settings: system prompt, sampling, speculation."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QSpinBox,
    QWidget,
)

from app.engine.decoding.sampling import SamplingParams
from app.engine.features.presets import CUSTOM, PRESETS, matching, preset_named
from app.engine.protocol import AcceptanceRule, ContextOverflow, SpeculationMode, SpeculationSettings

MODES = ("adaptive", "fixed", "off", "lookup")
RULES = ("auto", "exact", "residual")
OVERFLOW = {
    ContextOverflow.REFUSE: "refuse",
    ContextOverflow.DROP_OLDEST: "drop the oldest turns",
}


# every field in plain words, shown on hover (the names are the model world's, the words are not)
TOOLTIPS = {
    "system": "Instructions the model reads before every message of this conversation.",
    "preset": "A named set of the values below, for a kind of chat; changing a value makes it Custom.",
    "temperature": "How adventurous the wording is: 0 always picks the likeliest word (the same answer "
    "every time); higher values vary more.",
    "top_p": "Above 0 temperature: only the likeliest words that together make up this share of the "
    "chances are considered. 1 considers all.",
    "min_p": "Above 0 temperature: words less likely than this share of the likeliest word's chance are "
    "never picked. 0 turns it off.",
    "max_tokens": "The longest answer, in tokens (about three quarters of a word each); an answer that "
    "reaches it is cut there.",
    "seed": "A number that makes a random answer repeatable; empty picks a new one each time.",
    "mode": "How the draft helps: adaptive picks how far it guesses each round (the default), fixed "
    "always guesses the draft length below, lookup copies guesses from your message, off writes "
    "with the main model alone. The answer is the same in every mode; only the speed changes.",
    "k": "With fixed speculation: how many words the draft guesses ahead each round.",
    "rule": "How the main model judges the draft's guesses above 0 temperature. Auto keeps the answer's "
    "randomness exactly the main model's own.",
    "overflow": "What happens when the conversation no longer fits what the main model can read at once.",
}


@dataclass(frozen=True, slots=True)
class ChatSettings:
    system_prompt: str = ""
    temperature: float = 0.0
    top_p: float = 1.0
    min_p: float = 0.0
    max_tokens: int = 1024
    seed: int | None = None
    speculation: str = "adaptive"
    k: int = 4
    acceptance: str = "auto"
    overflow: str = ContextOverflow.REFUSE.value  # a conversation longer than the main model reads

    def sampling(self) -> SamplingParams:
        return SamplingParams(
            temperature=self.temperature, top_p=self.top_p, min_p=self.min_p, seed=self.seed
        )

    def speculation_settings(self) -> SpeculationSettings:
        return SpeculationSettings(
            SpeculationMode(self.speculation),
            self.k,
            None if self.acceptance == "auto" else AcceptanceRule(self.acceptance),
        )

    @property
    def preset(self) -> str:
        """The preset these values match (app.engine.features.presets), or "Custom"."""
        return matching(self.to_dict())

    def with_preset(self, name: str) -> ChatSettings:
        chosen = preset_named(name)
        return self if chosen is None else replace(self, **chosen.values())  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("system_prompt")
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any], system_prompt: str = "") -> ChatSettings:
        """Unknown or invalid values fall back to defaults: old or damaged rows still open."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known and k != "system_prompt"}
        try:
            made = cls(system_prompt=system_prompt, **values)
            made.sampling()
            made.speculation_settings().policy()
            ContextOverflow(made.overflow)
            return made
        except (TypeError, ValueError):
            return cls(system_prompt=system_prompt)


class SettingsDialog(QDialog):
    def __init__(self, settings: ChatSettings, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Conversation settings")
        self.system = QPlainTextEdit(settings.system_prompt)
        self.temperature = QDoubleSpinBox(
            minimum=0, maximum=2, singleStep=0.1, decimals=2, value=settings.temperature
        )
        self.top_p = QDoubleSpinBox(
            minimum=0.01, maximum=1, singleStep=0.05, decimals=2, value=settings.top_p
        )
        self.min_p = QDoubleSpinBox(
            minimum=0, maximum=0.99, singleStep=0.01, decimals=2, value=settings.min_p
        )
        self.max_tokens = QSpinBox(minimum=1, maximum=1_000_000, value=settings.max_tokens)
        self.seed = QLineEdit("" if settings.seed is None else str(settings.seed), placeholderText="random")
        self.mode, self.rule = QComboBox(), QComboBox()
        self.mode.addItems(MODES)
        self.mode.setCurrentText(settings.speculation)
        self.rule.addItems(RULES)
        self.rule.setCurrentText(settings.acceptance)
        self.k = QSpinBox(minimum=1, maximum=16, value=settings.k)
        self.overflow = QComboBox()
        for overflow, label in OVERFLOW.items():
            self.overflow.addItem(label, overflow.value)
        self.overflow.setCurrentIndex(max(self.overflow.findData(settings.overflow), 0))
        self.preset = preset_combo()
        self.preset_note = QLabel(wordWrap=True)
        for name, words in TOOLTIPS.items():
            getattr(self, name).setToolTip(words)
        form = QFormLayout(self)
        form.addRow("System prompt", self.system)
        for label, widget in (
            ("Preset", self.preset),
            ("", self.preset_note),
            ("Temperature", self.temperature),
            ("Top-p", self.top_p),
            ("Min-p", self.min_p),
            ("Max tokens", self.max_tokens),
            ("Seed", self.seed),
            ("Speculation", self.mode),
            ("Draft length (fixed)", self.k),
            ("Acceptance rule", self.rule),
            ("When a conversation is longer than the model can read", self.overflow),
        ):
            form.addRow(label, widget)
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form.addRow(buttons)
        self._show_preset()
        self.preset.activated.connect(lambda _i: self._fill(self.preset.currentText()))
        for spin in (self.temperature, self.top_p, self.min_p, self.k):
            spin.valueChanged.connect(self._show_preset)
        for combo in (self.mode, self.rule):
            combo.currentTextChanged.connect(self._show_preset)

    def _fill(self, name: str) -> None:
        """Choosing a preset writes its values into the fields, where they stay editable."""
        chosen = preset_named(name)
        if chosen is None:
            return
        self.temperature.setValue(chosen.temperature)
        self.top_p.setValue(chosen.top_p)
        self.min_p.setValue(chosen.min_p)
        self.mode.setCurrentText(chosen.speculation)
        self.k.setValue(chosen.k)
        self.rule.setCurrentText(chosen.acceptance)
        self._show_preset()

    def _show_preset(self) -> None:
        name = self.value().preset
        show_preset(self.preset, name)
        chosen = preset_named(name)
        self.preset_note.setText(chosen.summary if chosen else "Values set by hand.")

    def value(self) -> ChatSettings:
        seed = self.seed.text().strip()
        return ChatSettings(
            self.system.toPlainText(),
            self.temperature.value(),
            self.top_p.value(),
            self.min_p.value(),
            self.max_tokens.value(),
            int(seed) if seed.lstrip("-").isdigit() else None,
            self.mode.currentText(),
            self.k.value(),
            self.rule.currentText(),
            str(self.overflow.currentData()),
        )


def preset_combo() -> QComboBox:
    """The presets by name, each explained in its tooltip; "Custom" is shown, never chosen."""
    combo = QComboBox()
    for i, preset in enumerate(PRESETS):
        combo.addItem(preset.name)
        values = ", ".join(f"{k} {v}" for k, v in preset.values().items())
        combo.setItemData(i, f"{preset.summary}\n{values}", Qt.ItemDataRole.ToolTipRole)
    combo.addItem(CUSTOM)
    combo.setItemData(len(PRESETS), "Values set by hand (Conversation settings)", Qt.ItemDataRole.ToolTipRole)
    item = combo.model().item(len(PRESETS))  # type: ignore[attr-defined]
    item.setEnabled(False)
    return combo


def show_preset(combo: QComboBox, name: str) -> None:
    combo.blockSignals(True)  # showing the active preset is not choosing one
    combo.setCurrentText(name)
    combo.blockSignals(False)
