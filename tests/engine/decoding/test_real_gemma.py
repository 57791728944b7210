"""The real Gemma-3-270M (a 512-token sliding window) chats past its window in every mode and
answers as a fresh plain decode does.

Gemma-3-270M has no smaller sibling, so its draft is its own first six layers with its head: real
weights that agree with the main often but not always, so drafts are refused past the window and
the windowed caches are trimmed there. `pytest -m heavy -s` prints each mode's speed beside plain.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import mlx.core as mx
import pytest

from app.engine.decoding.loading import load_pair
from app.engine.decoding.session import ChatSession
from app.engine.decoding.templates.chat import format_chat
from app.engine.gguf.fixtures import mlx_path
from app.engine.policy.modes import SpeculationMode, make_policy
from tests.engine.decoding.lossless import compare, fresh_plain
from tests.engine.helpers import drive

pytestmark = [pytest.mark.real_models, pytest.mark.heavy]

DRAFT_LAYERS = 6
TURNS = (
    ("Write a long story about a lighthouse keeper and the ships she watches.", 360),
    ("Go on with the story: what happens the next winter?", 240),
)


def _first_layers(main: Path, out: Path, layers: int) -> Path:
    """A copy of `main` that keeps its first `layers` layers (and its embedding, norm and head)."""
    out.mkdir(parents=True, exist_ok=True)
    weights: dict[str, mx.array] = {}
    for shard in sorted(main.glob("*.safetensors")):
        loaded = mx.load(str(shard))
        assert isinstance(loaded, dict)
        for key, value in loaded.items():
            parts = key.split(".")
            if "layers" in parts and int(parts[parts.index("layers") + 1]) >= layers:
                continue
            weights[key] = value
    mx.save_safetensors(str(out / "model.safetensors"), weights, metadata={"format": "mlx"})
    config = json.loads((main / "config.json").read_text(encoding="utf-8"))
    config.pop("layer_types", None)
    config["num_hidden_layers"] = layers
    (out / "config.json").write_text(json.dumps(config), encoding="utf-8")
    for item in main.iterdir():
        if item.suffix != ".safetensors" and item.name not in ("config.json", "model.safetensors.index.json"):
            (out / item.name).write_bytes(item.read_bytes())
    return out


@pytest.mark.timeout(3600)  # five decodes of two long answers by a 270M model on a CPU
def test_a_chat_past_the_window_is_plain_decodings_in_every_mode(tmp_path: Path) -> None:
    main = mlx_path("gemma3", 16)
    if not (main / "config.json").is_file():
        pytest.skip("Gemma-3-270M is not fetched: python -m app fetch-models --models gemma3 --bits 16")
    pair = load_pair(main, _first_layers(main, tmp_path / "draft", DRAFT_LAYERS))
    window = json.loads((main / "config.json").read_text(encoding="utf-8")).get("sliding_window")
    modes = [SpeculationMode.OFF, SpeculationMode.FIXED, SpeculationMode.ADAPTIVE, SpeculationMode.LOOKUP]
    sessions = {mode: ChatSession(pair) for mode in modes}
    policies = {mode: make_policy(mode, 4) for mode in modes}
    seconds = dict.fromkeys(modes, 0.0)
    messages: list[dict[str, str]] = []
    for turn, (question, length) in enumerate(TURNS):
        messages.append({"role": "user", "content": question})
        prompt = format_chat(pair.tokenizer, messages)
        reference = fresh_plain(pair, prompt, length)
        for mode in modes:
            started = time.perf_counter()
            out = drive(sessions[mode], prompt, policies[mode], max_tokens=length, stop_ids=[])
            seconds[mode] += time.perf_counter() - started
            verdict = compare(pair, prompt, out.ids, reference)
            where = f"turn {turn}, {mode}, {len(prompt)} prompt tokens (window {window})"
            assert verdict.first_difference is None or verdict.near_tie, (
                f"{where}: differs from plain decoding at token {verdict.first_difference} "
                f"(top-two gap {verdict.gap:.4g})"
            )
            print(f"{where}: {len(out.ids)} tokens in {time.perf_counter() - started:.1f} s", flush=True)
            if verdict.first_difference is not None:
                print(f"{where}: near-tie at token {verdict.first_difference}")
        messages.append({"role": "assistant", "content": pair.tokenizer.decode(reference)})
    total = len(prompt) + TURNS[-1][1]
    assert window is not None and total > window + 100, "the chat ran well past the window"
    plain = seconds[SpeculationMode.OFF]
    for mode in modes:
        print(f"{mode}: {seconds[mode]:.1f} s for both answers, {plain / seconds[mode]:.2f}x plain")
