"""Side-by-side benchmark of decoding modes on one loaded pair, interleaved per prompt.

Every mode is timed the same way, from the outside: the decode rate is (tokens - 1) over the
time between the first and the last token, so prompt processing (identical for all modes) does
not dilute the ratios. A mode's output is compared token for token with plain decoding's.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from app.engine.decoding.context import answer_room, context_length
from app.engine.decoding.loading import ModelPair
from app.engine.decoding.sampling import SamplingParams
from app.engine.decoding.templates.chat import format_chat
from app.engine.features.prompts import BUILTIN_PROMPTS, BenchPrompt
from app.engine.features.timed_run import TimedRun, run_timed
from app.engine.policy.modes import Memory, PairPolicies, SpeculationMode, remembered
from app.engine.policy.oracle import RoundRecord
from app.engine.policy.warmup import compile_pass_shapes

# plain2 is plain decoding run a second time: its ratio to plain is this machine's own noise
# (on a shared machine the same answer's time varies widely), the yardstick for any other ratio
MODES = ("plain", "plain2", "mlx_lm", "fixed", "adaptive", "lookup")
PLAIN_MODES = ("plain", "plain2")
OURS_SPECULATIVE = ("fixed", "adaptive", "lookup")
# bench's words for the things it times, and the policy each of ours runs; "off" is plain's other name
POLICY_MODES = {
    "plain": SpeculationMode.OFF,
    "plain2": SpeculationMode.OFF,
    "fixed": SpeculationMode.FIXED,
    "adaptive": SpeculationMode.ADAPTIVE,
    "lookup": SpeculationMode.LOOKUP,
}
ALIASES = {"off": "plain"}


def load_prompts(spec: str, classes: str | None = None) -> list[BenchPrompt]:
    """`builtin`, or a JSON file: a list of {"id", "class", "prompt"} objects; with `classes`
    (comma-separated), only the prompts of those classes."""
    prompts = _read_prompts(spec)
    if classes:
        wanted = set(classes.split(","))
        known = sorted({p.prompt_class for p in prompts})
        prompts = [p for p in prompts if p.prompt_class in wanted]
        if not prompts:
            # An empty run would fail later with no word about why.
            raise ValueError(f"{spec}: no prompts of class {classes} (classes: {', '.join(known)})")
    return prompts


def _read_prompts(spec: str) -> list[BenchPrompt]:
    if spec == "builtin":
        return list(BUILTIN_PROMPTS)
    data = json.loads(Path(spec).read_text(encoding="utf-8"))
    if not isinstance(data, list) or not data:
        raise ValueError(f"{spec}: expected a non-empty JSON list of prompts")
    prompts = []
    for i, item in enumerate(data):
        if not isinstance(item, dict) or not isinstance(item.get("prompt"), str):
            raise ValueError(f"{spec}: item {i} needs a string 'prompt'")
        prompts.append(
            BenchPrompt(str(item.get("id", f"p{i}")), str(item.get("class", "custom")), item["prompt"])
        )
    return prompts


@dataclass(frozen=True, slots=True)
class BenchRun:
    prompt_id: str
    prompt_class: str
    mode: str
    k: int
    temperature: float
    tokens: int
    seconds: float  # first token to last token
    tok_per_s: float
    ttft: float
    proposed: int
    accepted: int
    rounds: int
    identical_to_plain: bool | None
    token_ids: tuple[int, ...]
    acceptance: str = ""  # exact or residual for our speculative modes
    round_log: tuple[RoundRecord, ...] = ()
    repeat: int = 0  # runs of one repeat ran back to back: a ratio between them is paired

    @property
    def label(self) -> str:
        return (
            self.mode
            + (f"{self.k}" if self.mode == "fixed" else "")
            + (f"/{self.acceptance[:5]}" if self.acceptance and self.temperature > 0 else "")
        )

    def to_json(self) -> dict[str, object]:
        data = asdict(self)
        data.pop("token_ids")
        data["ks"] = [r.k for r in self.round_log]
        # round_log stays: every round as the policy saw it, what a surprising ratio is explained by
        for row in data["round_log"]:
            row["expected_speedup"] = round(float(row["expected_speedup"]), 3)
            row["draft_speedup_by_k"] = [round(x, 3) for x in row["draft_speedup_by_k"]]
        return data


def run_mlx_lm(
    pair: ModelPair, prompt: list[int], k: int, sampling: SamplingParams, max_tokens: int
) -> TimedRun:
    """mlx-lm's own loop with the same pair, k and temperature: speculative, or plain without a draft."""
    import mlx.core as mx
    from mlx_lm import stream_generate
    from mlx_lm.sample_utils import make_sampler

    if sampling.seed is not None:
        mx.random.seed(sampling.seed)
    sampler = make_sampler(
        temp=sampling.temperature, top_p=sampling.top_p, min_p=sampling.min_p, top_k=sampling.top_k
    )
    eos = set(pair.tokenizer.eos_token_ids)
    timing = TimedRun([], [], time.perf_counter())
    from_draft: list[bool] = []
    for response in stream_generate(
        pair.main.model,
        pair.tokenizer,
        mx.array(prompt),
        max_tokens=max_tokens,
        draft_model=pair.draft.model if pair.draft else None,
        num_draft_tokens=k,
        sampler=sampler,
    ):
        if response.token in eos:
            break
        timing.ids.append(response.token)
        timing.stamps.append(time.perf_counter())
        from_draft.append(bool(response.from_draft))
    # mlx-lm reports no rounds; each one drafts min(k, tokens left) and ends with one token
    # of the main's own, except a last round cut short by max_tokens.
    if pair.draft is not None:
        emitted = 0
        for i, drafted in enumerate(from_draft):
            if i == 0 or not from_draft[i - 1]:
                timing.rounds += 1
                timing.proposed += min(k, max_tokens - emitted)
            timing.accepted += drafted
            emitted += 1
    else:
        timing.rounds = len(from_draft)
    return timing


