"""SpecChat's decode loop: one loop for plain decoding (k = 0) and speculation (k ≥ 1).

Each round: the draft proposes k tokens (lazily, one host sync at the end), the main verifies
`pending + proposals` in one pass, exact-match acceptance keeps the agreeing prefix plus the
main's own next token, and both caches are rewound to what was kept. Plain decoding is the same
round with nothing proposed, so plain and speculative speeds are measured through one code path.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from threading import Event

import mlx.core as mx

from app.engine.detokenize import StreamingDetokenizer
from app.engine.events import (
    EngineError,
    GenerationFinished,
    GenerationStats,
    PrefillProgress,
    Provenance,
    RoundEvent,
    TokenEvent,
)
from app.engine.policy import MAX_DRAFT, DraftPolicy, PlainDecoding, RoundContext
from app.engine.sampling import Sampler, SamplingParams
from app.engine.session import ChatSession, common_prefix


@dataclass(frozen=True, slots=True)
class _Proposal:
    ids: mx.array  # (k,) lazily computed draft tokens
    draft_end: int  # tokens the draft cache holds after proposing


def _propose(session: ChatSession, sampler: Sampler, k: int, history: mx.array) -> _Proposal:
    """Run the draft k steps; nothing is synchronised until the verify pass needs the ids."""
    draft = session.pair.draft
    assert draft is not None and session.draft_cache is not None and session.pending is not None
    tail = session.catch_up_draft()
    y = mx.array(tail + [session.pending], dtype=mx.uint32)
    proposals: list[mx.array] = []
    for _ in range(k):
        logits = draft.model(y[None], cache=session.draft_cache)[:, -1, :]
        scores = sampler.process(logits, history if sampler.uses_history else None)
        y = sampler.draw(scores)
        mx.async_eval(y)
        proposals.append(y)
        if sampler.uses_history:
            history = mx.concatenate([history, y])
    # pending and the first k-1 proposals went into the draft cache
    return _Proposal(ids=mx.concatenate(proposals), draft_end=len(session.tokens) + k)


def _verify(
    session: ChatSession, sampler: Sampler, fed: mx.array, history: mx.array
) -> mx.array:
    """Main pass over `fed`; row i's choice sees the history extended by fed[1 : i + 1]."""
    logits = session.pair.main.model(fed[None], cache=session.main_cache)[0]
    if sampler.uses_history:
        rows = [
            sampler.process(logits[i : i + 1], mx.concatenate([history, fed[1 : i + 1]]))
            for i in range(fed.size)
        ]
        scores = mx.concatenate(rows, axis=0)
    else:
        scores = sampler.process(logits, None)
    return sampler.draw(scores)


def _finish(
    reason: str,
    ids: list[int],
    detok: StreamingDetokenizer,
    text: str,
    stats: GenerationStats,
) -> GenerationFinished:
    tail = detok.finish()
    return GenerationFinished(
        reason=reason, text=text + tail, token_ids=tuple(ids), stats=stats, tail=tail
    )


def generate(
    session: ChatSession,
    prompt: list[int],
    *,
    sampling: SamplingParams | None = None,
    policy: DraftPolicy | None = None,
    max_tokens: int = 512,
    cancel: Event | None = None,
    stop_ids: Iterable[int] | None = None,
) -> Iterator[TokenEvent | RoundEvent | PrefillProgress | GenerationFinished | EngineError]:
    """Generate one answer to `prompt` (the full conversation's token ids) in `session`."""
    if max_tokens < 1:
        raise ValueError("max_tokens must be at least 1")
    sampler = Sampler(sampling or SamplingParams())
    policy = policy or PlainDecoding()
    tokenizer = session.pair.tokenizer
    stops = set(stop_ids) if stop_ids is not None else set(tokenizer.eos_token_ids)
    detok = StreamingDetokenizer(tokenizer)
    wants_draft = policy.choose(RoundContext(True, max_tokens, 0)) > 0
    if wants_draft and session.draft_cache is not None and session.speculation_refusal:
        yield EngineError(session.speculation_refusal, kind="notice")

    start = time.perf_counter()
    reused = min(common_prefix(session.tokens, prompt), max(len(prompt) - 1, 0))
    yield from session.prefill(prompt, cancel, with_draft=wants_draft)
    prefill_done = time.perf_counter()

    answer: list[int] = []
    text_parts: list[str] = []
    rounds = proposed_total = accepted_total = 0
    reason = "length"
    if session.pending is None:  # cancelled during prefill
        reason = "cancelled"
    while session.pending is not None and len(answer) < max_tokens:
        if cancel is not None and cancel.is_set():
            reason = "cancelled"
            break
        remaining = max_tokens - len(answer)
        context = RoundContext(session.can_speculate, remaining, len(answer))
        k = policy.choose(context) if session.can_speculate else 0
        k = max(0, min(k, MAX_DRAFT, remaining - 1))
        pending = session.pending
        history = sampler.history_window(session.tokens, pending)

        t0 = time.perf_counter()
        proposal = _propose(session, sampler, k, history) if k else None
        if proposal is not None:
            mx.eval(proposal.ids)
        t1 = time.perf_counter()
        if proposal is not None:
            fed = mx.concatenate([mx.array([pending], dtype=mx.uint32), proposal.ids])
        else:
            fed = mx.array([pending], dtype=mx.uint32)
        choices = _verify(session, sampler, fed, history).tolist()
        t2 = time.perf_counter()

        proposed = proposal.ids.tolist() if proposal is not None else []
        n = 0
        while n < k and proposed[n] == choices[n]:
            n += 1
        emitted = proposed[:n] + [choices[n]]
        cut = min(len(emitted), remaining)
        stopped = False
        for j, token in enumerate(emitted[:cut]):
            if token in stops:
                cut, stopped = j + 1, True
                break
        emitted = emitted[:cut]
        fed_ids = [pending] + proposed
        session.accept(fed_ids, len(emitted), proposal.draft_end if proposal else None)
        session.pending = emitted[-1]

        accepted = min(n, len(emitted))
        event = RoundEvent(
            index=rounds,
            k=k,
            proposed=tuple(proposed),
            accepted=accepted,
            emitted=tuple(emitted),
            draft_seconds=t1 - t0,
            verify_seconds=t2 - t1,
            source=Provenance.DRAFT if k else Provenance.MAIN,
            policy=policy.snapshot(),
        )
        policy.observe(event)
        now = t2 - start
        for j, token in enumerate(emitted):
            if stopped and j == len(emitted) - 1:
                break
            segment = detok.add(token)
            text_parts.append(segment)
            answer.append(token)
            provenance = Provenance.DRAFT if j < accepted else Provenance.MAIN
            yield TokenEvent(token, segment, provenance, now, rounds, len(answer) - 1)
        yield event
        rounds += 1
        proposed_total += k
        accepted_total += accepted
        if stopped:
            reason = "stop"
            break

    end = time.perf_counter()
    stats = GenerationStats(
        prompt_tokens=len(prompt),
        reused_tokens=reused,
        tokens=len(answer),
        prefill_seconds=prefill_done - start,
        decode_seconds=end - prefill_done,
        rounds=rounds,
        proposed=proposed_total,
        accepted=accepted_total,
    )
    yield _finish(reason, answer, detok, "".join(text_parts), stats)
