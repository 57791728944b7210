"""A chat session: the main and draft KV caches kept across turns, and the tokens they hold.

Invariant after every round: the main cache holds exactly `tokens`; the draft cache holds
`tokens[:draft_len]` but the spans in `draft_gaps` (it may lag: a fully accepted round leaves its
last proposal unfed, and a bypassed draft sees nothing until it is needed). `pending` is the
newest token, emitted but not yet fed to either model: it is the first input of the next round.
The invariant is checked layer by layer after every trim (`check_caches`), not assumed.

A gap is a stretch the draft skipped instead of reading: where reading costs a share of a main
step per token (a CPU), probing a draft that sat out 500 tokens would otherwise cost more than
the probe can win. The draft is only a proposer, so a gap can cost acceptance, never correctness.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from threading import Event
from typing import Any

import mlx.core as mx

from app.engine.decoding.caches import misfit
from app.engine.decoding.chunking import CHUNK_SECONDS, ChunkPacer
from app.engine.decoding.events import EngineError, ErrorKind, PrefillProgress
from app.engine.decoding.loading import LoadedModel, ModelPair
from app.engine.decoding.shapes import buckets
from app.engine.decoding.shapes.compiled_step import ChosenStep, StepChoices, choose, compiled_step
from app.engine.decoding.shapes.padded_cache import make_caches
from app.engine.decoding.window_cache import can_trim, exactly_trimmable

PREFILL_CHUNK = 512
WEIGH_AT = 64  # prompt tokens in the pass whose timed cost weighs one model's reads against the other's


def common_prefix(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _rewind(cache: list[Any], length: int) -> bool:
    """Trim every layer of `cache` back to `length` entries; False where one cannot be (no
    readable offset, not trimmable, or already shorter)."""
    for layer in cache:
        offset = getattr(layer, "offset", None)  # mlx-lm's caches keep it; a list of caches does not
        if not isinstance(offset, int) or offset < length or not can_trim([layer], offset - length):
            return False
        if offset > length:
            layer.trim(offset - length)
    return True


def _chosen(model: Any, cache: list[Any] | None, asked: bool | None) -> ChosenStep | None:
    """`model`'s compiled pass at the sizes chosen for it, or None where none is."""
    choice = choose(model, cache, asked)
    return ChosenStep(compiled_step(model), choice.sizes) if choice.compiled else None


