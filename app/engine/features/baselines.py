"""The main model's plain decoding speed, per context length: what "speedup" is measured against.

Decoding slows as the context grows (attention reads every cached token), so one plain number
per model flatters short chats and wrongs long ones. Speeds are kept per (main model, context
bucket), buckets being powers of two of the context's tokens, and persisted as JSON in the
app-data folder. Each measurement is kept with when it ran and the machine's load then, and an
answer is compared only with plain measured under its own conditions (`read_plain`), with the
range that comparison is sure of. A bucket without such measurements is measured on the worker:
a scratch plain session is filled to about that many tokens and decodes a few dozen more through
the same `generate` loop the chat uses. The measurement yields to anything else the worker is
asked to do.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.engine.decoding.decode import generate
from app.engine.decoding.events import FinishReason, GenerationFinished, TokenEvent
from app.engine.decoding.loading import LoadedModel, ModelPair
from app.engine.decoding.policy import PlainDecoding
from app.engine.decoding.session import ChatSession
from app.engine.library.paths import app_data_dir

MIN_BUCKET = 128  # every context under 256 tokens shares the 128 bucket
MEASURE_TOKENS = 32  # tokens decoded by one measurement
MIN_RATE_TOKENS = 8  # fewer tokens than this give no rate
# a speedup is read only against plain measured under the answer's conditions: at least
# MIN_SAMPLES measurements within FRESH_FOR seconds of it, at a 1-minute load average within
# LOAD_CHANGE of its own (a busy machine decodes plain slower, which flatters the draft)
MIN_SAMPLES = 3
FRESH_FOR = 30 * 60.0
LOAD_CHANGE = 1.0
KEEP_SAMPLES = 12  # per bucket, newest last
FILE_VERSION = 2  # version 1 kept one smoothed speed without its conditions: not read
T90 = {2: 2.920, 3: 2.353, 4: 2.132, 5: 2.015, 6: 1.943, 7: 1.895, 8: 1.860, 9: 1.833, 10: 1.812, 11: 1.796}
FILLER = (
    "The committee met on a grey morning to review the harbour accounts, the repairs to the north "
    "pier, the schedule of the ferries and the letters received from residents since the spring. "
)


def context_bucket(tokens: int) -> int:
    """The power of two at or below `tokens` (at least MIN_BUCKET): bucket b holds [b, 2b)."""
    return 1 << max(MIN_BUCKET.bit_length() - 1, int(tokens).bit_length() - 1)


def bucket_label(bucket: int) -> str:
    """The contexts a bucket holds, in words: "under 256" or "512–1,023"."""
    return f"under {2 * MIN_BUCKET:,}" if bucket <= MIN_BUCKET else f"{bucket:,}–{2 * bucket - 1:,}"


@dataclass(frozen=True, slots=True)
class BaselineMeasured:
    """A measurement's outcome; `tok_s` is None when it was cancelled or too short."""

    main: str
    context_tokens: int
    bucket: int
    tok_s: float | None
    tokens: int
    seconds: float
    cancelled: bool = False


class Preemptible(threading.Event):
    """A cancel flag that is also set while `pending()` says other work is waiting."""

    def __init__(self, cancel: threading.Event, pending: Callable[[], bool]) -> None:
        super().__init__()
        self._cancel, self._pending = cancel, pending

    def is_set(self) -> bool:
        return self._cancel.is_set() or self._pending() or super().is_set()


