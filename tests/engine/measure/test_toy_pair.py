"""Real-shape random pairs: the draft's greedy agreement is what was asked, in memory and on disk."""

from __future__ import annotations

from pathlib import Path

import mlx.core as mx
import mlx.nn as nn
import numpy as np
import pytest

from app.cli import main as cli_main
from app.engine.decoding.loading import ModelPair, load_pair
from app.engine.decoding.templates.chat import format_chat
from app.engine.measure.toy import VOCAB_SIZE
from app.engine.measure.toy_pair import build_pair, measure_agreement
from app.engine.measure.toy_shapes import FIRST_TEXT_ID, greedy_maps, pair_spec


def _prompt(pair: ModelPair) -> list[int]:
    return format_chat(pair.tokenizer, [{"role": "user", "content": "Summarise the paragraph, please."}])


@pytest.mark.parametrize("agreement", [0.9, 0.5, 1.0])
def test_measured_agreement_is_the_asked_one(agreement: float) -> None:
    pair = build_pair("tiny", agreement=agreement, seed=3)
    measured = measure_agreement(pair, _prompt(pair), 200)
    assert measured == pytest.approx(agreement, abs=0.1)


def test_four_bit_pair_is_quantized_and_keeps_its_agreement() -> None:
    pair = build_pair("tiny", bits=4, agreement=0.9)
    assert pair.draft is not None
    kinds = {type(m).__name__ for _, m in pair.main.model.named_modules()}
    assert {"QuantizedLinear", "QuantizedEmbedding"} <= kinds and "Linear" not in kinds
    assert pair.main.config["quantization"] == {"group_size": 64, "bits": 4}
    assert measure_agreement(pair, _prompt(pair), 200) == pytest.approx(0.9, abs=0.1)


def test_answers_stay_in_the_tokenizers_ids_though_the_vocabulary_is_larger() -> None:
    pair = build_pair("tiny", agreement=0.9)
    assert pair.main.model.args.vocab_size > VOCAB_SIZE
    ids = mx.array(_prompt(pair))[None]
    greedy = mx.argmax(pair.main.model(ids)[0], axis=-1).tolist()
    assert isinstance(greedy, list)
    assert all(FIRST_TEXT_ID <= t < VOCAB_SIZE for t in greedy)


def test_same_seed_same_weights_other_seed_other_weights() -> None:
    def head(seed: int) -> np.ndarray:
        return np.array(build_pair("tiny", seed=seed).main.model.lm_head.weight)

    assert np.array_equal(head(1), head(1))
    assert not np.array_equal(head(1), head(2))


def test_greedy_maps_one_cycle_through_every_text_id() -> None:
    maps = greedy_maps(VOCAB_SIZE, 0.75, seed=0)
    seen, t = set(), FIRST_TEXT_ID
    for _ in range(VOCAB_SIZE):
        seen.add(t)
        t = int(maps.main[t])
    assert seen == set(range(FIRST_TEXT_ID, VOCAB_SIZE))
    assert maps.agreement() == pytest.approx(0.75, abs=1 / VOCAB_SIZE)
    assert int(maps.draft.min()) >= FIRST_TEXT_ID  # neither model ever ends an answer


def test_pair_names_carry_real_shapes() -> None:
    spec = pair_spec("7b-4bit")
    assert (spec.main.hidden, spec.main.layers, spec.main.heads, spec.main.kv_heads) == (3584, 28, 28, 4)
    assert (spec.main.intermediate, spec.main.vocab) == (18944, 152064)
    assert (spec.draft.hidden, spec.draft.layers, spec.draft.vocab, spec.bits) == (896, 24, 151936, 4)
    assert pair_spec("14b-bf16", bits=4).bits == 4
    with pytest.raises(ValueError, match="unknown pair"):
        pair_spec("3b-bf16")


def test_toy_models_writes_the_pair_that_loads_with_the_same_agreement(tmp_path: Path, capsys) -> None:
    out = tmp_path / "pair"
    assert cli_main(["toy-models", str(out), "--pair", "tiny", "--bits", "4", "--agreement", "0.8"]) == 0
    assert f"draft: {out / 'draft'}" in capsys.readouterr().out
    loaded = load_pair(out / "main", out / "draft")
    assert isinstance(loaded.main.model.lm_head, nn.QuantizedLinear)
    built = build_pair("tiny", bits=4, agreement=0.8)
    prompt = _prompt(loaded)
    assert measure_agreement(loaded, prompt, 100) == measure_agreement(built, prompt, 100)
