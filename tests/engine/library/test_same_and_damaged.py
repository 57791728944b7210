"""A model is never its own draft, even as a second copy; a damaged folder is unusable, with why."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

from app.engine.library.compat import check_pair
from app.engine.library.facts import compute_facts
from app.engine.library.roles import hidden_summary, plain_reason
from app.engine.library.store import Store


def copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def test_a_second_copy_of_a_model_is_refused_as_its_draft(toy_models, tmp_path):
    store = Store(tmp_path / "cache.sqlite3")
    main = copy(Path(toy_models.main), tmp_path / "SmolLM2-135M-Instruct")
    twin = copy(Path(toy_models.main), tmp_path / "downloads" / "SmolLM2-135M-Instruct")
    for draft in (twin, main):  # a copy elsewhere, and the very same folder
        verdict = check_pair(main, draft, store)
        assert not verdict.compatible, "a model cannot be its own draft"
        assert [r.code for r in verdict.refusals] == ["same_model"], "the refusal says it is the same model"
    verdict = check_pair(main, twin, store)
    words = plain_reason(compute_facts(main), compute_facts(twin), verdict)
    assert words == "This is another copy of SmolLM2-135M-Instruct: a model can't draft for itself"
    renamed = dataclasses.replace(compute_facts(twin), name="smol-copy")
    assert plain_reason(compute_facts(main), renamed, verdict).startswith("smol-copy is the same model as")
    assert hidden_summary([(compute_facts(twin), verdict)]) == "1 draft hidden (the same model)"
    assert check_pair(Path(toy_models.main), Path(toy_models.draft), store).compatible


def test_the_same_shape_with_other_weights_is_not_the_same_model(toy_models, tmp_path):
    main = copy(Path(toy_models.main), tmp_path / "base")
    tuned = copy(Path(toy_models.main), tmp_path / "tuned")
    weights = tuned / "model.safetensors"
    data = bytearray(weights.read_bytes())
    for i in range(len(data) // 2, len(data), 4096):  # other numbers, the same header and size
        data[i] ^= 0x55
    weights.write_bytes(bytes(data))
    verdict = check_pair(main, tuned, Store(tmp_path / "cache.sqlite3"))
    assert "same_model" not in {r.code for r in verdict.reasons}


def test_a_damaged_weights_file_makes_the_folder_unusable_with_the_reason(toy_models, tmp_path):
    broken = copy(Path(toy_models.draft), tmp_path / "broken")
    (broken / "model.safetensors").write_bytes(b"<!DOCTYPE html><html>404 Not Found</html>" * 3)
    facts = compute_facts(broken)
    assert not facts.usable
    assert facts.problems[0].startswith("damaged: model.safetensors is not a model file SpecChat can read")
    assert "header length" in facts.problems[0]  # the technical detail stays, after the plain words
    verdict = check_pair(Path(toy_models.main), broken, Store(tmp_path / "cache.sqlite3"))
    assert not verdict.compatible
    words = plain_reason(compute_facts(Path(toy_models.main)), facts, verdict)
    assert words.startswith("broken is damaged or unreadable: model.safetensors is not a model file")
    assert hidden_summary([(facts, verdict)]) == "1 draft hidden (damaged)"
    cut = copy(Path(toy_models.draft), tmp_path / "cut")
    whole = (cut / "model.safetensors").read_bytes()
    (cut / "model.safetensors").write_bytes(whole[: len(whole) // 2])  # a download cut short
    assert not compute_facts(cut).usable, "a weights file cut short makes the model unusable"
    assert "damaged: model.safetensors" in compute_facts(cut).problems[0], (
        "the problem names the damaged file"
    )


def test_facts_cached_before_the_damage_check_are_read_again(toy_models, tmp_path):
    from app.engine.library.facts import facts_for, folder_fingerprint

    store = Store(tmp_path / "cache.sqlite3")
    broken = copy(Path(toy_models.draft), tmp_path / "broken")
    (broken / "model.safetensors").write_bytes(b"not weights at all" * 10)
    stale = compute_facts(broken).to_json() | {"problems": [], "weights_digest": None}
    store.put("facts", folder_fingerprint(broken), stale)  # as an older version cached it
    assert not facts_for([broken], store=store)[0].usable


def test_checking_drafts_reads_the_mains_vocabulary_once_and_counts(toy_models, tmp_path, monkeypatch):
    from app.engine.library import vocab
    from app.engine.library.facts import facts_for
    from app.engine.library.roles import check_drafts

    main = copy(Path(toy_models.main), tmp_path / "main")
    drafts = [copy(Path(toy_models.draft), tmp_path / f"draft-{n}") for n in range(3)]
    read, real = [], vocab._read_vocabulary  # a parse of tokenizer.json, whoever asks
    monkeypatch.setattr(vocab, "_read_vocabulary", lambda folder: read.append(folder) or real(folder))
    store = Store(tmp_path / "cache.sqlite3")
    library = facts_for([main, *drafts], store=store)
    read.clear()  # the facts read each once; what follows is the check's own reading
    counted: list[int] = []
    verdicts = check_drafts(library[0], library, store, counted.append)
    assert [v.compatible for _, v in verdicts] == [True, True, True], (
        "every draft of the family fits the main"
    )
    assert counted == [1, 2, 3], "progress is reported after each draft"
    assert read.count(main) == 1, "the main is read once"
    assert sorted(read[1:]) == drafts, "each draft is read once"


def test_checking_every_main_of_a_library_reads_each_tokenizer_once(toy_models, tmp_path, monkeypatch):
    """`python -m app models` checks every pair: each tokenizer is parsed once, not once per pair."""
    from app.engine.library import vocab
    from app.engine.library.facts import facts_for
    from app.engine.library.roles import check_drafts
    from app.engine.library.vocab import Vocabulary

    folders = [copy(Path(toy_models.main), tmp_path / f"model-{n}") for n in range(3)]
    read, real = [], vocab._read_vocabulary  # a parse of tokenizer.json, whoever asks
    monkeypatch.setattr(vocab, "_read_vocabulary", lambda folder: read.append(folder) or real(folder))
    store = Store(tmp_path / "cache.sqlite3")
    library = facts_for(folders, store=store)
    read.clear()
    kept: dict[Path, Vocabulary] = {}
    for main in library:
        check_drafts(main, library, store, vocabularies=kept)
    assert sorted(read) == folders, "each model's tokenizer is read once for all six pairs"
