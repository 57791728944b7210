"""Refused drafts ("ghosts") for the hover tooltip: what the draft proposed in a round and the
main model refused. They are shown per round on hover, never inside the sentence, so the answer
reads as it was written."""

from __future__ import annotations

from app.engine.store.provenance import Answer

SHOWN = 120  # characters of one refused draft in a tooltip: enough to recognise, short enough to read


def refused_in_round(answer: Answer, rnd: int) -> list[str]:
    """The refused drafts recorded for round `rnd`; one past the last token counts as the last token's."""
    if not answer.parts:
        return []
    last = len(answer.parts) - 1
    return [text for at, text in answer.rejected if answer.rounds[min(at, last)] == rnd]


def ghost_lines(answer: Answer, rnd: int) -> list[str]:
    lines = []
    for text in refused_in_round(answer, rnd):
        shown = text.replace("\n", "⏎")
        if len(shown) > SHOWN:
            shown = shown[:SHOWN] + "…"
        lines.append(f"The draft proposed “{shown}”; the main model refused it and wrote its own text.")
    return lines
