"""The context gate: a conversation must fit in what the main model reads, and the draft
must never read past its own context.

A prompt longer than the main's context would be prefilled for minutes and then answered from
positions the model never learnt; the gate refuses it before prefill, with the numbers, or drops
the oldest turns when the user chose that. A draft with a shorter context than the main's stops
drafting once the conversation reaches it: the answer goes on plainly, and says why.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from app.engine.decoding.events import Decision, Provenance, RoundEvent
from app.engine.decoding.policy import MAX_DRAFT, DraftPlan, DraftPolicy, RoundContext, as_plan
from app.engine.decoding.session import ChatSession

# An answer needs room after the prompt: a prompt that leaves less than this (or than the
# answer's own limit, when smaller) is refused rather than answered with a few words.
ANSWER_RESERVE = 64
CHAT_ADVICE = (
    "Start a new conversation, shorten the message, or let SpecChat drop the oldest turns (Settings)."
)
PROMPT_ADVICE = "Shorten the prompt."
_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length")

Messages = Sequence[Mapping[str, Any]]


class ContextTooLong(ValueError):
    """The prompt does not fit in the main model's context; the message gives both numbers."""

    def __init__(self, tokens: int, limit: int, advice: str, *, what: str = "This conversation") -> None:
        room = ", with room for an answer" if tokens <= limit else ""
        super().__init__(
            f"{what} is {tokens:,} tokens; the main model reads at most {limit:,}{room}. {advice}"
        )
        self.tokens, self.limit = tokens, limit


def context_length(config: Mapping[str, Any]) -> int | None:
    """How many positions a model reads, from its config (a multimodal one's text part too);
    None when the config does not say."""
    for part in (config, config.get("text_config")):
        if not isinstance(part, Mapping):
            continue
        for key in _KEYS:
            value = part.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
    return None


def answer_room(tokens: int, max_tokens: int, limit: int | None, advice: str = PROMPT_ADVICE) -> int:
    """The answer's token limit once a `tokens`-long prompt is in a `limit`-long context: at most
    `max_tokens`, never past the context. Raises ContextTooLong when too little room is left."""
    if limit is None:
        return max_tokens
    if tokens + min(max_tokens, ANSWER_RESERVE) > limit:
        raise ContextTooLong(tokens, limit, advice)
    return min(max_tokens, limit - tokens)


@dataclass(frozen=True, slots=True)
class Fitted:
    """A conversation's prompt ids once it fits, how many turns were dropped, the answer's limit."""

    ids: list[int]
    dropped: int
    max_tokens: int

    @property
    def note(self) -> str:
        turns = "the oldest turn" if self.dropped == 1 else f"{self.dropped} oldest turns"
        return f"dropped {turns} to fit the model's context"


def _exchanges(turns: list[Mapping[str, Any]]) -> list[int]:
    """Where each droppable block starts: a user message and what answered it, so what is left
    still opens with a user message (templates that insist on alternation accept it)."""
    return [i for i, m in enumerate(turns) if i == 0 or m.get("role") == "user"]


def fit_conversation(
    messages: Messages,
    encode: Callable[[list[Mapping[str, Any]]], list[int]],
    limit: int | None,
    max_tokens: int,
    *,
    drop_oldest: bool,
    advice: str = CHAT_ADVICE,
) -> Fitted:
    """The conversation's prompt, whole, or with its oldest turns dropped (never the leading
    system messages, never the latest message) when `drop_oldest` and it does not fit.

    Dropping keeps the fewest turns out that make it fit, found by bisection, so a long
    conversation is rendered a few times, not once per turn. Raises ContextTooLong when it does
    not fit (with `drop_oldest`: when even the latest message alone does not)."""
    whole = encode(list(messages))
    try:
        return Fitted(whole, 0, answer_room(len(whole), max_tokens, limit, advice))
    except ContextTooLong:
        if not drop_oldest:
            raise
    assert limit is not None  # answer_room refuses nothing without a limit
    head = 0
    while head < len(messages) - 1 and messages[head].get("role") == "system":
        head += 1
    system, turns, latest = list(messages[:head]), list(messages[head:-1]), messages[-1]
    starts = _exchanges(turns) + [len(turns)]

    def attempt(blocks: int) -> Fitted | None:
        ids = encode(system + turns[starts[blocks] :] + [latest])
        try:
            return Fitted(ids, starts[blocks], answer_room(len(ids), max_tokens, limit, advice))
        except ContextTooLong:
            return None

    best = attempt(len(starts) - 1)
    if best is None:
        alone = len(encode(system + [latest]))
        what = "The latest message with the system prompt" if system else "The latest message alone"
        raise ContextTooLong(alone, limit, "Shorten the message.", what=what)
    low, high = 0, len(starts) - 1  # fewest blocks dropped that fit lies in (low, high]
    while high - low > 1:
        middle = (low + high) // 2
        fitted = attempt(middle)
        if fitted is not None:
            best, high = fitted, middle
        else:
            low = middle
    return best


class DraftContextLimit:
    """A policy whose draft stops where its context ends: each round's draft length is cut to
    the positions the draft may still read, and none once it has none left (plain decoding,
    or prompt lookup, which reads nothing). `reason` says so, in every decision from then on."""

    def __init__(self, inner: DraftPolicy, limit: int, start: int) -> None:
        self.inner, self.limit = inner, limit
        self.start = start  # conversation tokens in the caches when the answer's first round begins
        self.reason: str | None = None

    def room(self, position: int) -> int:
        """Draft tokens a round at `position` (tokens emitted so far) may propose: proposing k
        feeds the draft the conversation's next k positions."""
        return self.limit - (self.start + position)

    def begin_answer(self) -> None:
        self.inner.begin_answer()

    def wants_draft_prefill(self) -> bool:
        return self.room(0) > 0 and self.inner.wants_draft_prefill()

    def choose(self, context: RoundContext) -> DraftPlan:
        room = max(self.room(context.position), 0)
        if room == 0 and self.reason is not None:  # told once: from then on the policy knows it
            context = replace(context, has_draft=False)
        plan = as_plan(self.inner.choose(context))
        if plan.source is Provenance.DRAFT and plan.k > room:
            if room == 0 and self.reason is None:
                self.reason = (
                    f"drafting stopped at {self.limit:,} tokens, the draft model's context; "
                    "the rest of the answer is plain decoding"
                )
            plan = replace(plan, k=room)
        return plan

    def choose_ahead(self, context: RoundContext) -> bool:
        return self.inner.choose_ahead(context)

    def observe(self, event: RoundEvent) -> None:
        self.inner.observe(event)

    def decision(self) -> Decision:
        made = self.inner.decision()
        return replace(made, draft_stopped=self.reason) if self.reason else made


def limit_draft(policy: DraftPolicy, session: ChatSession, prompt: int, max_tokens: int) -> DraftPolicy:
    """`policy`, held to the draft's context where this answer (a `prompt`-token prompt, up to
    `max_tokens` more) could carry the draft past it; otherwise unchanged."""
    draft = session.pair.draft
    limit = context_length(draft.config) if draft is not None and session.can_speculate else None
    if limit is None or prompt + max_tokens + MAX_DRAFT <= limit:
        return policy
    return DraftContextLimit(policy, limit, prompt - 1)
