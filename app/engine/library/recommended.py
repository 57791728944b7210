"""Pairs suggested to first-time users: MLX repos on the hub, with approximate download sizes.

On a GPU (Metal, CUDA) the suggestions are 4-bit 7-8B pairs. Where MLX computes on the CPU,
4-bit weights run many times slower than 16-bit ones (docs/performance.md) and a 7B model at 16
bits is too slow to chat with, so smaller 16-bit (bf16) pairs are suggested there instead.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RecommendedPair:
    title: str
    main_repo: str
    draft_repo: str
    main_bytes: int  # approximate: the repos' safetensors plus metadata
    draft_bytes: int

    @property
    def download_bytes(self) -> int:
        return self.main_bytes + self.draft_bytes


RECOMMENDED: tuple[RecommendedPair, ...] = (
    RecommendedPair(
        "Qwen2.5 7B with 0.5B",
        "mlx-community/Qwen2.5-7B-Instruct-4bit",
        "mlx-community/Qwen2.5-0.5B-Instruct-4bit",
        4_300_000_000,
        280_000_000,
    ),
    RecommendedPair(
        "Llama 3.1 8B with 3.2 1B",
        "mlx-community/Meta-Llama-3.1-8B-Instruct-4bit",
        "mlx-community/Llama-3.2-1B-Instruct-4bit",
        4_520_000_000,
        700_000_000,
    ),
    RecommendedPair(
        "Qwen2.5-Coder 7B with 0.5B",
        "mlx-community/Qwen2.5-Coder-7B-Instruct-4bit",
        "mlx-community/Qwen2.5-Coder-0.5B-Instruct-4bit",
        4_300_000_000,
        280_000_000,
    ),
)

CPU_RECOMMENDED: tuple[RecommendedPair, ...] = (
    RecommendedPair(
        "Qwen2.5 1.5B with 0.5B",
        "mlx-community/Qwen2.5-1.5B-Instruct-bf16",
        "mlx-community/Qwen2.5-0.5B-Instruct-bf16",
        3_090_000_000,
        990_000_000,
    ),
    RecommendedPair(
        "Llama 3.2 3B with 1B",
        "mlx-community/Llama-3.2-3B-Instruct-bf16",
        "mlx-community/Llama-3.2-1B-Instruct-bf16",
        6_430_000_000,
        2_470_000_000,
    ),
)


def recommended_pairs() -> tuple[RecommendedPair, ...]:
    """The pairs to suggest on this device: 16-bit small pairs where MLX computes on the CPU."""
    from app.engine.library.precision import default_bits

    return CPU_RECOMMENDED if default_bits() == 16 else RECOMMENDED


ALL_RECOMMENDED = RECOMMENDED + CPU_RECOMMENDED  # any suggested repo, on whichever device
