"""The main model's plain decoding speed, per context length: what "speedup" is measured against.

Decoding slows as the context grows (attention reads every cached token), so one plain number
per model flatters short chats and wrongs long ones. Speeds are kept per (main model, context
bucket), buckets being powers of two of the context's tokens, and persisted as JSON in the
app-data folder. A bucket with no value is measured on the worker: a scratch plain session is
filled to about that many tokens and decodes a few dozen more through the same `generate` loop
the chat uses. The measurement yields to anything else the worker is asked to do.
"""

from __future__ import annotations

import json
import os
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
SMOOTHING = 0.3  # weight of a new value against the bucket's old one
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
class Baseline:
    tok_s: float
    samples: int
    updated: float  # time.time() of the last sample


def default_baselines_path() -> Path:
    return app_data_dir() / "plain_baselines.json"


class BaselineCache:
    """Plain tok/s per (main model, context bucket); every change is written through at once.

    Used from one thread (the UI's); a damaged file is read as empty rather than failing.
    """

    def __init__(self, path: Path | str | None = None) -> None:
        self.path = Path(path) if path is not None else default_baselines_path()
        self._data: dict[str, dict[int, Baseline]] = {}
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
            for main, buckets in raw.get("baselines", {}).items():
                self._data[main] = {
                    int(b): Baseline(float(v["tok_s"]), int(v["samples"]), float(v["updated"]))
                    for b, v in buckets.items()
                }
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            self._data = {}

    def get(self, main: str | None, context_tokens: int) -> float | None:
        entry = self._data.get(main or "", {}).get(context_bucket(context_tokens))
        return entry.tok_s if entry else None

    def entries(self, main: str) -> dict[int, Baseline]:
        return dict(self._data.get(main, {}))

    def add(self, main: str | None, context_tokens: int, tok_s: float) -> float | None:
        """Fold one measurement into its bucket (smoothed); returns the bucket's new value."""
        if not main or not tok_s or tok_s <= 0:
            return None
        bucket = context_bucket(context_tokens)
        old = self._data.setdefault(main, {}).get(bucket)
        value = tok_s if old is None else old.tok_s + SMOOTHING * (tok_s - old.tok_s)
        self._data[main][bucket] = Baseline(value, (old.samples if old else 0) + 1, time.time())
        self._save()
        return value

    def _save(self) -> None:
        data = {
            "version": 1,
            "baselines": {
                main: {
                    str(b): {"tok_s": e.tok_s, "samples": e.samples, "updated": e.updated}
                    for b, e in buckets.items()
                }
                for main, buckets in self._data.items()
            },
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
        os.replace(tmp, self.path)
