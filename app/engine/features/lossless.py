"""The losslessness check: does a speculative answer match plain greedy decoding?

Greedy speculative decoding must emit exactly what the main model alone would. The check replays
the answer's prompt in a fresh session with no draft and compares token by token. At the first
divergence it asks the main model, in one full forward pass over prompt + the answer so far,
how far apart its top two choices are: on quantized weights a near-tie can flip from numerical
noise between a k-token verify and a 1-token step, while a divergence at a wide margin means the
speculative path is wrong.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from threading import Event
from typing import cast

import mlx.core as mx

from app.engine.decoding.decode import generate
from app.engine.decoding.events import EngineError, ErrorKind, FinishReason, GenerationFinished, TokenEvent
from app.engine.decoding.loading import LoadedModel, ModelPair
from app.engine.decoding.policy import PlainDecoding
from app.engine.decoding.sampling import SamplingParams
from app.engine.decoding.session import ChatSession
from app.engine.decoding.templates.chat import TemplateError, format_chat

NEAR_TIE_LOGITS = 0.5  # a top-2 gap below this (in logits) can flip on rounding alone


class LosslessVerdict(enum.StrEnum):
    """The check's outcome, stored with the answer as these strings."""

    IDENTICAL = "identical"
    NEAR_TIE = "near-tie"  # diverges where the main's top two choices are nearly tied
    WIDE_MARGIN = "wide-margin"  # diverges where plain decoding was sure: a bug
    CANCELLED = "cancelled"


@dataclass(frozen=True, slots=True)
class LosslessReport:
    """The verdict, and at a divergence the two tokens, decoded so the UI needs no tokenizer."""

    verdict: LosslessVerdict
    compared: int  # tokens compared before the first divergence (or in all)
    position: int | None = None  # index in the answer of the first divergence
    answer_token: int | None = None
    plain_token: int | None = None  # the main model's greedy choice there (None: it stopped)
    top2_margin: float | None = None  # main's logit of its best token minus its second best
    answer_gap: float | None = None  # main's best logit minus the answer token's logit
    answer_text: str | None = None  # the answer's token at the divergence, decoded
    plain_text: str | None = None  # the main's greedy choice there, decoded (None: it stopped)

    @property
    def message(self) -> str:
        if self.verdict == LosslessVerdict.IDENTICAL:
            return f"Identical to plain greedy decoding ({self.compared} tokens)."
        if self.verdict == LosslessVerdict.CANCELLED:
            return "Check cancelled."
        where = f"Diverges at token {self.position}"
        gap = f"top-2 margin {self.top2_margin:.3f}, answer's token {self.answer_gap:.3f} below the best"
        if self.verdict == LosslessVerdict.NEAR_TIE:
            text = f"{where}: a near-tie ({gap}); expected on quantized models."
        else:
            text = f"{where} at a wide margin ({gap}): this is a bug in speculative decoding."
        if self.answer_text is not None:
            plain = repr(self.plain_text) if self.plain_text is not None else "the end of the answer"
            text += f" The answer has {self.answer_text!r} where plain decoding has {plain}."
        return text


def _main_logits(pair: ModelPair, ids: list[int]) -> mx.array:
    """The main's next-token logits after `ids`, from one forward pass with no cache."""
    logits: mx.array = pair.main.model(mx.array(ids, dtype=mx.uint32)[None])
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
    if finished is not None and finished.reason == FinishReason.CANCELLED:
        return LosslessReport(LosslessVerdict.CANCELLED, 0)
    i = next((j for j, (a, b) in enumerate(zip(answer, plain)) if a != b), None)
    if i is None:
        if len(plain) >= len(answer):
            return LosslessReport(LosslessVerdict.IDENTICAL, len(answer))
        i = len(plain)  # plain decoding stopped (end of turn) where the answer went on
    logits = _main_logits(pair, list(prompt) + list(answer[:i]))
    order = mx.argsort(-logits)
    first, second = cast(int, order[0].item()), cast(int, order[1].item())
    best = cast(float, logits[first].item())  # float32 logits: real numbers
    margin = best - cast(float, logits[second].item())
    gap = best - cast(float, logits[answer[i]].item())
    verdict = LosslessVerdict.NEAR_TIE if gap <= near_tie else LosslessVerdict.WIDE_MARGIN
    plain_token = plain[i] if i < len(plain) else None
    decode = pair.main.tokenizer.decode
    return LosslessReport(
        verdict,
        i,
        i,
        answer[i],
        plain_token,
        margin,
        gap,
        answer_text=str(decode([answer[i]])),
        plain_text=str(decode([plain_token])) if plain_token is not None else None,
    )


def check_answer(
    pair: ModelPair | None,
    messages: Sequence[dict[str, str]],
    answer: Sequence[int],
    prompt_tokens: int | None = None,
    cancel: Event | None = None,
) -> LosslessReport | EngineError:
    """The check of a recorded answer after `messages`, or why it cannot be made now.

    `prompt_tokens`: the prompt length recorded when the answer was written; a different length
    now means the conversation before it changed, and the replay would compare different things.
    """
    if pair is None:
        return EngineError(
            "no model is loaded: load the pair that wrote the answer first", kind=ErrorKind.STATE
        )
    if not answer:
        return EngineError("this answer has no recorded tokens to compare", kind=ErrorKind.STATE)
    try:
        prompt = format_chat(pair.tokenizer, list(messages))
    except TemplateError as exc:
        return EngineError(str(exc), kind=ErrorKind.TEMPLATE)
    if prompt_tokens is not None and prompt_tokens != len(prompt):
        return EngineError(
            f"the conversation before this answer changed since it was written (its prompt was "
            f"{prompt_tokens} tokens, now {len(prompt)}), so a replay would not be comparable",
            kind=ErrorKind.STATE,
        )
    vocab = _vocab_size(pair.main)
    if vocab is not None and any(not 0 <= t < vocab for t in answer):
        return EngineError(
            "the answer has token ids outside the loaded model's vocabulary: it was written by another model",
            kind=ErrorKind.STATE,
        )
    return check_lossless(pair, prompt, list(answer), cancel=cancel)


def _vocab_size(model: LoadedModel) -> int | None:
    args = getattr(model.model, "args", None)
    size = getattr(args, "vocab_size", None)
    return int(size) if isinstance(size, int) else None
