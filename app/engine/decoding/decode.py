"""SpecChat's decode loop: one loop for plain decoding (k = 0) and speculation (k ≥ 1).

Each round: the policy picks k and a source; the draft model (lazily, one host sync at the end)
or prompt lookup (no model) proposes k tokens, the main scores `pending + proposals` in one pass,
the acceptance rule (exact match or residual sampling) keeps a prefix plus one token of the
main's own, and both caches are rewound to what was kept. Plain decoding is the same round with
nothing proposed, so plain and speculative speeds are measured through one code path.

A plain round whose successor the policy has already committed to plain (`choose_ahead`)
queues that successor's pass before reading its own token: the next graph is built from the
token still being drawn, so the loop's Python (the policy, the events, the model's graph
building) runs while the device computes, as in mlx-lm's plain loop. Without it plain decoding
ran at 0.77-0.88x mlx-lm's speed on the toy main (CPU), and a bypassed draft paid that too.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from threading import Event

import mlx.core as mx

from app.engine.decoding import acceptance as rules
from app.engine.decoding.detokenize import StreamingDetokenizer
from app.engine.decoding.drafting import Proposal, propose, score, top_probability
from app.engine.decoding.events import (
    EngineError,
    ErrorKind,
    FinishReason,
    GenerationFinished,
    GenerationStats,
    PrefillProgress,
    Provenance,
    RoundEvent,
    TokenEvent,
)
from app.engine.decoding.lookup import PromptLookup
from app.engine.decoding.policy import (
    MAX_DRAFT,
    DraftPlan,
    DraftPolicy,
    PlainDecoding,
    RoundContext,
    as_plan,
    playable,
)
from app.engine.decoding.sampling import Sampler, SamplingParams
from app.engine.decoding.session import ChatSession, common_prefix

_NOTHING_PROPOSED = mx.array([], dtype=mx.bool_)  # a plain step's verdict: no proposal to judge


@dataclass(frozen=True, slots=True)
class _Verdict:
    """A round's main pass and acceptance, lazily built: what the round's one sync evaluates."""

    accept: mx.array
    draws: mx.array
    sure: mx.array | None  # the main's top probability per row, when the policy asked
    history: mx.array  # the sampler's history window the pass was scored against

    def arrays(self) -> list[mx.array]:
        return [self.accept, self.draws, *([self.sure] if self.sure is not None else [])]


def _judge(
    session: ChatSession,
    sampler: Sampler,
    rule: rules.Rule,
    pending: mx.array,
    proposal: Proposal | None,
    history: mx.array,
    want_sure: bool,
) -> _Verdict:
    """Score `pending` and the proposals in one main pass and apply the acceptance rule.

    A plain step is only the pass and a draw: on a GPU a step is about a millisecond and every
    small kernel (a concatenation, a comparison over nothing) is a share of it."""
    if proposal is None:  # what every rule does with no proposals
        p = score(session, sampler, pending, history)
        accept, draws = _NOTHING_PROPOSED, sampler.draw(p)
    else:
        ids = proposal.ids
        p = score(session, sampler, mx.concatenate([pending, ids]), history)
        # a lookup proposal is certain: a point mass (built lazily, used only by residual)
        q = proposal.scores if proposal.scores is not None else rules.point_mass(ids, p.shape[-1])
        accept, draws = rule(p, q, ids, sampler)
    # the main's confidence per token costs a reduction over each scored row: only on request
    return _Verdict(accept, draws, top_probability(p) if want_sure else None, history)


def _queue_next(
    session: ChatSession, sampler: Sampler, rule: rules.Rule, now: _Verdict, want_sure: bool
) -> _Verdict:
    """Queue the next plain step's pass over the token `now` (a plain round) is still drawing.

    It feeds the main's cache one token ahead of `session.tokens`: a plain round trims nothing,
    so that is invisible until the answer ends early (a stop token, a cancel), where the loop
    takes it back (`_drop_queued`)."""
    mx.async_eval(*now.arrays())
    token = now.draws  # a plain round draws one token
    history = now.history
    if sampler.uses_history:
        history = mx.concatenate([history, token])[-sampler.params.repetition_context :]
    queued = _judge(session, sampler, rule, token, None, history, want_sure)
    mx.async_eval(*queued.arrays())
    return queued


def _drop_queued(session: ChatSession) -> None:
    """Take the queued pass's token back out of the main's cache (the answer ended first)."""
    for c in session.main_cache:
        c.trim(1)
    session.main_ahead = 0


def _finish(
    reason: FinishReason,
    ids: list[int],
    detok: StreamingDetokenizer,
    text: str,
    stats: GenerationStats,
) -> GenerationFinished:
    tail = detok.finish()
    return GenerationFinished(reason=reason, text=text + tail, token_ids=tuple(ids), stats=stats, tail=tail)


def _round_proposal(
    session: ChatSession,
    sampler: Sampler,
    source: Provenance,
    k: int,
    candidates: list[int],
    history: mx.array,
    read_limit: int | None,
) -> Proposal | None:
    """The round's proposal, evaluated (the draft's one host sync); None for a plain step."""
    if k == 0:
        return None
    if source is Provenance.LOOKUP:
        return Proposal(ids=mx.array(candidates[:k], dtype=mx.uint32), scores=None, draft_end=None)
    proposal = propose(session, sampler, k, history, read_limit)
    mx.eval(proposal.ids, *([proposal.hindsight] if proposal.hindsight is not None else []))
    return proposal


def _hindsight(proposal: Proposal | None, answered: int) -> tuple[bool, ...]:
    """The catch-up's verdicts on this answer's tokens only (the prompt is the user's text)."""
    if proposal is None or proposal.hindsight is None or not answered:
        return ()
    return tuple(bool(x) for x in proposal.hindsight.tolist()[-answered:])


def generate(
    session: ChatSession,
    prompt: list[int],
    *,
    sampling: SamplingParams | None = None,
    policy: DraftPolicy | None = None,
    max_tokens: int = 512,
    cancel: Event | None = None,
    stop_ids: Iterable[int] | None = None,
    acceptance: str | None = None,
) -> Iterator[TokenEvent | RoundEvent | PrefillProgress | GenerationFinished | EngineError]:
    """Generate one answer to `prompt` (the full conversation's token ids) in `session`.

    `acceptance` is "exact" or "residual"; None means residual when sampling, exact when greedy.
    """
    if max_tokens < 1:
        raise ValueError("max_tokens must be at least 1")
    sampler = Sampler(sampling or SamplingParams())
    rule = rules.RULES[rules.resolve(acceptance, sampler)]
    policy = policy or PlainDecoding()
    if hasattr(policy, "begin_answer"):
        policy.begin_answer()
    tokenizer = session.pair.tokenizer
    stops = set(stop_ids) if stop_ids is not None else set(tokenizer.eos_token_ids)
    detok = StreamingDetokenizer(tokenizer)
    # rejected lookup tokens must be trimmed from the main's cache, as drafts are
    lookup = PromptLookup(prompt) if session.main_trimmable else None
    # the first round's plan is chosen before prefill (it decides whether the draft reads the
    # prompt) and then played: asking twice would advance a policy's counters twice
    opening = lookup.propose(min(MAX_DRAFT, max_tokens - 1))[0] if lookup else []
    first = as_plan(policy.choose(RoundContext(True, max_tokens, 0, len(opening), tuple(opening))))
    planned: DraftPlan | None = first
    wants_draft = first.k > 0 and first.source is Provenance.DRAFT
    if wants_draft and session.draft_cache is not None and session.speculation_refusal:
        yield EngineError(session.speculation_refusal, kind=ErrorKind.NOTICE)

    start = time.perf_counter()
    reused = min(common_prefix(session.tokens, prompt), max(len(prompt) - 1, 0))
    # a policy may want the draft current even when it starts plain (it expects to probe soon)
    ready = wants_draft or bool(getattr(policy, "wants_draft_prefill", lambda: False)())
    yield from session.prefill(prompt, cancel, with_draft=ready)
    prefill_done = time.perf_counter()

    answer: list[int] = []
    text_parts: list[str] = []
    choose_ahead = getattr(policy, "choose_ahead", None)
    last_read = time.perf_counter()
    rounds = proposed_total = accepted_total = 0
    reason = FinishReason.LENGTH
    if session.pending is None:  # cancelled during prefill
        reason = FinishReason.CANCELLED
    queued: _Verdict | None = None  # the next plain round's pass, queued by this one
    while session.pending is not None and len(answer) < max_tokens:
        if cancel is not None and cancel.is_set():
            reason = FinishReason.CANCELLED
            break
        remaining = max_tokens - len(answer)
        candidates = lookup.propose(min(MAX_DRAFT, remaining - 1))[0] if lookup else []
        pending = session.pending
        t0 = time.perf_counter()
        proposal = None
        if queued is not None:  # committed plain by the last round's choose_ahead: no choice
            k, source, judged, queued = 0, Provenance.MAIN, queued, None
            overlapped = True
            t1 = t0
        else:
            context = RoundContext(
                session.can_speculate, remaining, len(answer), len(candidates), tuple(candidates)
            )
            plan, planned = planned or as_plan(policy.choose(context)), None
            k, source = playable(plan, remaining, len(candidates), session.can_speculate)
            history = sampler.history_window(session.tokens, pending)
            proposal = _round_proposal(session, sampler, source, k, candidates, history, plan.read_limit)
            t1 = time.perf_counter()
            judged = _judge(
                session,
                sampler,
                rule,
                mx.array([pending], dtype=mx.uint32),
                proposal,
                history,
                bool(getattr(policy, "wants_confidence", False)),
            )
            overlapped = False
        snapshot = policy.snapshot()  # before choose_ahead, which is the next round's choice
        if (
            k == 0
            and remaining > 1
            and session.main_trimmable
            and choose_ahead is not None
            and not (cancel is not None and cancel.is_set())
            and choose_ahead(
                RoundContext(
                    session.can_speculate, remaining - 1, len(answer) + 1, len(candidates), tuple(candidates)
                )
            )
        ):
            queued = _queue_next(
                session, sampler, rule, judged, bool(getattr(policy, "wants_confidence", False))
            )
        mx.eval(*judged.arrays())
        t2 = time.perf_counter()
        if overlapped:  # its pass ran under the last round's Python: its cost is the time between reads
            t0 = t1 = last_read
        last_read = t2
        # a round that queued the next one timed part of that one too (MLX's CPU backend runs
        # most of a queued graph inside async_eval): neither is a clean measure of one pass
        overlapped = overlapped or queued is not None
        sure = judged.sure
        proposed = proposal.ids.tolist() if proposal is not None else []
        passed, choices = judged.accept.tolist(), judged.draws.tolist()
        n = 0
        while n < k and passed[n]:
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
        session.main_ahead = 1 if queued is not None else 0
        session.pending = emitted[-1]
        if lookup is not None:
            lookup.extend(emitted)

        accepted = min(n, len(emitted))
        event = RoundEvent(
            index=rounds,
            k=k,
            proposed=tuple(proposed),
            accepted=accepted,
            emitted=tuple(emitted),
            draft_seconds=t1 - t0,
            verify_seconds=t2 - t1,
            source=source,
            policy=snapshot,
            catch_up=proposal.catch_up if proposal else 0,
            hindsight=_hindsight(proposal, len(answer)),
            confidence=tuple(sure.tolist()[: len(emitted)]) if sure is not None else (),
            overlapped=overlapped,
        )
        policy.observe(event)
        now = t2 - start
        for j, token in enumerate(emitted):
            if stopped and j == len(emitted) - 1:
                break
            segment = detok.add(token)
            text_parts.append(segment)
            answer.append(token)
            provenance = source if j < accepted else Provenance.MAIN
            yield TokenEvent(token, segment, provenance, now, rounds, len(answer) - 1)
        yield event
        rounds += 1
        proposed_total += k
        accepted_total += accepted
        if stopped:
            reason = FinishReason.STOP
            break

    if queued is not None:  # the answer ended (stop, cancel) under a queued step: undo its feed
        mx.eval(*queued.arrays())
        _drop_queued(session)
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