def filler_ids(tokenizer: Any, count: int) -> list[int]:
    """`count` tokens of neutral prose: attention cost depends on length, not content."""
    unit = list(tokenizer.encode(FILLER)) or [0]
    return (unit * (count // len(unit) + 1))[: max(1, count)]


def measure_plain(
    main: LoadedModel,
    context_tokens: int,
    tokens: int = MEASURE_TOKENS,
    cancel: threading.Event | None = None,
) -> BaselineMeasured:
    """Plain tok/s of `main` decoding `tokens` tokens after `context_tokens` of context.

    The rate runs from the first token to the last, so the scratch prefill is not counted.
    """
    session = ChatSession(ModelPair(main, None))
    times: list[float] = []
    reason = FinishReason.CANCELLED
    start = time.perf_counter()
    prompt = filler_ids(main.tokenizer, context_tokens)
    for event in generate(
        session, prompt, policy=PlainDecoding(), max_tokens=tokens, cancel=cancel, stop_ids=()
    ):
        if isinstance(event, TokenEvent):
            times.append(event.time)
        elif isinstance(event, GenerationFinished):
            reason = event.reason
    span = times[-1] - times[0] if len(times) > 1 else 0.0
    cancelled = reason == FinishReason.CANCELLED
    rate = (len(times) - 1) / span if not cancelled and len(times) >= MIN_RATE_TOKENS and span > 0 else None
    return BaselineMeasured(
        main.source,
        len(prompt),
        context_bucket(len(prompt)),
        rate,
        len(times),
        time.perf_counter() - start,
        cancelled,
    )


@dataclass(frozen=True, slots=True)
class PlainSample:
    """One plain measurement and the conditions it ran under."""

    tok_s: float
    when: float  # time.time() at its end
    load: float | None  # the 1-minute load average then; None where the system does not say


@dataclass(frozen=True, slots=True)
class PlainReading:
    """Plain speed under given conditions: the mean of `samples` measurements made under them,
    and the range the true speed is in 9 times in 10 (Student's t over their spread)."""

    tok_s: float
    low: float
    high: float
    samples: int
    load: float | None  # the conditions it was read for
    when: float


def default_baselines_path() -> Path:
    return app_data_dir() / "plain_baselines.json"


def current_load() -> float | None:
    """The 1-minute load average (macOS and Linux); None where there is none to read."""
    try:
        return os.getloadavg()[0]
    except (OSError, AttributeError):
        return None


def on_battery() -> bool:
    """Whether the computer runs on its battery now: plain is then measured only when asked, since
    a measurement keeps the machine busy for tens of seconds. macOS asks `pmset`; Linux reads the
    mains supply's state; anything unreadable counts as plugged in."""
    if sys.platform == "darwin":
        try:
            out = subprocess.run(["pmset", "-g", "batt"], capture_output=True, text=True, timeout=2).stdout
        except (OSError, subprocess.SubprocessError):
            return False
        return "'Battery Power'" in out
    try:
        mains = [p for p in Path("/sys/class/power_supply").iterdir() if _read(p / "type") == "Mains"]
    except OSError:
        return False
    return bool(mains) and all(_read(p / "online") == "0" for p in mains)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8").strip()
    except OSError:
        return ""


def same_conditions(sample: PlainSample, load: float | None, when: float) -> bool:
    """Whether `sample` was measured under the conditions of `load` at `when`."""
    if abs(sample.when - when) > FRESH_FOR:
        return False
    if sample.load is None or load is None:
        return sample.load is None and load is None  # a system without a load average: time alone
    return abs(sample.load - load) < LOAD_CHANGE


def read_plain(samples: list[PlainSample], load: float | None, when: float) -> PlainReading | None:
    """Plain speed for an answer under `load` at `when`, or None while fewer than MIN_SAMPLES
    measurements were made under those conditions: a ratio against anything else misleads."""
    rates = [s.tok_s for s in samples if same_conditions(s, load, when)]
    n = len(rates)
    if n < MIN_SAMPLES:
        return None
    mean = sum(rates) / n
    spread = math.sqrt(sum((r - mean) ** 2 for r in rates) / (n - 1))
    half = T90.get(n - 1, 1.645) * spread / math.sqrt(n)
    return PlainReading(mean, max(mean - half, mean / 2), mean + half, n, load, when)


class BaselineCache:
    """Plain measurements per (main model, context bucket), with when and under what load each
    ran; every change is written through at once. `load` and `clock` are injectable for tests.

    Used from one thread (the UI's); a damaged file, or one that kept only a smoothed speed
    without its conditions, is read as empty rather than failing.
    """

    def __init__(
        self,
        path: Path | str | None = None,
        *,
        load: Callable[[], float | None] = current_load,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = Path(path) if path is not None else default_baselines_path()
        self.load, self.clock = load, clock
        self._data: dict[str, dict[int, list[PlainSample]]] = {}
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
            if raw.get("version") == FILE_VERSION:
                for main, buckets in raw["samples"].items():
                    self._data[main] = {
                        int(b): [_sample(v) for v in values][-KEEP_SAMPLES:] for b, values in buckets.items()
                    }
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            self._data = {}

    def reading(
        self, main: str | None, context_tokens: int, load: float | None = None, when: float | None = None
    ) -> PlainReading | None:
        """Plain speed at this context under the given conditions (default: now's)."""
        samples = self._data.get(main or "", {}).get(context_bucket(context_tokens), [])
        if when is None:
            load, when = self.load(), self.clock()
        return read_plain(samples, load, when)

    def get(self, main: str | None, context_tokens: int) -> float | None:
        """Plain tok/s at this context now, or None when not measured under today's conditions."""
        reading = self.reading(main, context_tokens)
        return reading.tok_s if reading else None

    def entries(self, main: str) -> dict[int, list[PlainSample]]:
        return {b: list(v) for b, v in self._data.get(main, {}).items()}

    def add(self, main: str | None, context_tokens: int, tok_s: float) -> PlainReading | None:
        """Keep one measurement under now's conditions; returns the reading it completes, if any."""
        if not main or not tok_s or tok_s <= 0:
            return None
        samples = self._data.setdefault(main, {}).setdefault(context_bucket(context_tokens), [])
        samples.append(PlainSample(tok_s, self.clock(), self.load()))
        del samples[:-KEEP_SAMPLES]
        self._save()
        return self.reading(main, context_tokens)

    def _save(self) -> None:
        data = {
            "version": FILE_VERSION,
            "samples": {
                main: {str(b): [[s.tok_s, s.when, s.load] for s in v] for b, v in buckets.items()}
                for main, buckets in self._data.items()
            },
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data), encoding="utf-8")
        os.replace(tmp, self.path)


def _sample(value: Any) -> PlainSample:
    tok_s, when, load = value
    if float(tok_s) <= 0 or not math.isfinite(float(when)):
        raise ValueError("a plain sample is a positive speed at a time")
    return PlainSample(float(tok_s), float(when), None if load is None else float(load))
