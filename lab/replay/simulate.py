"""Replay a draft policy over a recorded answer under a known cost model: the controller judged
without timing noise.

On a real machine every speed ratio carries noise (identical runs differ by tens of percent,
docs/measurements/archive/2026-11-22-timing-noise.md), and `bench` compares the best of several
noisy fixed-k runs with one noisy adaptive run. Under greedy
decoding, though, a round's outcome is fixed by the text: a draft round starting at token t
accepts the run of tokens from t that the draft, reading the true text, would itself have picked.
So an answer and the draft's teacher-forced verdicts on it determine what any sequence of draft
lengths would have had accepted, and prompt lookup's proposals follow from the text alone. With a
cost model (a verify pass over n tokens, a draft step, reading skipped tokens) the replay gives
each policy's time exactly, and the best fixed k is known rather than estimated.

Recording needs the models (`recording.py`); replaying is plain Python.
"""

from __future__ import annotations

import json
import math
import random
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from itertools import takewhile
from pathlib import Path
from typing import Any

from app.engine.decoding.events import Provenance, RoundEvent
from app.engine.decoding.lookup import PromptLookup
from app.engine.decoding.policy import MAX_DRAFT, DraftPlan, DraftPolicy, RoundContext, as_plan, playable
from app.engine.decoding.shapes.buckets import passes


@dataclass(frozen=True, slots=True)
class Trace:
    """A greedy answer and, per answer token, whether the draft's greedy pick there was it."""

    prompt: tuple[int, ...]
    answer: tuple[int, ...]
    draft_hits: tuple[bool, ...]
    label: str = ""

    def __post_init__(self) -> None:
        if len(self.draft_hits) != len(self.answer):
            raise ValueError("one draft verdict per answer token")


