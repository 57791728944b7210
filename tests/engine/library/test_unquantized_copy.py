"""An unquantized copy of a quantized model: made in a child process into the models folder,
it loads and answers with the quantized original's greedy tokens, is found again rather than
made twice, and a model that is not quantized, or a cancelled copy, leaves nothing behind."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from app.engine.library.dequantize import COPY_FILE, CopyFailed, CopyFinished, CopyProgress, copy_name
from app.engine.library.facts import compute_facts
from app.engine.library.unquantized_copy import make_copy
from app.engine.measure.toy import ToyModels

PROMPT = "The quick brown fox"


def quantize(source: Path, out: Path, bits: int = 4) -> Path:
    from mlx_lm.convert import convert

    convert(str(source), str(out), quantize=True, q_bits=bits, q_group_size=64)
    return out


@pytest.fixture(scope="module")
def quantized(toy_models: ToyModels, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The toy main at 4 bits, as mlx-lm quantizes it."""
    return quantize(toy_models.main, tmp_path_factory.mktemp("quantized") / "toy-main-4bit")


def greedy_tokens(folder: Path, count: int = 16) -> list[int]:
    from mlx_lm import load, stream_generate
    from mlx_lm.sample_utils import make_sampler

    model, tokenizer = load(str(folder))
    return [
        r.token
        for r in stream_generate(model, tokenizer, PROMPT, max_tokens=count, sampler=make_sampler(0.0))
    ]


def test_the_copy_loads_and_answers_as_the_quantized_model(quantized: Path, tmp_path: Path) -> None:
    events = list(make_copy(quantized, "toy-main-4bit", root=tmp_path))
    assert isinstance(events[-1], CopyFinished), events[-1]
    folder = Path(events[-1].path)
    assert folder == tmp_path / "toy-main-16bit", "the copy is named for its precision"
    assert not events[-1].existing, "the copy is new, not one found already"
    progress = [e for e in events if isinstance(e, CopyProgress)]
    assert progress[-1].done == progress[-1].total > 0
    assert [e.done for e in progress] == sorted(e.done for e in progress)

    config = json.loads((folder / "config.json").read_text())
    assert "quantization" not in config and "quantization_config" not in config
    facts = compute_facts(folder)
    assert facts.usable, "the copy is usable"
    assert facts.bits is not None and facts.bits >= 16, "the copy holds 16-bit weights or wider"
    assert facts.params == compute_facts(quantized).params
    assert (folder / "tokenizer.json").read_bytes() == (quantized / "tokenizer.json").read_bytes()
    assert greedy_tokens(folder) == greedy_tokens(quantized)


def test_an_earlier_copy_is_found_not_made_again(quantized: Path, tmp_path: Path) -> None:
    first = list(make_copy(quantized, "toy-main-4bit", root=tmp_path))[-1]
    again = list(make_copy(quantized, "toy-main-4bit", root=tmp_path))
    assert again == [CopyFinished(first.path, 0.0, existing=True)]  # type: ignore[union-attr]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["toy-main-16bit"]
    assert json.loads((tmp_path / "toy-main-16bit" / COPY_FILE).read_text())["from_bits"] == 4


def test_an_unquantized_model_is_refused(toy_models: ToyModels, tmp_path: Path) -> None:
    events = list(make_copy(toy_models.main, "toy-main", root=tmp_path / "models"))
    assert events == [CopyFailed("toy-main is not quantized: it needs no copy", "refused")]
    assert not (tmp_path / "models").exists()


def test_a_cancelled_copy_leaves_nothing(quantized: Path, tmp_path: Path) -> None:
    cancel = threading.Event()
    cancel.set()
    events = list(make_copy(quantized, "toy-main-4bit", root=tmp_path, cancel=cancel))
    assert events[-1] == CopyFailed("the copy was cancelled", "cancelled")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("label", "name"),
    [
        ("mlx-community/Qwen2.5-0.5B-Instruct-4bit", "Qwen2.5-0.5B-Instruct-16bit"),
        ("SmolLM2-135M-Instruct-Q4_1-4bit", "SmolLM2-135M-Instruct-Q4_1-16bit"),
        ("org/Llama-3-8B-8bits", "Llama-3-8B-16bit"),
        ("my-model", "my-model-16bit"),
    ],
)
def test_the_copy_is_named_after_the_model(label: str, name: str) -> None:
    assert copy_name(label) == name


def test_a_model_at_another_precision_is_never_its_own_draft(
    toy_models: ToyModels, quantized: Path, tmp_path: Path
) -> None:
    from app.engine.library.compat import check_pair
    from app.engine.library.store import Store

    store = Store(tmp_path / "store.sqlite3")
    for main, draft in ((toy_models.main, quantized), (quantized, toy_models.main)):
        verdict = check_pair(main, draft, store=store)
        assert not verdict.compatible, "the main model at another precision is refused as its draft"
        [reason] = [r for r in verdict.refusals if r.code == "same_model"]
        assert "main model itself at" in reason.message
    assert check_pair(toy_models.main, toy_models.draft, store=store).compatible, "a smaller draft is not"
