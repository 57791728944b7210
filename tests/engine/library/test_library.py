"""Model facts, discovery across sources, the facts cache, memory fit and the safety rules."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from app.engine.library.compat import check_pair
from app.engine.library.discovery import Sources, hub_models, resolve_model, scan_library
from app.engine.library.facts import compute_facts, model_facts
from app.engine.library.memory import memory_fit
from app.engine.library.paths import app_data_dir, lmstudio_models_dir
from app.engine.library.safety import UnsafeModel, check_relative_name, check_repo_id


def clone(src: Path, dst: Path, skip: tuple[str, ...] = ()) -> Path:
    dst.mkdir(parents=True)
    for p in src.iterdir():
        if p.name not in skip:
            shutil.copy(p, dst / p.name)
    return dst


def test_facts_of_the_toy_model(toy_models):
    main, draft = compute_facts(Path(toy_models.main)), compute_facts(Path(toy_models.draft))
    assert main.usable, "the toy main is usable"
    assert main.architecture == "qwen2", "the toy main is read as qwen2"
    assert main.bits == 32, "the toy main is stored in float32"
    assert not main.vision, "the toy main reads no images"
    assert main.vocab_size == 1024, "the toy main's vocabulary is read"
    assert main.trim == "full", "its cache can be rewound fully"
    assert main.context_length, "its context length is read"
    assert main.params and draft.params, "both models' parameter counts are read"
    assert main.params > draft.params, "the main is larger than the draft"
    assert main.vocab_fingerprint == draft.vocab_fingerprint
    assert main.size_bytes > (Path(toy_models.main) / "model.safetensors").stat().st_size - 1


def test_facts_of_a_real_model(real_model):
    facts = compute_facts(real_model("qwen0.5b"))
    assert facts.architecture == "qwen2", "Qwen2.5 0.5B is read as qwen2"
    assert facts.vocab_size == 151936, "its vocabulary is read"
    assert facts.context_length == 32768, "its context length is read"
    assert 0.4e9 < facts.params < 0.7e9
    gemma = compute_facts(real_model("gemma3"))
    assert gemma.trim == "window", "Gemma 3's sliding window is trimmed as a window"
    assert gemma.sliding_window == 512, "its window length is read"
    assert not gemma.vision, "the text-only Gemma reads no images"


def test_app_data_dir_follows_specchat_home(specchat_home):
    assert app_data_dir() == specchat_home


def test_lmstudio_pointer_file_is_read(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert lmstudio_models_dir() is None
    (tmp_path / ".lmstudio" / "models").mkdir(parents=True)
    assert lmstudio_models_dir() == tmp_path / ".lmstudio" / "models"
    elsewhere = tmp_path / "lms-home"
    (elsewhere / "models").mkdir(parents=True)
    (tmp_path / ".lmstudio-home-pointer").write_text(str(elsewhere) + "\n")
    assert lmstudio_models_dir() == elsewhere / "models"


def make_hub_cache(cache: Path, repo_id: str, files: dict[str, bytes]) -> Path:
    """The hub cache's own layout: blobs, a snapshot of symlinks, refs/main."""
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    commit = "a" * 40
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (repo / "blobs").mkdir()
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    for i, (name, body) in enumerate(files.items()):
        blob = repo / "blobs" / f"{i:040x}"
        blob.write_bytes(body)
        (snapshot / name).symlink_to(Path("../../blobs") / blob.name)
    return snapshot


def test_discovery_across_sources(toy_models, tmp_path):
    toy = Path(toy_models.main)
    hub = tmp_path / "hub"
    make_hub_cache(hub, "org/toy-hub", {p.name: p.read_bytes() for p in toy.iterdir()})
    lms = tmp_path / "lms" / "models"
    clone(toy, lms / "publisher" / "toy-lms")
    (lms / "publisher" / "gguf-model").mkdir(parents=True)
    (lms / "publisher" / "gguf-model" / "m.Q4_K_M.gguf").write_bytes(b"GGUF")
    own = tmp_path / "own"
    clone(toy, own / "org" / "toy-own")
    clone(toy, own / ".partial" / "org--unfinished")
    user = tmp_path / "user"
    clone(toy, user / "pickled", skip=("model.safetensors",))
    (user / "pickled" / "pytorch_model.bin").write_bytes(b"pickle")

    facts, ggufs = scan_library(Sources(hub_cache=hub, lmstudio=lms, specchat=own, extra=(user,)))
    by_name = {f.name: f for f in facts}
    assert set(by_name) == {"org/toy-hub", "publisher/toy-lms", "org/toy-own", "pickled"}
    assert by_name["org/toy-hub"].source == "hub" and by_name["publisher/toy-lms"].source == "lmstudio"
    assert [g.label for g in ggufs] == ["publisher/gguf-model/m.Q4_K_M.gguf"]
    pickled = by_name["pickled"]
    assert not pickled.usable, "a model with only pickle weights is not usable"
    assert "only pickle weights (pytorch_model.bin)" in pickled.problems[0], (
        "the problem says why, naming the file"
    )
    verdict = check_pair(Path(by_name["org/toy-own"].path), Path(pickled.path))
    assert not verdict.compatible, "a pickle-only draft is refused"
    assert any("only pickle weights" in r.message for r in verdict.refusals), (
        "the refusal says it has only pickle weights"
    )
    assert [f.label for f in hub_models(hub)] == ["org/toy-hub"]
    assert resolve_model("org/toy-hub", Sources(hub, lms, own)) == Path(by_name["org/toy-hub"].path)


