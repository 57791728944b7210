"""Sampling presets: named sets of the sampling and speculation values a conversation stores.

A conversation stores the values, not the name: its preset is whichever one the values match,
so a hand-edited value shows "Custom" and picking the same numbers again shows the name again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass

CUSTOM = "Custom"


@dataclass(frozen=True, slots=True)
class Preset:
    """The fields are named as the conversation settings name them (app.ui.chat.settings_dialog)."""

    name: str
    summary: str  # one sentence a non-expert understands, shown as a tooltip
    temperature: float
    top_p: float
    min_p: float
    speculation: str  # SpeculationMode value
    k: int  # draft length when speculation is "fixed"
    acceptance: str  # "auto", "exact" or "residual"

    def values(self) -> dict[str, float | int | str]:
        data = asdict(self)
        del data["name"], data["summary"]
        return data


PRESETS: tuple[Preset, ...] = (
    Preset(
        "Precise",
        "Always picks the most likely word: the same question gets the same answer.",
        temperature=0.0,
        top_p=1.0,
        min_p=0.0,
        speculation="adaptive",
        k=4,
        acceptance="exact",
    ),
    Preset(
        "Balanced",
        "A little variety in wording while staying on topic.",
        temperature=0.7,
        top_p=0.9,
        min_p=0.05,
        speculation="adaptive",
        k=4,
        acceptance="residual",
    ),
    Preset(
        "Creative",
        "More varied, surprising wording; a draft's guess is kept whenever the main model could have written it.",
        temperature=1.0,
        top_p=0.95,
        min_p=0.0,
        speculation="adaptive",
        k=4,
        acceptance="residual",
    ),
    Preset(
        "Conservative",
        "Mostly predictable answers; the draft guesses only two tokens at a time, so less work is thrown away.",
        temperature=0.3,
        top_p=0.9,
        min_p=0.05,
        speculation="fixed",
        k=2,
        acceptance="residual",
    ),
)


def preset_named(name: str) -> Preset | None:
    return next((p for p in PRESETS if p.name == name), None)


def _effective(values: Mapping[str, object]) -> dict[str, object]:
    """Spin boxes keep two decimals, and "auto" acceptance is exact when greedy and residual
    otherwise: values that decode the same way match the same preset."""
    temperature = round(float(str(values.get("temperature", 0.0))), 2)
    acceptance = values.get("acceptance", "auto")
    if acceptance == "auto":
        acceptance = "exact" if temperature == 0 else "residual"
    return {
        "temperature": temperature,
        "top_p": round(float(str(values.get("top_p", 1.0))), 2),
        "min_p": round(float(str(values.get("min_p", 0.0))), 2),
        "speculation": values.get("speculation", "adaptive"),
        "k": values.get("k", 4),
        "acceptance": acceptance,
    }


def matching(values: Mapping[str, object]) -> str:
    """The name of the preset these settings values match, or CUSTOM."""
    mine = _effective(values)
    for preset in PRESETS:
        if _effective(preset.values()) == mine:
            return preset.name
    return CUSTOM
