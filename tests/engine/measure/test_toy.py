"""The toy model pair: deterministic, loadable by mlx-lm, and a useful vs a useless draft."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from app.engine.measure.toy import ToyModels, write_toy_models

SAMPLE = (
    "The quick brown fox jumps over the lazy dog. Speculative decoding lets a small draft "
    "model propose several tokens.\ndef fibonacci(n: int) -> list[int]:\n    return numbers\n"
    '{"name": "SpecChat", "version": "1.0.0"}'
)


def _hashes(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_same_seed_gives_same_bytes(tmp_path: Path, toy_models: ToyModels) -> None:
    again = write_toy_models(tmp_path / "again", seed=0)
    first = _hashes(toy_models.main.parent)
    assert first == _hashes(again.main.parent)
    assert {"main/model.safetensors", "draft/tokenizer.json", "draft_random/config.json"} <= set(first)


def test_other_seed_changes_weights_not_tokenizer(tmp_path: Path, toy_models: ToyModels) -> None:
    other = write_toy_models(tmp_path / "other", seed=1)
    a, b = _hashes(toy_models.main.parent), _hashes(other.main.parent)
    assert a["main/model.safetensors"] != b["main/model.safetensors"]
    assert a["main/tokenizer.json"] == b["main/tokenizer.json"]


def test_refuses_unrelated_folder_but_replaces_its_own(tmp_path: Path) -> None:
    unrelated = tmp_path / "mine"
    unrelated.mkdir()
    (unrelated / "notes.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="not empty"):
        write_toy_models(unrelated)
    assert (unrelated / "notes.txt").read_text() == "keep me"

    ours = write_toy_models(tmp_path / "ours", seed=0)
    write_toy_models(tmp_path / "ours", seed=1)  # its own output may be replaced
    assert ours.main.is_dir()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_mlx_lm_loads_all_three(toy_models: ToyModels) -> None:
    from mlx_lm import load

    vocab = None
    for path in (toy_models.main, toy_models.draft, toy_models.draft_random):
        model, tokenizer, config = load(str(path), return_config=True)
        assert config["model_type"] == "qwen2"
        assert tokenizer.eos_token_ids == {tokenizer.convert_tokens_to_ids("<|im_end|>")}
        assert tokenizer.chat_template
        ids = tokenizer.encode("日本語 👩‍👩‍👧‍👦 🏳️‍🌈 café", add_special_tokens=False)
        assert tokenizer.decode(ids) == "日本語 👩‍👩‍👧‍👦 🏳️‍🌈 café"
        assert vocab in (None, tokenizer.get_vocab())
        vocab = tokenizer.get_vocab()
    assert 900 <= len(vocab) <= 1024
    assert len(load(str(toy_models.main))[0].layers) == 6
    assert len(load(str(toy_models.draft))[0].layers) == 1


def _greedy_next(path: Path, ids: list[int]) -> list[int]:
    import mlx.core as mx
    from mlx_lm import load

    model, _ = load(str(path))
    return mx.argmax(model(mx.array([ids])), axis=-1)[0].tolist()


def test_draft_agrees_with_main_and_random_draft_does_not(toy_models: ToyModels) -> None:
    from mlx_lm import load

    _, tokenizer = load(str(toy_models.main))
    ids = tokenizer.encode(SAMPLE, add_special_tokens=False)
    main = _greedy_next(toy_models.main, ids)
    draft = _greedy_next(toy_models.draft, ids)
    rand = _greedy_next(toy_models.draft_random, ids)
    agree = sum(a == b for a, b in zip(main, draft)) / len(main)
    agree_random = sum(a == b for a, b in zip(main, rand)) / len(main)
    assert agree >= 0.6, agree
    assert agree_random <= 0.1, agree_random


def test_greedy_main_is_not_stuck_on_one_token(toy_models: ToyModels) -> None:
    from mlx_lm import generate, load

    model, tokenizer = load(str(toy_models.main))
    text = generate(model, tokenizer, prompt="Hello, how are", max_tokens=24, verbose=False)
    ids = tokenizer.encode(text, add_special_tokens=False)
    assert len(set(ids)) >= 5


def test_cli_writes_models(tmp_path: Path) -> None:
    out = tmp_path / "cli"
    root = Path(__file__).resolve().parents[3]
    done = subprocess.run(
        [sys.executable, "-m", "app", "toy-models", str(out), "--seed", "3"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    for name in ("main", "draft", "draft_random"):
        assert str(out / name) in done.stdout
        assert (out / name / "model.safetensors").is_file()
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "x").write_text("x")
    refused = subprocess.run(
        [sys.executable, "-m", "app", "toy-models", str(tmp_path / "busy")],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode == 2, "a folder that is not empty is refused (exit 2)"
    assert "not empty" in refused.stderr, "the error says the folder is not empty"