def test_fifty_models_are_read_once_then_listed_from_the_cache(toy_models, tmp_path, monkeypatch):
    root = tmp_path / "many"
    for i in range(50):
        folder = root / f"model-{i:02d}"
        folder.mkdir(parents=True)
        for p in Path(toy_models.draft).iterdir():
            (folder / p.name).symlink_to(p)
    sources = Sources(hub_cache=None, lmstudio=None, specchat=root, use_hub=False)
    import app.engine.library.facts as facts_module

    read: list[Path] = []
    compute = facts_module.compute_facts
    monkeypatch.setattr(
        facts_module, "compute_facts", lambda folder, *rest: read.append(folder) or compute(folder, *rest)
    )
    first, _ = scan_library(sources)
    assert len(first) == 50 and len(read) == 50
    again, _ = scan_library(sources)
    assert again == first, "a second scan finds the same models"
    assert len(read) == 50, (
        "a second scan reads no folder again"
    )  # nothing read again: every folder came from the cache


def test_memory_fit_counts_both_weights_and_both_caches(toy_models):
    main, draft = model_facts(Path(toy_models.main)), model_facts(Path(toy_models.draft))
    fit = memory_fit(main, draft, context=4096, usable=64 * 2**30)
    assert fit.main_kv == main.kv_bytes_per_token * 4096 and fit.draft_kv == draft.kv_bytes_per_token * 4096
    assert fit.total == main.size_bytes + draft.size_bytes + fit.main_kv + fit.draft_kv + fit.overhead
    assert fit.fits
    tight = memory_fit(main, draft, context=4096, usable=fit.total - 1)
    assert not tight.fits, "a budget one byte short does not fit"
    assert "exceeds" in tight.explain(), "the explanation says it exceeds the memory"
    assert "GiB" in tight.explain(), "the explanation gives sizes in GiB"


def test_the_pair_loaded_now_counts_as_freed_and_widened_weights_as_held(toy_models):
    """The fit line once said a pair already loaded would not fit, since its own memory counted
    as taken; and a 16-bit model held as float32 takes twice its disk."""
    main, draft = model_facts(Path(toy_models.main)), model_facts(Path(toy_models.draft))
    alone = memory_fit(main, draft, context=4096, usable=64 * 2**30)
    budget = alone.total - main.size_bytes - 1  # short of the pair by about the main's weights
    assert not memory_fit(main, draft, context=4096, usable=budget).fits
    replacing = memory_fit(main, draft, context=4096, usable=budget, loaded=(main, draft))
    assert replacing.fits, "what the loaded pair holds is freed by its replacement"
    assert "held now by the pair loaded, which this one replaces" in replacing.explain()

    sixteen = replace(main, bits=16)
    assert memory_fit(sixteen, None, 4096, usable=2**40, widened=True).main_weights == 2 * main.size_bytes
    assert memory_fit(sixteen, None, 4096, usable=2**40).main_weights == main.size_bytes
    quantized = replace(main, bits=4)
    assert memory_fit(quantized, None, 4096, usable=2**40, widened=True).main_weights == main.size_bytes


def test_remote_code_is_never_run(toy_models, tmp_path):
    folder = clone(Path(toy_models.main), tmp_path / "asks-for-code")
    marker = tmp_path / "code-ran"
    evil = f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\nclass Evil: pass\n"
    for name in ("modeling_evil.py", "tokenization_evil.py", "configuration_evil.py"):
        (folder / name).write_text(evil)
    config = json.loads((folder / "config.json").read_text())
    config["auto_map"] = {
        "AutoConfig": "configuration_evil.Evil",
        "AutoModelForCausalLM": "modeling_evil.Evil",
    }
    config["model_file"] = "modeling_evil.py"
    (folder / "config.json").write_text(json.dumps(config))
    tok_config = json.loads((folder / "tokenizer_config.json").read_text())
    tok_config["auto_map"] = {"AutoTokenizer": ["tokenization_evil.Evil", None]}
    (folder / "tokenizer_config.json").write_text(json.dumps(tok_config))

    facts = compute_facts(folder)
    assert any("auto_map" in w and "ignored" in w for w in facts.warnings)
    assert check_pair(folder, Path(toy_models.draft)).compatible
    from app.engine.decoding.loading import ModelLoadError, load_model

    with pytest.raises(ModelLoadError, match="custom module"):  # mlx-lm refuses model_file outright
        load_model(folder)
    assert not marker.exists()


@pytest.mark.parametrize("name", ["../x", "a/../../x", "/abs", "C:\\x", "\\\\host\\share", ""])
def test_escaping_names_are_refused(name):
    with pytest.raises(UnsafeModel):
        check_relative_name(name)


def test_repo_ids():
    assert check_repo_id("mlx-community/Qwen2.5-7B-Instruct-4bit")
    for bad in ("a", "a/b/c", "../a", "a/..", "a/.b", "a b/c"):
        with pytest.raises(UnsafeModel):
            check_repo_id(bad)


def test_a_damaged_library_store_is_moved_aside_and_works_again(tmp_path):
    from app.engine.library.store import Store

    path = tmp_path / "library.sqlite3"
    path.write_bytes(b"\0" * 8192)
    store = Store(path)
    store.put("facts", "k", {"v": 1})
    assert store.get("facts", "k") == {"v": 1}  # a damaged cache used to refuse every write
    moved = [p for p in tmp_path.iterdir() if p.name.startswith("library.sqlite3.damaged-")]
    assert [p.read_bytes() for p in moved if not p.name.endswith(("-wal", "-shm"))] == [b"\0" * 8192]
