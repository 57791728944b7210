"""SpecChat's decode loop: one loop for plain decoding (k = 0) and speculation (k ≥ 1).

Each round: the policy picks k and a source (plan); the draft model (lazily, one host sync at
the end) or prompt lookup (no model) proposes k tokens (draft), the main scores
`pending + proposals` in one pass (verify), the acceptance rule (exact match or residual
sampling) keeps a prefix plus one token of the main's own (accept), the answer's end and stop
tokens cut what is kept (trim), both caches are rewound to it (keep), and the tokens go out
(emit). Plain decoding is the same round with nothing proposed, so plain and speculative speeds
are measured through one code path.

A plain round whose successor the policy has already committed to plain (`choose_ahead`)
queues that successor's pass before reading its own token, so the loop's Python runs while the
device computes, as in mlx-lm's plain loop; otherwise plain decoding, and a bypassed draft with
it, would trail mlx-lm's.

Whatever raises mid-round, the caches are rewound to the tokens the session holds.
"""

from __future__ import annotations

import time
from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass
from threading import Event
from typing import TypeAlias, cast

import mlx.core as mx

from app.engine.decoding import acceptance as rules
from app.engine.decoding.context import limit_draft
from app.engine.decoding.drafting import Proposal, propose, score
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
from app.engine.decoding.text.detokenize import StreamingDetokenizer

GenerationEvent: TypeAlias = TokenEvent | RoundEvent | PrefillProgress | GenerationFinished | EngineError

_NOTHING_PROPOSED = mx.array([], dtype=mx.bool_)  # a plain step's verdict: no proposal to judge


def _ints(array: mx.array) -> list[int]:
    """A 1-d integer array's values (`tolist` is typed for any shape)."""
    return cast("list[int]", array.tolist())


@dataclass(frozen=True, slots=True)
class _Verdict:
    """A round's main pass and acceptance, lazily built: what the round's one sync evaluates."""

    accept: mx.array
    draws: mx.array
    history: mx.array  # the sampler's history window the pass was scored against

    def arrays(self) -> list[mx.array]:
        return [self.accept, self.draws]