def _to_run(
    p: BenchPrompt,
    mode: str,
    k: int,
    sampling: SamplingParams,
    t: TimedRun,
    plain: list[int] | None,
    acceptance: str = "",
    repeat: int = 0,
) -> BenchRun:
    n = len(t.ids)
    return BenchRun(
        prompt_id=p.id,
        prompt_class=p.prompt_class,
        mode=mode,
        k=k if mode not in PLAIN_MODES else 0,
        temperature=sampling.temperature,
        tokens=n,
        seconds=t.decode_span[1],
        tok_per_s=t.decode_rate,
        ttft=(t.stamps[0] - t.start) if n else 0.0,
        proposed=t.proposed,
        accepted=t.accepted,
        rounds=t.rounds,
        identical_to_plain=None if plain is None else t.ids == plain,
        token_ids=tuple(t.ids),
        acceptance=acceptance,
        round_log=tuple(t.log),
        repeat=repeat,
    )


def run_benchmark(
    pair: ModelPair,
    prompts: list[BenchPrompt],
    *,
    modes: tuple[str, ...] = ("plain", "mlx_lm", "fixed"),
    k: int = 4,
    ks: tuple[int, ...] | None = None,
    max_tokens: int = 128,
    sampling: SamplingParams | None = None,
    acceptances: tuple[str, ...] | None = None,
    repeats: int = 1,
    warmup_tokens: int = 8,
    progress: Callable[[str], None] | None = None,
    memory: Memory | None = None,
) -> Iterator[BenchRun]:
    """Yield one BenchRun per (prompt, repeat, mode variant), interleaved per prompt.

    With a `memory` (the app's store), adaptive starts from what the app learnt about the pair
    on this device and saves to it after each run, so it measures what a user of the window gets.

    `fixed` runs once per k in `ks` (default: just `k`, which mlx_lm also uses). When sampling,
    our speculative modes run once per acceptance rule (default: exact and residual). "off"
    is read as plain, as everywhere else.
    """
    modes = tuple(dict.fromkeys(ALIASES.get(m, m) for m in modes))
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise ValueError(f"unknown mode(s) {', '.join(unknown)}; choose from {', '.join(MODES)}")
    # mlx_lm without a draft is mlx-lm's own plain loop: the reference for ours
    needs_draft = [m for m in modes if m == "fixed"]
    if needs_draft and pair.draft is None:
        raise ValueError(f"mode(s) {', '.join(needs_draft)} need a draft model (--draft)")
    sampling = sampling or SamplingParams()
    ks = ks or (k,)
    if acceptances is None:
        acceptances = ("exact",) if sampling.greedy else ("exact", "residual")
    modes = tuple(sorted(modes, key=lambda m: m != "plain"))  # plain first: the reference output
    variants: list[tuple[str, int, str]] = []
    for mode in modes:
        rules = acceptances if mode in OURS_SPECULATIVE else ("",)
        for kk in ks if mode == "fixed" else (k,):
            variants += [(mode, kk, rule) for rule in rules]

    # like the app's worker, adaptive keeps its estimates across the answers of one pair (one
    # controller per acceptance rule: each learns from its own rounds)
    policies: dict[str, PairPolicies] = {}

    def once(mode: str, kk: int, rule: str, prompt: list[int], tokens: int) -> TimedRun:
        if mode == "mlx_lm":
            return run_mlx_lm(pair, prompt, kk, sampling, tokens)
        if rule not in policies:
            draft = pair.draft.source if pair.draft is not None else None
            policies[rule] = remembered(memory, pair.main.source, draft)
        policy = policies[rule].policy(POLICY_MODES[mode], kk)
        run = run_timed(pair, prompt, policy, sampling, tokens, rule or None)
        policies[rule].answered(POLICY_MODES[mode])
        return run

    encoded = [format_chat(pair.tokenizer, [{"role": "user", "content": p.text}]) for p in prompts]
    limit = context_length(pair.main.config)
    for p, ids in zip(prompts, encoded):  # refused before any run, as `generate` refuses it
        answer_room(len(ids), max_tokens, limit, f"Shorten prompt {p.id}.")
    if any(m in ("adaptive", "lookup") for m in modes):
        # every size the controller may play, compiled before its first timed round (fixed k's
        # own warm-up compiles the one size it plays)
        compile_pass_shapes(pair, encoded[0])
    for mode, kk, rule in variants:  # warm-up: compile kernels, touch the weights
        once(mode, kk, rule, encoded[0], warmup_tokens)
    for p, prompt in zip(prompts, encoded):
        for r in range(repeats):
            # each repeat starts the variants at a different one: a machine that drifts (another
            # process, clocks) then favours no variant by always running it first or last
            shift = r % len(variants)
            timings: dict[tuple[str, int, str], TimedRun] = {}
            for mode, kk, rule in variants[shift:] + variants[:shift]:
                if progress:
                    progress(f"{p.id} [{r + 1}/{repeats}] {mode}{kk if mode == 'fixed' else ''} {rule}")
                timings[(mode, kk, rule)] = once(mode, kk, rule, prompt, max_tokens)
            plain_ids = timings[variants[0]].ids if variants[0][0] == "plain" else None
            for mode, kk, rule in variants:
                reference = plain_ids if mode != "plain" and sampling.greedy else None
                run = _to_run(p, mode, kk, sampling, timings[(mode, kk, rule)], reference, rule, r)
                yield _replace_identical(run, True) if mode == "plain" else run


def _replace_identical(run: BenchRun, value: bool) -> BenchRun:
    from dataclasses import replace

    return replace(run, identical_to_plain=value)