class ChatSession:
    """Owns both caches; only the engine's worker thread may touch it.

    `bucketed`: every pass runs at one of `buckets.PASS_SIZES` (`buckets.run`); `padded_keys`: the
    caches hand attention keys padded to a few lengths (`padded_cache`). Both keep a GPU from
    compiling kernels mid-answer and default to on there, off on the CPU.

    `compiled_steps`: passes of up to nine tokens go through one compiled function per model
    (`shapes/compiled_step.py`), for each model whose caches pad keys; None: for a model where
    the warm-up measured that faster. `step_choices` says what was chosen and why.

    `prefill_chunk` is the largest prefill pass; each is sized to take about `chunk_seconds`
    (`chunking.py`), or is always the largest when that is None."""

    def __init__(
        self,
        pair: ModelPair,
        *,
        prefill_chunk: int = PREFILL_CHUNK,
        chunk_seconds: float | None = CHUNK_SECONDS,
        bucketed: bool | None = None,
        padded_keys: bool | None = None,
        compiled_steps: bool | None = None,
    ) -> None:
        self.pair = pair
        self.prefill_chunk = prefill_chunk
        self.pacer = ChunkPacer(prefill_chunk, chunk_seconds)
        self.bucketed = buckets.on_gpu() if bucketed is None else bucketed
        self.padded_keys = buckets.on_gpu() if padded_keys is None else padded_keys
        self.main_cache = self.new_cache(pair.main)
        self.draft_cache = self.new_cache(pair.draft) if pair.draft else None
        self.tokens: list[int] = []
        self.draft_len = 0
        self.draft_gaps: list[tuple[int, int]] = []  # [start, end) spans of tokens the draft skipped
        self.pending: int | None = None
        # tokens the main's cache holds beyond `tokens`: a queued plain step's (only mid-answer)
        self.main_ahead = 0
        self.main_trimmable = all(exactly_trimmable(c) for c in self.main_cache)
        self.draft_trimmable = self.draft_cache is not None and all(
            exactly_trimmable(c) for c in self.draft_cache
        )
        self.speculation_refusal = self._speculation_refusal()
        self.compiled_steps = compiled_steps
        self.repairs: list[EngineError] = []  # what `check_caches` found and did, to be reported

    def new_cache(self, model: LoadedModel) -> list[Any]:
        """An empty cache for `model`, of the kind this session uses."""
        return make_caches(model.model, self.padded_keys)

    @property
    def step_choices(self) -> StepChoices:
        """Whether each model's short passes run compiled, and why. Read at every pass, not
        fixed at construction: the worker makes its session before the warm-up measures."""
        draft = self.pair.draft
        return StepChoices(
            main=choose(self.pair.main.model, self.main_cache, self.compiled_steps),
            draft=choose(draft.model, self.draft_cache, self.compiled_steps) if draft else None,
        )

    @property
    def main_step(self) -> ChosenStep | None:
        """The main's compiled pass, where its passes run compiled."""
        return _chosen(self.pair.main.model, self.main_cache, self.compiled_steps)

    @property
    def draft_step(self) -> ChosenStep | None:
        """The draft's compiled pass, where its passes run compiled."""
        draft = self.pair.draft
        return _chosen(draft.model, self.draft_cache, self.compiled_steps) if draft else None

    def _speculation_refusal(self) -> str | None:
        """Why this pair cannot speculate, or None. Rejected drafts must be trimmed away."""
        for role, cache in (("main", self.main_cache), ("draft", self.draft_cache)):
            if cache is None:
                continue
            bad = sorted({type(c).__name__ for c in cache if not exactly_trimmable(c)})
            if bad:
                return (
                    f"speculation is off: the {role} model's cache cannot be rewound "
                    f"({', '.join(bad)}), so rejected draft tokens could not be undone; "
                    "generating plainly"
                )
        return None

    @property
    def can_speculate(self) -> bool:
        return self.draft_cache is not None and self.speculation_refusal is None

    @property
    def draft(self) -> LoadedModel | None:
        return self.pair.draft

    def cache_offsets(self) -> tuple[list[int], list[int]]:
        """Every layer's offset, main then draft: what the consistency tests check."""
        main = [getattr(c, "offset", -1) for c in self.main_cache]
        draft = [getattr(c, "offset", -1) for c in self.draft_cache] if self.draft_cache else []
        return main, draft

    def _draft_slots(self, position: int) -> int:
        """Entries the draft cache holds for `tokens[:position]` (a gap holds none)."""
        return position - sum(
            min(end, position) - start for start, end in self.draft_gaps if start < position
        )

    @property
    def draft_offset(self) -> int:
        """Entries the draft cache holds: `draft_len` less the gaps."""
        return self._draft_slots(self.draft_len)

    def skip_draft(self, read_at_most: int) -> None:
        """Let the draft skip all but the last `read_at_most` tokens it has not read (a gap)."""
        skip = len(self.tokens) - self.draft_len - max(read_at_most, 0)
        if skip <= 0 or self.draft_cache is None:
            return
        if self.draft_gaps and self.draft_gaps[-1][1] == self.draft_len:  # nothing read since the last
            self.draft_gaps[-1] = (self.draft_gaps[-1][0], self.draft_len + skip)
        else:
            self.draft_gaps.append((self.draft_len, self.draft_len + skip))
        self.draft_len += skip

    def reset(self) -> None:
        self.truncate(0)
        self.pending = None

    def truncate(self, keep: int) -> None:
        """Rewind both caches so that they hold `tokens[:keep]` at most."""
        keep = min(keep, len(self.tokens))
        drop = len(self.tokens) - keep
        if drop:
            if self.main_trimmable and can_trim(self.main_cache, drop):
                for c in self.main_cache:
                    c.trim(drop)
            else:  # a recurrent state, or a window already dropped, cannot be rewound: start over
                self.main_cache = self.new_cache(self.pair.main)
                keep = 0
            self.tokens = self.tokens[:keep]
        if self.draft_cache is not None and self.draft_len > keep:
            # a cut inside a gap goes back to the gap's start: nothing after it was read
            cut = next((start for start, end in self.draft_gaps if start < keep < end), keep)
            drop = self.draft_offset - self._draft_slots(cut)
            if self.draft_trimmable and can_trim(self.draft_cache, drop):
                if drop:
                    for c in self.draft_cache:
                        c.trim(drop)
                self.draft_len = cut
                self.draft_gaps = [g for g in self.draft_gaps if g[0] < cut]
            else:
                assert self.pair.draft is not None  # a draft cache is made only for a draft
                self.draft_cache = self.new_cache(self.pair.draft)
                self.draft_len = 0
                self.draft_gaps = []
        self.check_caches()

    def rewind_to_tokens(self) -> None:
        """Restore the invariant after a round that did not finish (it raised, or its answer was
        abandoned): trim from both caches what was fed beyond `tokens` (the draft's: beyond
        `tokens[:draft_len]`, less its gaps). A cache whose length cannot be read or rewound
        starts over, which costs the next answer a prefill but never correctness."""
        self.main_ahead = 0
        if not _rewind(self.main_cache, len(self.tokens)):
            self.main_cache = self.new_cache(self.pair.main)
            self.tokens = []
        draft = self.pair.draft
        if (
            self.draft_cache is not None
            and draft is not None
            and (self.draft_len > len(self.tokens) or not _rewind(self.draft_cache, self.draft_offset))
        ):
            self.draft_cache = self.new_cache(draft)
            self.draft_len = 0
            self.draft_gaps = []
        self.check_caches()

    def drop_ahead(self) -> None:
        """Take a queued plain step's token back out of the main's cache (the answer ended first)."""
        for c in self.main_cache:
            c.trim(1)
        self.main_ahead = 0
        self.check_caches()

    def check_caches(self) -> None:
        """After a trim, every layer of both caches must hold what the session says it fed them.

        A main cache that does not is rebuilt from `tokens` and trusted with no more trims
        (plain decoding, as for a cache that cannot be rewound); a draft cache that does not
        starts over and the draft sits the session out. Either way the reason is reported."""
        problem = misfit(self.main_cache, len(self.tokens) + self.main_ahead)
        if problem is not None:
            self.main_cache = self.new_cache(self.pair.main)
            self.main_ahead = 0
            for at in range(0, len(self.tokens), self.prefill_chunk):
                self._feed(self.pair.main.model, self.main_cache, self.tokens[at : at + self.prefill_chunk])
            self.main_trimmable = False
            self._report(
                f"the main model's cache did not match the conversation after a trim ({problem}): "
                f"rebuilt it from the conversation's {len(self.tokens)} tokens; generating plainly"
            )
        draft = self.pair.draft
        if self.draft_cache is not None and draft is not None:
            problem = misfit(self.draft_cache, self.draft_offset)
            if problem is not None:
                self.draft_cache = self.new_cache(draft)
                self.draft_len, self.draft_gaps = 0, []
                self._report(
                    f"the draft model's cache did not match the conversation after a trim ({problem}): "
                    "speculation is off for this session; generating plainly"
                )

    def _report(self, reason: str) -> None:
        self.speculation_refusal = self.speculation_refusal or reason
        self.repairs.append(EngineError(reason, kind=ErrorKind.NOTICE))

    def take_repairs(self) -> list[EngineError]:
        """The reasons `check_caches` gave since the last call, for the answer to report."""
        repairs, self.repairs = self.repairs, []
        return repairs

    def _feed(self, model: Any, cache: list[Any], ids: list[int]) -> None:
        step = self.main_step if cache is self.main_cache else self.draft_step
        buckets.run(model, cache, mx.array(ids, dtype=mx.uint32), self.bucketed, step=step)
        mx.eval([c.state for c in cache])

    def prefill(
        self, prompt: list[int], cancel: Event | None, *, with_draft: bool
    ) -> Iterator[PrefillProgress]:
        """Make the caches hold `prompt[:-1]` and set `pending = prompt[-1]`.

        Reuses the longest common prefix of what the caches already hold (an edited or
        regenerated turn trims back to it). Cancellable between chunks, which are sized to
        take well under a second each; a cancel leaves the caches consistent with `tokens` and
        `pending` unset.
        """
        if not prompt:
            raise ValueError("the prompt is empty")
        self.pending = None
        keep = min(common_prefix(self.tokens, prompt), len(prompt) - 1)
        self.truncate(keep)
        main_todo = prompt[len(self.tokens) : -1]
        draft_todo = prompt[self.draft_len : -1] if with_draft and self.can_speculate else []
        # progress is told in the prompt's tokens, the two models' reads of them weighed by what
        # each costs: a paste of 1,439 tokens reads "of 1,439", never main and draft counted twice
        total = max(len(main_todo), len(draft_todo))
        weight = {"main": 1.0, "draft": self._draft_weight()}
        work = len(main_todo) + weight["draft"] * len(draft_todo)
        done = 0.0
        start = time.perf_counter()
        yield PrefillProgress(0, total, 0.0)
        for ids, role in ((main_todo, "main"), (draft_todo, "draft")):
            at = 0
            while at < len(ids):
                if cancel is not None and cancel.is_set():
                    return
                size = self.pacer.size(role)
                chunk = ids[at : at + size]
                began = time.perf_counter()
                if role == "draft":
                    # draft_todo is empty unless this pair can speculate
                    assert self.pair.draft is not None and self.draft_cache is not None
                    self._feed(self.pair.draft.model, self.draft_cache, chunk)
                    self.draft_len += len(chunk)
                else:
                    self._feed(self.pair.main.model, self.main_cache, chunk)
                    self.tokens.extend(chunk)
                now = time.perf_counter()
                self.pacer.record(role, size, len(chunk), now - began)
                at += len(chunk)
                done += weight[role] * len(chunk)
                yield PrefillProgress(min(total, round(total * done / work)), total, now - start)
        self.pending = prompt[-1]

    def _draft_weight(self) -> float:
        """A draft token's read over a main token's, as the pacer has timed them (1 before it
        has: it then takes the draft to be as slow as the main)."""
        main, draft = self.pacer.predict("main", WEIGH_AT), self.pacer.predict("draft", WEIGH_AT)
        return draft / main if main and draft and "draft" in self.pacer.times else 1.0

    def catch_up_draft(self) -> list[int]:
        """Feed the draft all it has not seen but a short tail; return that tail.

        The tail is fed together with `pending` in the first draft step of the round, so a
        lag of one token (the usual case) costs no extra pass.
        """
        assert self.draft_cache is not None and self.pair.draft is not None
        backlog = self.tokens[self.draft_len :]
        while len(backlog) > self.prefill_chunk:
            self._feed(self.pair.draft.model, self.draft_cache, backlog[: self.prefill_chunk])
            self.draft_len += self.prefill_chunk
            backlog = backlog[self.prefill_chunk :]
        return backlog

    def accept(self, fed: list[int], keep: int, draft_end: int | None) -> None:
        """After a verify pass over `fed` (pending first), keep its first `keep` tokens.

        `draft_end` is how many conversation tokens the draft cache held after drafting this
        round (None when the draft did not run).
        """
        main_drop = len(fed) - keep
        if main_drop:
            for c in self.main_cache:
                c.trim(main_drop)
        base = len(self.tokens)
        self.tokens.extend(fed[:keep])
        draft_drop = 0
        if self.draft_cache is not None and draft_end is not None:
            target = min(draft_end, base + keep)
            draft_drop = draft_end - target
            if draft_drop:
                for c in self.draft_cache:
                    c.trim(draft_drop)
            self.draft_len = target
        if main_drop or draft_drop:  # a round that trimmed nothing has nothing to check
            self.check_caches()
