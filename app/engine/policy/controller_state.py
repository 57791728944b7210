"""What an adaptive controller learnt about a pair, kept across app sessions under a key naming
the two models, the device and the mode. The state itself is the controller's own
(`AdaptiveDraftLength.export_state` / `restore_state`); these are its callers' spellings."""

from __future__ import annotations

from app.engine.policy.adaptive import AdaptiveDraftLength


def state_key(main: str, draft: str | None, device: str, mode: str) -> str:
    return "|".join((main, draft or "", device, mode))


def export_state(policy: AdaptiveDraftLength) -> dict[str, object]:
    return policy.export_state()


def restore_state(policy: AdaptiveDraftLength, state: object) -> bool:
    return policy.restore_state(state)
