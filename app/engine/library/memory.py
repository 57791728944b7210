"""Will a main and draft fit in memory at a given context length? Decided before loading.

Weights are their size on disk; each KV cache is bytes-per-token times the context (capped at a
sliding window when the cache rotates); a fixed margin covers activations and the runtime.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from app.engine.library.facts import ModelFacts

OVERHEAD = 512 * 2**20  # activations, runtime, tokenizer


@dataclass(frozen=True, slots=True)
class MemoryFit:
    main_weights: int
    draft_weights: int
    main_kv: int
    draft_kv: int
    overhead: int
    usable: int
    context: int

    @property
    def total(self) -> int:
        return self.main_weights + self.draft_weights + self.main_kv + self.draft_kv + self.overhead

    @property
    def fits(self) -> bool:
        return self.total <= self.usable

    def explain(self) -> str:
        gib = 2**30
        parts = (
            f"main weights {self.main_weights / gib:.1f} GiB + draft weights {self.draft_weights / gib:.1f} GiB"
            f" + KV caches {(self.main_kv + self.draft_kv) / gib:.1f} GiB at {self.context:,} tokens"
            f" + {self.overhead / gib:.1f} GiB working margin = {self.total / gib:.1f} GiB"
        )
        verb = "fits in" if self.fits else "exceeds"
        return f"{parts}; {verb} the {self.usable / gib:.1f} GiB this machine can use"


def kv_bytes(facts: ModelFacts, context: int) -> int:
    tokens = (
        min(context, facts.sliding_window) if facts.trim == "window" and facts.sliding_window else context
    )
    return facts.kv_bytes_per_token * tokens


def usable_memory() -> int:
    """Metal's recommended working set on a Mac; available RAM elsewhere."""
    if sys.platform == "darwin":
        try:
            import mlx.core as mx

            info = mx.device_info() if hasattr(mx, "device_info") else mx.metal.device_info()
            size = int(info.get("max_recommended_working_set_size", 0))
            if size > 0:
                return size
        except Exception:  # no Metal device: fall through to physical memory
            pass
    return available_ram()


def available_ram() -> int:
    """Bytes of RAM this process may still use: MemAvailable on Linux, physical RAM elsewhere."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return physical_ram()


def physical_ram() -> int:
    """Bytes of RAM the machine has."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def memory_fit(
    main: ModelFacts, draft: ModelFacts | None, context: int, usable: int | None = None
) -> MemoryFit:
    return MemoryFit(
        main_weights=main.size_bytes,
        draft_weights=draft.size_bytes if draft is not None else 0,
        main_kv=kv_bytes(main, context),
        draft_kv=kv_bytes(draft, context) if draft is not None else 0,
        overhead=OVERHEAD,
        usable=usable if usable is not None else usable_memory(),
        context=context,
    )
