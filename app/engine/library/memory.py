"""Will a main and draft fit in memory at a given context length? Decided before loading.

Weights are their size on disk, twice that for 16-bit weights held as float32 where that runs
faster (`loading.held_dtype`); each KV cache is bytes-per-token times the context (capped at a
sliding window when the cache rotates); a fixed margin covers activations and the runtime. The
pair loaded now is freed by the one replacing it, so its weights count as memory to be had.
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
    freed: int = 0  # held now by the pair loaded, which loading this one frees
    others: int | None = None  # held by everything else on the machine, where that can be read

    @property
    def total(self) -> int:
        return self.main_weights + self.draft_weights + self.main_kv + self.draft_kv + self.overhead

    @property
    def fits(self) -> bool:
        return self.total <= self.usable + self.freed

    def explain(self) -> str:
        gib = 2**30
        parts = (
            f"main weights {self.main_weights / gib:.1f} GiB + draft weights {self.draft_weights / gib:.1f} GiB"
            f" + KV caches {(self.main_kv + self.draft_kv) / gib:.1f} GiB at {self.context:,} tokens"
            f" + {self.overhead / gib:.1f} GiB working margin = {self.total / gib:.1f} GiB"
        )
        verb = "fits in" if self.fits else "exceeds"
        text = f"{parts}; {verb} the {(self.usable + self.freed) / gib:.1f} GiB this machine can use"
        if self.freed:
            text += (
                f" ({self.freed / gib:.1f} GiB of it held now by the pair loaded, which this one replaces)"
            )
        if self.others:
            text += f"; other programs hold {self.others / gib:.1f} GiB"
        return text


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


def held_bytes(facts: ModelFacts, widened: bool) -> int:
    """A model's weights once loaded: their size on disk, twice that for 16-bit float weights
    where the loader widens them to float32 (`widened`)."""
    sixteen = facts.bits == 16 and not facts.problems
    return facts.size_bytes * (2 if widened and sixteen else 1)


def others_hold(freed: int) -> int | None:
    """Memory held by everything but the pair loaded now (Linux's /proc; None elsewhere)."""
    if not os.path.exists("/proc/meminfo"):
        return None
    return max(0, physical_ram() - available_ram() - freed)


def memory_fit(
    main: ModelFacts,
    draft: ModelFacts | None,
    context: int,
    usable: int | None = None,
    *,
    widened: bool = False,
    loaded: tuple[ModelFacts | None, ModelFacts | None] = (None, None),
) -> MemoryFit:
    """`widened`: 16-bit weights are held as float32 here; `loaded`: the pair loaded now (its
    main and draft, where known), which this one replaces."""
    freed = sum(held_bytes(f, widened) for f in loaded if f is not None)
    return MemoryFit(
        main_weights=held_bytes(main, widened),
        draft_weights=held_bytes(draft, widened) if draft is not None else 0,
        main_kv=kv_bytes(main, context),
        draft_kv=kv_bytes(draft, context) if draft is not None else 0,
        overhead=OVERHEAD,
        usable=usable if usable is not None else usable_memory(),
        context=context,
        freed=freed,
        others=others_hold(freed) if usable is None else None,
    )
