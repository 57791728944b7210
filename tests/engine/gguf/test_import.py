"""The importer end to end: child process, refusals, atomic output, and real-model imports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from app.engine.gguf.child import ImportFailed, ImportFinished, ImportProgress, run_import
from app.engine.gguf.header import read_header
from app.engine.gguf.tokenizer import build_tokenizer
from tests.engine.gguf.conftest import imported, need_gguf
from tests.engine.gguf.ggufbuild import header

REQUIRED_FILES = {"config.json", "tokenizer.json", "tokenizer_config.json", "specchat_source.json"}


def events_of(*args: object, **kwargs: object) -> list[object]:
    return list(run_import(*args, **kwargs))  # type: ignore[arg-type]


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_malformed_file_is_refused_before_any_child(tmp_path: Path) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(header(1000, 0) + b"\0" * 64)
    events = events_of(bad, tmp_path / "out")
    assert events == [ImportFailed(events[0].message, "invalid")]  # type: ignore[union-attr]
    assert "1,000 tensors" in events[0].message  # type: ignore[union-attr]
    assert leftovers(tmp_path) == ["bad.gguf"]


def test_unsupported_architecture_is_refused_in_the_child(tmp_path: Path) -> None:
    from tests.engine.gguf.ggufbuild import build

    path = tmp_path / "x.gguf"
    path.write_bytes(build({"general.architecture": "mamba"}, {"w": [[1.0, 2.0]]}))
    events = events_of(path, tmp_path / "out")
    assert isinstance(events[-1], ImportFailed) and events[-1].kind == "invalid"
    assert "'mamba' is not supported" in events[-1].message
    assert leftovers(tmp_path) == ["x.gguf"]


def test_cli_reports_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"NOPE" + b"\0" * 100)
    done = subprocess.run(
        [sys.executable, "-m", "app", "import-gguf", str(bad), "--out", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "not a GGUF file" in done.stderr


@pytest.mark.real_models
def test_memory_refusal_names_the_numbers(tmp_path: Path) -> None:
    events = events_of(need_gguf("smollm2"), tmp_path / "out", 4, memory_limit=1 << 20)
    assert isinstance(events[-1], ImportFailed) and events[-1].kind == "refused"
    assert "GiB of memory at once" in events[-1].message and "0.0 GiB free" in events[-1].message
    assert leftovers(tmp_path) == []


@pytest.mark.real_models
def test_cancelled_import_leaves_nothing(tmp_path: Path) -> None:
    cancel = threading.Event()
    final = None
    for event in run_import(need_gguf("smollm2"), tmp_path / "out", 16, cancel=cancel):
        if isinstance(event, ImportProgress) and event.stage == "tensors":
            cancel.set()
        final = event
    if isinstance(final, ImportFinished):  # the cancel reached the child after the model was in place
        assert leftovers(tmp_path) == ["out"] and (tmp_path / "out" / "config.json").exists()
        return
    assert isinstance(final, ImportFailed) and final.kind == "cancelled"
    assert leftovers(tmp_path) == []


@pytest.mark.real_models
def test_existing_output_is_not_overwritten(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    events = events_of(need_gguf("smollm2"), out, 4)
    assert isinstance(events[-1], ImportFailed) and "already exists" in events[-1].message


def _check_folder(folder: Path, key: str, bits: int) -> None:
    names = {p.name for p in folder.iterdir()}
    assert names >= REQUIRED_FILES
    assert any(n.startswith("model") and n.endswith(".safetensors") for n in names)
    assert not any(n.startswith(".") for n in names)
    source = json.loads((folder / "specchat_source.json").read_text())
    from app.engine.gguf.fixtures import FIXTURES

    assert source["sha256"] == FIXTURES[key].sha256, "the import records the GGUF file's hash"
    assert source["bits"] == bits, "the import records the bits it kept"
    config = json.loads((folder / "config.json").read_text())
    assert (config.get("quantization") or {}).get("bits", 16) == bits


def _greedy(folder: Path, prompt: str, n: int) -> str:
    """Greedy answer computed in float32: the Linux CPU build's bfloat16 quantized matmul is
    several percent off (a kernel matter, not the import's), which flips a 135M model's answer."""
    code = (  # with the BLAS the app loads, which reads a prompt several times faster
        "import sys, json\nsys.path.insert(0, sys.argv[4])\n"
        "from app.engine.blas import ensure_blas\nensure_blas()\n"
        "import mlx.core as mx\nfrom mlx_lm import load, generate\n"
        "m, t = load(sys.argv[1])\n"
        "m.set_dtype(mx.float32)\n"
        "msgs = [{'role': 'user', 'content': sys.argv[2]}]\n"
        "p = t.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)\n"
        "print(json.dumps(generate(m, t, p, max_tokens=int(sys.argv[3]))))\n"
    )
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    done = subprocess.run(
        [sys.executable, "-c", code, str(folder), prompt, str(n), str(Path(__file__).resolve().parents[3])],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.real_models
def test_smollm2_import_runs(tmp_path: Path) -> None:
    out = tmp_path / "smol"
    events = events_of(need_gguf("smollm2"), out, 4)
    assert isinstance(events[-1], ImportFinished), events[-1]
    assert events[-1].peak_rss_bytes > 0
    stages = {e.stage for e in events if isinstance(e, ImportProgress)}
    assert {"validate", "hash", "tensors", "tokenizer", "write"} <= stages
    _check_folder(out, "smollm2", 4)
    assert "Paris" in _greedy(out, "What is the capital of France? Answer in one word.", 8)


@pytest.mark.real_models
@pytest.mark.slow
# 16 bits is the copy `fetch-models` made (K-quants widened); 4 bits re-quantizes them, and its
# greedy answer takes a minute on MLX's scalar 4-bit CPU kernels
@pytest.mark.parametrize("bits", [16, pytest.param(4, marks=pytest.mark.heavy)])
def test_qwen_coder_05b_import_runs(bits: int) -> None:
    folder = imported("qwen0.5b", bits)
    _check_folder(folder, "qwen0.5b", bits)
    from transformers import AutoTokenizer

    saved = AutoTokenizer.from_pretrained(str(folder))
    ours = build_tokenizer(read_header(need_gguf("qwen0.5b")))
    text = "def add(a, b):\n    return a + b  # 加法 🙂"
    assert saved(text)["input_ids"] == ours.encode(text).ids
    assert saved.eos_token == "<|im_end|>"
    answer = _greedy(folder, "Complete: def add(a, b): return", 6)
    assert answer.strip(), answer


CRASHING_CHILD = """\
import os, resource, signal, sys
sys.path.insert(0, {root!r})
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
from app.engine.gguf import child, shards

finish = shards.ShardWriter.finish

def finish_then_crash(writer):
    finish(writer)  # the hidden folder now holds real safetensors
    sys.stderr.write("simulated native crash\\n")
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGSEGV)

