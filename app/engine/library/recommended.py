"""Pairs suggested to first-time users: MLX repos on the hub, with approximate download sizes."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RecommendedPair:
    title: str
    main_repo: str
    draft_repo: str
    main_bytes: int  # approximate: the repos' 4-bit safetensors plus metadata
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
