"""A model wrapper that records the token count of every call, for the pass-size tests."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from app.engine.decoding.loading import LoadedModel, ModelPair


class Recorder:
    """Forwards everything to `model`; `sizes` gets each call's token count."""

    def __init__(self, model: Any) -> None:
        self._model = model
        self.sizes: list[int] = []

    def __call__(self, inputs: Any, cache: Any = None, **kw: Any) -> Any:
        self.sizes.append(inputs.shape[1])
        return self._model(inputs, cache=cache, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)


def recording(pair: ModelPair) -> tuple[ModelPair, Recorder, Recorder]:
    """`pair` with both models wrapped: (the pair, the main's recorder, the draft's)."""
    assert pair.draft is not None
    main, draft = Recorder(pair.main.model), Recorder(pair.draft.model)

    def wrap(model: LoadedModel, recorder: Recorder) -> LoadedModel:
        return replace(model, model=recorder)

    return replace(pair, main=wrap(pair.main, main), draft=wrap(pair.draft, draft)), main, draft