shards.ShardWriter.finish = finish_then_crash
raise SystemExit(child._child_main(sys.argv[-1]))
"""


def _tiny_llama(path: Path) -> Path:
    from tests.engine.gguf.ggufbuild import build

    rng = np.random.default_rng(0)
    metadata = {
        "general.architecture": "llama",
        "llama.block_count": 1,
        "llama.embedding_length": 64,
        "llama.feed_forward_length": 128,
        "llama.attention.head_count": 2,
        "llama.attention.layer_norm_rms_epsilon": 1e-5,
    }
    tensors = {"token_embd.weight": rng.normal(size=(8, 64)), "output_norm.weight": np.ones(64)}
    path.write_bytes(build(metadata, tensors))
    return path


def test_child_killed_by_a_signal_is_reported_and_leaves_no_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A native crash in the child (simulated: SIGSEGV right after the shards are written, run
    through a stand-in interpreter so the importer itself carries no test hook) becomes
    ImportFailed(kind="crashed") naming the signal, and no model folder or partial is left."""
    source = _tiny_llama(tmp_path / "tiny.gguf")
    script = tmp_path / "python-that-crashes"
    script.write_text(f"#!{sys.executable}\n" + CRASHING_CHILD.format(root=str(Path(__file__).parents[3])))
    script.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(script))  # run_import starts `sys.executable -m ...`
    out = tmp_path / "models" / "tiny-16bit"
    events = events_of(source, out, 16)
    final = events[-1]
    assert isinstance(final, ImportFailed) and final.kind == "crashed", final
    assert "signal SIGSEGV" in final.message and "simulated native crash" in final.message
    assert any(isinstance(e, ImportProgress) and e.stage == "write" for e in events)  # it got that far
    assert leftovers(out.parent) == []  # neither the model folder nor the hidden partial one