def _judge(
    session: ChatSession,
    sampler: Sampler,
    rule: rules.Rule,
    pending: mx.array,
    proposal: Proposal | None,
    history: mx.array,
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
    return _Verdict(accept, draws, history)


def _queue_next(session: ChatSession, sampler: Sampler, rule: rules.Rule, now: _Verdict) -> _Verdict:
    """Queue the next plain step's pass over the token `now` (a plain round) is still drawing.

    It feeds the main's cache one token ahead of `session.tokens`: a plain round trims nothing,
    so that is invisible until the answer ends early (a stop token, a cancel), where the loop
    takes it back (`ChatSession.drop_ahead`)."""
    mx.async_eval(*now.arrays())  # type: ignore[no-untyped-call]  # mlx declares no types here
    token = now.draws  # a plain round draws one token
    history = now.history
    if sampler.uses_history:
        history = mx.concatenate([history, token])[-sampler.params.repetition_context :]
    queued = _judge(session, sampler, rule, token, None, history)
    mx.async_eval(*queued.arrays())  # type: ignore[no-untyped-call]
    return queued


@dataclass(slots=True)
class _Clock:
    """A round's readings: at its start, after drafting, after its verdict was read."""

    start: float
    drafted: float = 0.0
    read: float = 0.0


class _Answer:
    """One answer's decode loop: the state its rounds share, and the steps of a round."""

    def __init__(
        self,
        session: ChatSession,
        prompt: list[int],
        sampler: Sampler,
        rule: rules.Rule,
        policy: DraftPolicy,
        max_tokens: int,
        cancel: Event | None,
        stops: set[int],
    ) -> None:
        self.session, self.prompt, self.sampler, self.rule = session, prompt, sampler, rule
        self.policy, self.max_tokens, self.cancel, self.stops = policy, max_tokens, cancel, stops
        self.detok = StreamingDetokenizer(session.pair.tokenizer)
        # rejected lookup tokens must be trimmed from the main's cache, as drafts are
        self.lookup = PromptLookup(prompt) if session.main_trimmable else None
        self.ids: list[int] = []
        self.text_parts: list[str] = []
        self.rounds = self.proposed_total = self.accepted_total = 0
        self.planned: DraftPlan | None = None  # the first round's, chosen before prefill
        self.queued: _Verdict | None = None  # the next plain round's pass, queued by this one
        self.last_read = 0.0  # when the last round's verdict was read
        self.finished = False  # ended with the session's caches as its invariant says

    def cancelled(self) -> bool:
        return self.cancel is not None and self.cancel.is_set()

    def candidates(self, remaining: int) -> list[int]:
        """What prompt lookup could propose this round, no more than the answer has room for;
        nothing once the main's cache may not be trimmed (`ChatSession.check_caches`)."""
        if self.lookup is None or not self.session.main_trimmable:
            return []
        return self.lookup.propose(min(MAX_DRAFT, remaining - 1))[0]

    def context(self, remaining: int, position: int, candidates: list[int]) -> RoundContext:
        return RoundContext(
            self.session.can_speculate, remaining, position, len(candidates), tuple(candidates)
        )

    def run(self) -> Iterator[GenerationEvent]:
        """The opening plan, prefill, the rounds, and the closing event."""
        session, policy = self.session, self.policy
        policy.begin_answer()
        # the first round's plan is chosen before prefill (it decides whether the draft reads the
        # prompt) and then played: asking twice would advance a policy's counters twice
        opening = self.candidates(self.max_tokens)
        first = RoundContext(True, self.max_tokens, 0, len(opening), tuple(opening))
        self.planned = as_plan(policy.choose(first))
        wants_draft = self.planned.k > 0 and self.planned.source is Provenance.DRAFT
        if wants_draft and session.draft_cache is not None and session.speculation_refusal:
            yield EngineError(session.speculation_refusal, kind=ErrorKind.NOTICE)

        start = time.perf_counter()
        reused = min(common_prefix(session.tokens, self.prompt), max(len(self.prompt) - 1, 0))
        # a policy may want the draft current even when it starts plain (it expects to probe soon)
        ready = wants_draft or policy.wants_draft_prefill()
        yield from session.prefill(self.prompt, self.cancel, with_draft=ready)
        prefill_done = self.last_read = time.perf_counter()

        # no pending token after prefill: it was cancelled
        reason = FinishReason.LENGTH if session.pending is not None else FinishReason.CANCELLED
        while session.pending is not None and len(self.ids) < self.max_tokens:
            if self.cancelled():
                reason = FinishReason.CANCELLED
                break
            if (yield from self.play_round(start)):
                reason = FinishReason.STOP
                break
        if self.queued is not None:  # the answer ended (stop, cancel) under a queued step: undo its feed
            mx.eval(*self.queued.arrays())
            session.drop_ahead()
            yield from session.take_repairs()
        stats = GenerationStats(
            prompt_tokens=len(self.prompt),
            reused_tokens=reused,
            tokens=len(self.ids),
            prefill_seconds=prefill_done - start,
            decode_seconds=time.perf_counter() - prefill_done,
            rounds=self.rounds,
            proposed=self.proposed_total,
            accepted=self.accepted_total,
        )
        self.finished = True
        tail = self.detok.finish()
        text = "".join(self.text_parts) + tail
        yield GenerationFinished(reason=reason, text=text, token_ids=tuple(self.ids), stats=stats, tail=tail)

    def play_round(self, start: float) -> Generator[GenerationEvent, None, bool]:
        """One round, step by step; returns whether a stop token ended the answer."""
        session = self.session
        remaining = self.max_tokens - len(self.ids)
        candidates = self.candidates(remaining)
        pending = session.pending
        assert pending is not None
        clock = _Clock(time.perf_counter())
        proposal = None
        overlapped = self.queued is not None
        if self.queued is not None:  # committed plain by the last round's choose_ahead: no choice
            k, source, verdict, self.queued = 0, Provenance.MAIN, self.queued, None
            clock.drafted = clock.start
        else:
            k, source, read_limit = self.plan(remaining, candidates)
            history = self.sampler.history_window(session.tokens, pending)
            proposal = self.draft(source, k, candidates, history, read_limit)
            clock.drafted = time.perf_counter()
            verdict = self.verify(pending, proposal, history)
        decision = self.policy.decision()  # before choose_ahead, which is the next round's choice
        if k == 0:
            self.queue_ahead(verdict, remaining, candidates)
        mx.eval(*verdict.arrays())
        clock.read = time.perf_counter()
        if overlapped:  # its pass ran under the last round's Python: its cost is the time between reads
            clock.start = clock.drafted = self.last_read
        self.last_read = clock.read
        # a round that queued the next one timed part of that one too (MLX's CPU backend runs
        # most of a queued graph inside async_eval): neither is a clean measure of one pass
        overlapped = overlapped or self.queued is not None

        proposed = _ints(proposal.ids) if proposal is not None else []
        passed = self.accept(verdict, k)
        emitted, stopped = self.trim(proposed[:passed] + [_ints(verdict.draws)[passed]], remaining)
        self.keep(pending, proposed, emitted, proposal)
        accepted = min(passed, len(emitted))
        event = RoundEvent(
            index=self.rounds,
            k=k,
            proposed=tuple(proposed),
            accepted=accepted,
            emitted=tuple(emitted),
            draft_seconds=clock.drafted - clock.start,
            verify_seconds=clock.read - clock.drafted,
            source=source,
            decision=decision,
            catch_up=proposal.catch_up if proposal else 0,
            overlapped=overlapped,
        )
        self.policy.observe(event)
        yield from self.emit(event, clock.read - start, stopped)
        self.rounds += 1
        self.proposed_total += k
        self.accepted_total += accepted
        return stopped

    def plan(self, remaining: int, candidates: list[int]) -> tuple[int, Provenance, int | None]:
        """The k this round plays, who proposes, and how much a bypassed draft reads."""
        plan = self.planned or as_plan(self.policy.choose(self.context(remaining, len(self.ids), candidates)))
        self.planned = None
        k, source = playable(plan, remaining, len(candidates), self.session.can_speculate)
        return k, source, plan.read_limit

    def draft(
        self,
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
        proposal = propose(self.session, self.sampler, k, history, read_limit)
        mx.eval(proposal.ids)
        return proposal

    def verify(self, pending: int, proposal: Proposal | None, history: mx.array) -> _Verdict:
        """The main's pass over `pending` and the proposal, with the acceptance rule (lazy)."""
        ids = mx.array([pending], dtype=mx.uint32)
        return _judge(self.session, self.sampler, self.rule, ids, proposal, history)

    def queue_ahead(self, verdict: _Verdict, remaining: int, candidates: list[int]) -> None:
        """In a plain round, let the policy commit the next round to plain now, and queue that
        round's pass under this one's."""
        if remaining <= 1 or not self.session.main_trimmable or self.cancelled():
            return
        ahead = self.context(remaining - 1, len(self.ids) + 1, candidates)
        if self.policy.choose_ahead(ahead):
            self.queued = _queue_next(self.session, self.sampler, self.rule, verdict)

    def accept(self, verdict: _Verdict, k: int) -> int:
        """How many of the k proposals the rule passed: the run before the first refusal."""
        passed = _ints(verdict.accept)
        n = 0
        while n < k and passed[n]:
            n += 1
        return n

    def trim(self, emitted: list[int], remaining: int) -> tuple[list[int], bool]:
        """Cut the round's tokens at the answer's length and after its first stop token; the
        flag says whether a stop token ended it."""
        cut = min(len(emitted), remaining)
        for j, token in enumerate(emitted[:cut]):
            if token in self.stops:
                return emitted[: j + 1], True
        return emitted[:cut], False

    def keep(self, pending: int, proposed: list[int], emitted: list[int], proposal: Proposal | None) -> None:
        """Rewind both caches to what the round kept; its last token is the next round's input."""
        session = self.session
        session.accept([pending, *proposed], len(emitted), proposal.draft_end if proposal else None)
        session.main_ahead = 1 if self.queued is not None else 0
        session.pending = emitted[-1]
        if self.lookup is not None:
            self.lookup.extend(emitted)

    def emit(self, event: RoundEvent, now: float, stopped: bool) -> Iterator[GenerationEvent]:
        """The round's tokens (a stop token is kept in the cache but not shown), then the round;
        first what the cache check found since the last round."""
        yield from self.session.take_repairs()
        for j, token in enumerate(event.emitted):
            if stopped and j == len(event.emitted) - 1:
                break
            segment = self.detok.add(token)
            self.text_parts.append(segment)
            self.ids.append(token)
            provenance = event.source if j < event.accepted else Provenance.MAIN
            yield TokenEvent(token, segment, provenance, now, event.index, len(self.ids) - 1)
        yield event


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
) -> Iterator[GenerationEvent]:
    """Generate one answer to `prompt` (the full conversation's token ids) in `session`.

    `acceptance` is "exact" or "residual"; None means residual when sampling, exact when greedy.
    """
    if max_tokens < 1:
        raise ValueError("max_tokens must be at least 1")
    sampler = Sampler(sampling or SamplingParams())
    rule = rules.RULES[rules.resolve(acceptance, sampler)]
    stops = set(stop_ids) if stop_ids is not None else set(session.pair.tokenizer.eos_token_ids)
    policy = limit_draft(policy or PlainDecoding(), session, len(prompt), max_tokens)
    answer = _Answer(session, prompt, sampler, rule, policy, max_tokens, cancel, stops)
    try:
        yield from answer.run()
    finally:
        if not answer.finished:  # an error mid-round, or the consumer stopped reading
            session.rewind_to_tokens()
