"""The losslessness check: does a speculative answer match plain greedy decoding?

Greedy speculative decoding must emit exactly what the main model alone would. The check replays
the answer's prompt in a fresh session with no draft and compares token by token. At the first
divergence it asks the main model, in one full forward pass over prompt + the answer so far,
how far apart its top two choices are: on quantized weights a near-tie can flip from numerical
noise between a k-token verify and a 1-token step, while a divergence at a wide margin means the
speculative path is wrong.
"""

from __future__ import annotations

from dataclasses import dataclass
from threading import Event

import mlx.core as mx

from app.engine.decoding.decode import generate
from app.engine.decoding.events import GenerationFinished, TokenEvent
from app.engine.decoding.loading import ModelPair
from app.engine.decoding.policy import PlainDecoding
from app.engine.decoding.sampling import SamplingParams
from app.engine.decoding.session import ChatSession

NEAR_TIE_LOGITS = 0.5  # a top-2 gap below this (in logits) can flip on rounding alone


@dataclass(frozen=True, slots=True)
class LosslessReport:
    """`verdict`: identical, near-tie, wide-margin, or cancelled."""

    verdict: str
    compared: int  # tokens compared before the first divergence (or in all)
    position: int | None = None  # index in the answer of the first divergence
    answer_token: int | None = None
    plain_token: int | None = None  # the main model's greedy choice there (None: it stopped)
    top2_margin: float | None = None  # main's logit of its best token minus its second best
    answer_gap: float | None = None  # main's best logit minus the answer token's logit

    @property
    def message(self) -> str:
        if self.verdict == "identical":
            return f"Identical to plain greedy decoding ({self.compared} tokens)."
        if self.verdict == "cancelled":
            return "Check cancelled."
        where = f"Diverges at token {self.position}"
        gap = f"top-2 margin {self.top2_margin:.3f}, answer's token {self.answer_gap:.3f} below the best"
        if self.verdict == "near-tie":
            return f"{where}: a near-tie ({gap}); expected on quantized models."
        return f"{where} at a wide margin ({gap}): this is a bug in speculative decoding."


def _main_logits(pair: ModelPair, ids: list[int]) -> mx.array:
    """The main's next-token logits after `ids`, from one forward pass with no cache."""
    logits = pair.main.model(mx.array(ids, dtype=mx.uint32)[None])
    return logits[0, -1].astype(mx.float32)


def check_lossless(
    pair: ModelPair,
    prompt: list[int],
    answer: list[int],
    *,
    cancel: Event | None = None,
    near_tie: float = NEAR_TIE_LOGITS,
) -> LosslessReport:
    """Replay `prompt` greedily without a draft for len(answer) tokens and compare with `answer`."""
    session = ChatSession(ModelPair(pair.main, None))
    plain: list[int] = []
    finished: GenerationFinished | None = None
    for event in generate(
        session,
        prompt,
        sampling=SamplingParams(),
        policy=PlainDecoding(),
        max_tokens=max(1, len(answer)),
        cancel=cancel,
    ):
        if isinstance(event, TokenEvent):
            plain.append(event.id)
        elif isinstance(event, GenerationFinished):
            finished = event
    if finished is not None and finished.reason == "cancelled":
        return LosslessReport("cancelled", 0)
    i = next((j for j, (a, b) in enumerate(zip(answer, plain)) if a != b), None)
    if i is None:
        if len(plain) >= len(answer):
            return LosslessReport("identical", len(answer))
        i = len(plain)  # plain decoding stopped (end of turn) where the answer went on
    logits = _main_logits(pair, list(prompt) + list(answer[:i]))
    top = mx.argsort(-logits)[:2].tolist()
    values = logits.tolist()
    margin = values[top[0]] - values[top[1]]
    gap = values[top[0]] - values[answer[i]]
    verdict = "near-tie" if gap <= near_tie else "wide-margin"
    return LosslessReport(verdict, i, i, answer[i], plain[i] if i < len(plain) else None, margin, gap)
