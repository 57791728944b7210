"""The arena's prompt list: the built-in prompts plus the user's, each ticked on or off, edited in
place and saved to the settings, so the next arena runs on the same set."""

from __future__ import annotations

import json

from PySide6.QtCore import QSettings, Qt
from PySide6.QtWidgets import QAbstractItemView, QListWidget, QListWidgetItem, QWidget

from app.engine.features.arena import ARENA_PROMPTS
from app.engine.protocol import BenchPrompt

KEY = Qt.ItemDataRole.UserRole  # (id, class)
TEXT = Qt.ItemDataRole.UserRole + 1  # a prompt's full text (the list shows one line of it)
PROMPTS_KEY = "arena/prompts"


def load_prompts(settings: QSettings) -> list[tuple[BenchPrompt, bool]]:
    """The saved prompt list (text edits, user prompts, which are on); the built-ins when none."""
    try:
        saved = json.loads(str(settings.value(PROMPTS_KEY, "") or "[]"))
        out = [
            (BenchPrompt(str(p["id"]), str(p["class"]), str(p["text"])), bool(p.get("on", True)))
            for p in saved
        ]
    except (ValueError, TypeError, KeyError):
        out = []
    return out or [(p, True) for p in ARENA_PROMPTS]


class PromptList(QListWidget):
    """Every change (tick, edit, add, remove) is saved at once."""

    def __init__(self, settings: QSettings, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.settings = settings
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.fill(load_prompts(settings))
        self.itemChanged.connect(lambda *_: self.save())
        self.itemDoubleClicked.connect(self.edit_prompt)

    def fill(self, prompts: list[tuple[BenchPrompt, bool]]) -> None:
        self.blockSignals(True)
        self.clear()
        for p, on in prompts:
            self._prompt_item(p, on)
        self.blockSignals(False)
        self.save()

    def restore_builtins(self) -> None:
        self.fill([(p, True) for p in ARENA_PROMPTS])

    def _prompt_item(self, p: BenchPrompt, on: bool = True) -> QListWidgetItem:
        item = QListWidgetItem()
        item.setData(KEY, (p.id, p.prompt_class))
        item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
        item.setCheckState(Qt.CheckState.Checked if on else Qt.CheckState.Unchecked)
        self._set_text(item, p.text)
        self.addItem(item)
        return item

    @staticmethod
    def _set_text(item: QListWidgetItem, text: str) -> None:
        item.setData(TEXT, text)
        line = f"{item.data(KEY)[1]}: {' ⏎ '.join(text.split(chr(10)))}"
        item.setText(line if len(line) <= 90 else line[:89] + "…")
        item.setToolTip(text)

    def _ask(self, title: str, text: str) -> str | None:
        from PySide6.QtWidgets import QInputDialog

        value, ok = QInputDialog.getMultiLineText(self, title, "Prompt:", text)
        return value.strip() if ok and value.strip() else None

    def add_prompt(self, text: str = "") -> QListWidgetItem | None:
        """A user prompt (class "user"); with no text, the user types it in a dialog."""
        text = text.strip() or self._ask("Add a prompt", "") or ""
        if not text:
            return None
        n = 1 + sum(1 for i in range(self.count()) if self.item(i).data(KEY)[1] == "user")
        item = self._prompt_item(BenchPrompt(f"user-{n}", "user", text))
        self.setCurrentItem(item)
        self.save()
        return item

    def edit_prompt(self, item: QListWidgetItem) -> None:
        text = self._ask("Edit prompt", str(item.data(TEXT)))
        if text is not None:
            self._set_text(item, text)

    def remove_current(self) -> None:
        row = self.currentRow()
        if row >= 0:
            self.takeItem(row)
            self.save()

    def prompt_list(self) -> list[tuple[BenchPrompt, bool]]:
        out = []
        for i in range(self.count()):
            item = self.item(i)
            pid, cls = item.data(KEY)
            prompt = BenchPrompt(pid, cls, str(item.data(TEXT)).strip())
            out.append((prompt, item.checkState() == Qt.CheckState.Checked))
        return out

    def save(self) -> None:
        data = [
            {"id": p.id, "class": p.prompt_class, "text": p.text, "on": on} for p, on in self.prompt_list()
        ]
        self.settings.setValue(PROMPTS_KEY, json.dumps(data))
