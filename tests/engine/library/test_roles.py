"""Roles, family names and downloadable drafts, from the facts the library already has."""

from __future__ import annotations

import dataclasses

from app.engine.library.facts import ModelFacts
from app.engine.library.roles import family_name, recommended_drafts, suggested_role


def facts(name: str, params: int, vocab: str = "v1") -> ModelFacts:
    return ModelFacts(
        path=f"/m/{name}", name=name, source="user", fingerprint=name, architecture="qwen2",
        params=params, bits=4, size_bytes=params // 2, context_length=32768, vocab_size=151_000,
        vocab_fingerprint=vocab, vision=False, trim="full", sliding_window=None, kv_bytes_per_token=1,
    )  # fmt: skip


def test_family_names_drop_size_and_quantization():
    assert family_name("SmolLM2-135M-Instruct-Q4_1-4bit") == "SmolLM2"
    assert family_name("mlx-community/Qwen2.5-Coder-0.5B-Instruct-4bit") == "Qwen2.5-Coder"
    assert family_name("Meta-Llama-3.1-8B-Instruct-4bit") == "Meta-Llama-3.1"


def test_the_large_model_is_main_and_a_small_one_of_its_vocabulary_the_draft():
    big, small, other = (
        facts("Qwen2.5-7B", 7_000_000_000),
        facts("Qwen2.5-0.5B", 500_000_000),
        facts("Smol", 135_000_000, "v2"),
    )
    library = [small, big, other]
    assert suggested_role(big, library) == "main"
    assert suggested_role(small, library) == "draft"
    assert suggested_role(other, library) == "main"  # nothing larger shares its vocabulary
    broken = dataclasses.replace(big, problems=("no weights",))
    assert suggested_role(small, [small, broken]) == "main"


def test_downloadable_drafts_are_of_the_family_and_much_smaller():
    repos = [d.repo for d in recommended_drafts(facts("Qwen2.5-Coder-7B-Instruct-4bit", 7_600_000_000))]
    assert "mlx-community/Qwen2.5-Coder-0.5B-Instruct-4bit" in repos
    assert all("Llama" not in r for r in repos)
    assert recommended_drafts(facts("Qwen2.5-Coder-0.5B-Instruct", 630_000_000)) == []
    assert recommended_drafts(facts("SmolLM2-135M-Instruct", 135_000_000, "v2")) == []