@dataclass(frozen=True, slots=True)
class CostModel:
    """Seconds per pass. `verify[n - 1]` is a main pass over n tokens (n = 1 is a plain step);
    a draft round of k tokens costs `draft_fixed + draft_step * k`, plus `draft_read` per skipped
    token it reads in its first step and `read_piece` per pass beyond the first that read takes
    (buckets.passes: a 512-token chunk each, the rest padded into one); `queued`, when
    set, is a plain step queued under the round before (decode's queue_ahead), which hides the
    sync a step timed alone pays; `noise` is the spread (log-normal sigma) of every timed pass."""

    verify: tuple[float, ...]
    draft_step: float
    draft_fixed: float = 0.0
    draft_read: float = 0.0
    overhead: float = 0.0
    noise: float = 0.0
    name: str = ""
    read_piece: float = 0.0
    queued: float = 0.0
    # a host that changes speed between answers: (answers a spell lasts, draft factor, main
    # factor), every other spell slow, its draft passes and main passes that many times as long
    spells: tuple[int, float, float] | tuple[()] = ()

    def for_answer(self, index: int) -> CostModel:
        """The costs of the `index`-th answer of a run: slower in a slow spell."""
        if not self.spells or (index // self.spells[0]) % 2 == 0:
            return self
        _, draft, main = self.spells
        return replace(
            self,
            verify=tuple(v * main for v in self.verify),
            queued=self.queued * main,
            draft_step=self.draft_step * draft,
            draft_fixed=self.draft_fixed * draft,
            draft_read=self.draft_read * draft,
            read_piece=self.read_piece * draft,
            spells=(),
        )

    def verify_seconds(self, n: int) -> float:
        if n <= len(self.verify):
            return self.verify[n - 1]
        slope = self.verify[-1] - self.verify[-2] if len(self.verify) > 1 else self.verify[0]
        return self.verify[-1] + slope * (n - len(self.verify))

    def draft_seconds(self, k: int, lag: int) -> float:
        pieces = len(passes(lag + 1, pad=True)) - 1 if self.read_piece and lag else 0  # pending + skipped
        return self.draft_fixed + self.draft_step * k + self.draft_read * lag + self.read_piece * pieces

    def with_noise(self, noise: float) -> CostModel:
        return replace(self, noise=noise)

    @classmethod
    def shaped(cls, name: str, step: float = 0.01, noise: float = 0.0) -> CostModel:
        """Shapes seen on real machines, in plain steps:

        * 'compute' (a CPU; fitted to the toy pair on a 16-core one): a pass over n >= 2 tokens
          costs 0.6 + 0.4 n steps; a draft step 0.15, plus 0.12 per round and per token read
          in catch-up;
        * 'bandwidth' (a GPU, Apple's included: reading the weights dominates): a pass over n
          tokens costs 1 + 0.04 (n - 1) steps; a draft a third of the main (small models are
          bound by kernel launches, not by their size), catch-up reads nearly free;
        * 'gpu-4bit' (a 4-bit 7B pair on an H100, launch-bound): a queued plain step 1, a pass
          timed alone over n tokens 1.27 + 0.67 (n - 1), a draft step 0.8 and every further
          pass a catch-up read takes 2;
        * 'flat-14b' (a 14B bf16 pair on an H100, where a draft pays by 5-20%): a queued
          plain step 0.9, a pass over n >= 2 tokens 1.55 + 0.04 (n - 2), a draft step 0.35;
        * 'flat-14b-spells': the same on a shared host that changes speed every two answers, its
          slow spells making the draft's passes 1.8 times as long and the main's 1.3 times
          (an H100 in run S, docs/measurements/archive/2026-11-27-stale-prices.md).

        Plain steps are queued in the last two only.
        """
        if name == "compute":
            verify = tuple(step * (1.0 if n == 1 else 0.6 + 0.4 * n) for n in range(1, MAX_DRAFT + 2))
            return cls(verify, 0.15 * step, 0.12 * step, 0.12 * step, 0.02 * step, noise, name)
        if name == "bandwidth":
            verify = tuple(step * (1.0 + 0.04 * (n - 1)) for n in range(1, MAX_DRAFT + 2))
            return cls(verify, 0.33 * step, 0.02 * step, 0.01 * step, 0.02 * step, noise, name)
        if name == "gpu-4bit":
            # an H100 under MLX CUDA, Qwen2.5-7B 4-bit with a 0.5B 4-bit draft
            # (docs/measurements/archive/2026-11-26-adaptive-4bit-gpu.md)
            verify = tuple(step * (1.27 + 0.67 * (n - 1)) for n in range(1, MAX_DRAFT + 2))
            return cls(verify, 0.8 * step, 0.0, 0.08 * step, 0.02 * step, noise, name, 2.0 * step, step)
        if name == "flat-14b":  # docs/measurements/archive/2026-11-26-coasting-clean-steps.md
            verify = (step,) + tuple(step * (1.55 + 0.04 * (n - 2)) for n in range(2, MAX_DRAFT + 2))
            return cls(
                verify, 0.35 * step, 0.1 * step, 0.01 * step, 0.02 * step, noise, name, 0.5 * step, 0.9 * step
            )
        if name == "flat-14b-spells":
            return replace(cls.shaped("flat-14b", step, noise), name=name, spells=(2, 1.8, 1.3))
        raise ValueError(
            f"unknown cost shape {name!r}: 'compute', 'bandwidth', 'gpu-4bit', 'flat-14b' or 'flat-14b-spells'"
        )


class SimulatedClock:
    """The time a policy sees during a replay: advanced by the simulated passes."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@dataclass(slots=True)
class ReplayResult:
    tokens: int
    seconds: float
    rounds: int
    accepted: int = 0
    plans: Counter[tuple[str, int]] = field(default_factory=Counter)  # (source, k) -> rounds
    # real seconds the policy's own choose and observe took: its Python time per round, which
    # the decode loop pays between the main's passes
    policy_seconds: float = 0.0
    choices: list[tuple[str, int]] = field(default_factory=list)  # (source, k) played, round by round
    slow_seconds: float = 0.0  # what the `slow` rounds took beyond their usual time (in `seconds`)

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0

    def plus(self, other: ReplayResult) -> ReplayResult:
        """Both replays as one (the same answer under another seed)."""
        return ReplayResult(
            self.tokens + other.tokens,
            self.seconds + other.seconds,
            self.rounds + other.rounds,
            self.accepted + other.accepted,
            self.plans + other.plans,
            self.policy_seconds + other.policy_seconds,
            self.choices + other.choices,
            self.slow_seconds + other.slow_seconds,
        )


def _leading(flags: Iterable[bool]) -> int:
    """How many flags are true before the first false: the proposals a round accepts."""
    return sum(1 for _ in takewhile(bool, flags))


def replay(
    trace: Trace,
    policy: DraftPolicy,
    costs: CostModel,
    *,
    clock: SimulatedClock | None = None,
    seed: int = 0,
    has_draft: bool = True,
    slow: Mapping[int, float] | None = None,
    lookup: bool = True,
) -> ReplayResult:
    """Run `policy` over `trace` round by round, as `decode.generate` would, on simulated time.

    The draft starts level with the prompt (prefilled); after rounds it sits out it reads the
    skipped tokens in its first step (the last `read_limit` of them where the plan says so), as
    in the real loop. Pass the clock the policy was built with. `slow` maps a round's index to
    how many times its passes take (a stall, or a one-time cost such as a shape compiled).
    `lookup=False` skips prompt lookup's matching, which a draft-model policy never reads.
    """
    rng = random.Random(seed)
    clock = clock or SimulatedClock()

    def timed(seconds: float) -> float:
        return seconds * math.exp(rng.gauss(0.0, costs.noise)) if costs.noise else seconds

    answer, hits = trace.answer, trace.draft_hits
    matcher = PromptLookup(trace.prompt) if lookup else None
    result = ReplayResult(0, 0.0, 0)
    policy.begin_answer()
    t, lag, start = 0, 0, clock.now
    queued = False  # this round's plain step was queued under the last (choose_ahead said so)
    while t < len(answer):
        remaining = len(answer) - t
        candidates = matcher.propose(min(MAX_DRAFT, remaining - 1))[0] if matcher else []
        tick = time.perf_counter()
        plan = (
            DraftPlan(0, Provenance.MAIN)
            if queued
            else as_plan(
                policy.choose(RoundContext(has_draft, remaining, t, len(candidates), tuple(candidates)))
            )
        )
        decision = policy.decision()  # before choose_ahead, which is the next round's choice (as decode's)
        result.policy_seconds += time.perf_counter() - tick
        k, source = playable(plan, remaining, len(candidates), has_draft)
        draft_s, catch_up = 0.0, 0
        if source is Provenance.DRAFT:
            if plan.read_limit is not None:  # skips the rest; the acceptance a gap costs is not replayed
                lag = min(lag, plan.read_limit)
            accepted = _leading(hits[t : t + k])
            proposed = tuple(answer[t : t + accepted]) + (-1,) * (k - accepted)
            draft_s = timed(costs.draft_seconds(k, lag))
            catch_up = lag
        elif source is Provenance.LOOKUP:
            proposed = tuple(candidates[:k])
            accepted = _leading(a == b for a, b in zip(candidates[:k], answer[t:]))
        else:
            proposed, accepted = (), 0
        verify_s = timed(costs.queued if queued else costs.verify_seconds(k + 1))
        if slow and result.rounds in slow:
            result.slow_seconds += (slow[result.rounds] - 1.0) * (draft_s + verify_s)
            draft_s, verify_s = draft_s * slow[result.rounds], verify_s * slow[result.rounds]
        overhead = timed(costs.overhead) if costs.overhead and not queued else 0.0
        was_queued, queued = queued, False
        if costs.queued and k == 0 and remaining > 1:  # as decode's queue_ahead asks
            tick = time.perf_counter()
            ahead = RoundContext(has_draft, remaining - 1, t + 1, len(candidates), tuple(candidates))
            queued = policy.choose_ahead(ahead)
            result.policy_seconds += time.perf_counter() - tick
        clock.now += draft_s + verify_s + overhead
        emitted = answer[t : t + min(accepted + 1, remaining)]
        event = RoundEvent(
            index=result.rounds,
            k=k,
            proposed=proposed,
            accepted=accepted,
            emitted=emitted,
            draft_seconds=draft_s,
            verify_seconds=verify_s,
            source=source,
            decision=decision,
            catch_up=catch_up,
            overlapped=was_queued or queued,
        )
        tick = time.perf_counter()
        policy.observe(event)
        result.policy_seconds += time.perf_counter() - tick
        # the draft holds every kept token but the last it proposed when all of them passed
        lag = (1 if accepted == k else 0) if source is Provenance.DRAFT else lag + len(emitted)
        if matcher:
            matcher.extend(emitted)
        t += len(emitted)
        result.rounds += 1
        result.accepted += accepted
        result.plans[(source.value, k)] += 1
        result.choices.append((source.value, k))
    result.tokens, result.seconds = t, clock.now - start
    return result


def save_traces(path: Path, traces: list[Trace], costs: CostModel | None) -> None:
    """Recorded answers (and the costs measured with them) as JSON, to replay without the models."""
    payload = {
        "traces": [
            {
                "label": t.label,
                "prompt": list(t.prompt),
                "answer": list(t.answer),
                "draft_hits": list(t.draft_hits),
            }
            for t in traces
        ],
        "costs": asdict(costs) if costs else None,
    }
    path.write_text(json.dumps(payload), encoding="utf-8")


def load_traces(path: Path) -> tuple[list[Trace], CostModel | None]:
    """What `save_traces` wrote."""
    data = json.loads(path.read_text(encoding="utf-8"))
    traces = [
        Trace(
            tuple(t["prompt"]),
            tuple(t["answer"]),
            tuple(t["draft_hits"]),
            t.get("label", ""),
        )
        for t in data["traces"]
    ]
    costs = data.get("costs")
    if not costs:
        return traces, None
    return traces, CostModel(
        **{**costs, "verify": tuple(costs["verify"]), "spells": tuple(costs.get("spells", ()))}
    )


def run_policies(
    traces: list[Trace],
    costs: CostModel,
    ks: tuple[int, ...],
    *,
    seed: int = 0,
    has_draft: bool = True,
    adaptive: dict[str, dict[str, Any]] | None = None,
) -> dict[str, list[ReplayResult]]:
    """Plain, every fixed k and adaptive controllers over `traces` in order, one result per
    trace. `adaptive` maps a label to the controller's options (default: "adaptive", the draft
    model's, and "lookup", prompt lookup's). One controller serves all the traces, as the app
    keeps one per loaded pair."""
    from app.engine.decoding.policy import FixedDraftLength, PlainDecoding
    from app.engine.policy.adaptive import AdaptiveDraftLength

    variants = adaptive if adaptive is not None else {"adaptive": {}, "lookup": {"use_draft": False}}
    controllers = {}
    for label, options in variants.items():
        clock = SimulatedClock()
        controllers[label] = (AdaptiveDraftLength(clock=clock, **options), clock)
    out: dict[str, list[ReplayResult]] = {
        "plain": [],
        **{f"fixed{k}": [] for k in ks},
        **{v: [] for v in variants},
    }
    for i, trace in enumerate(traces):
        run_seed = seed * 100_003 + i
        costs_i = costs.for_answer(i)
        out["plain"].append(replay(trace, PlainDecoding(), costs_i, seed=run_seed, has_draft=has_draft))
        for k in ks:
            out[f"fixed{k}"].append(
                replay(trace, FixedDraftLength(k), costs_i, seed=run_seed, has_draft=has_draft)
            )
        for label, (controller, clock) in controllers.items():
            out[label].append(
                replay(trace, controller, costs_i, clock=clock, seed=run_seed, has_draft=has_draft)
            )
    return out
