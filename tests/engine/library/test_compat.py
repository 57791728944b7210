"""Draft compatibility on the real vocabularies of Qwen2.5-Coder, SmolLM2 and Gemma-3."""

from __future__ import annotations

import json
from pathlib import Path

from app.engine.library.compat import check_pair
from app.engine.library.store import Store


def codes(verdict) -> set[str]:
    return {r.code for r in verdict.refusals}


def test_qwen_coder_pair_is_compatible(real_model):
    verdict = check_pair(real_model("qwen1.5b"), real_model("qwen0.5b"))
    assert verdict.compatible, verdict.reasons
    assert not [r for r in verdict.reasons if r.code == "draft_not_smaller"]


def test_bigger_draft_is_a_warning_not_a_refusal(real_model):
    verdict = check_pair(real_model("qwen0.5b"), real_model("qwen1.5b"))
    assert verdict.compatible
    assert [r.code for r in verdict.reasons] == ["draft_not_smaller"]


def test_smollm_against_qwen_is_refused(real_model):
    verdict = check_pair(real_model("qwen1.5b"), real_model("smollm2"))
    assert not verdict.compatible
    assert {"token_text", "vocab_size", "eos_id", "turn_ends"} <= codes(verdict)
    text = next(r.message for r in verdict.refusals if r.code == "vocab_size")
    assert "151936 in the main" in text and "49152 in the draft" in text


def test_gemma_against_qwen_is_refused(real_model):
    verdict = check_pair(real_model("qwen1.5b"), real_model("gemma3"))
    assert not verdict.compatible
    assert {"tokenizer_type", "token_text", "vocab_size", "bos_id", "eos_id"} <= codes(verdict)
    assert "draft_window" in {r.code for r in verdict.reasons}  # Gemma-3's sliding-window cache


def test_one_changed_added_token_is_refused_by_name(real_model, tmp_path: Path):
    main = real_model("qwen1.5b")
    draft = tmp_path / "qwen-altered"
    draft.mkdir()
    for src in main.iterdir():
        if src.name != "tokenizer.json":
            (draft / src.name).symlink_to(src)
    tok = json.loads((main / "tokenizer.json").read_text(encoding="utf-8"))
    target = next(t for t in tok["added_tokens"] if t["content"] == "<|fim_middle|>")
    target["content"] = "<|fim_center|>"
    (draft / "tokenizer.json").write_text(json.dumps(tok, ensure_ascii=False), encoding="utf-8")
    verdict = check_pair(main, draft)
    assert not verdict.compatible
    reason = next(r for r in verdict.refusals if r.code == "token_text")
    assert reason.message == (
        f"token {target['id']} differs: '<|fim_middle|>' in the main, '<|fim_center|>' in the draft"
    )


def test_verdicts_are_cached(real_model, tmp_path: Path, monkeypatch):
    """A first check parses each tokenizer once (for the facts and the check alike); the second
    parses neither: the verdict comes from the cache."""
    import app.engine.library.vocab as vocab

    reads: list[Path] = []
    parse = vocab._read_vocabulary
    monkeypatch.setattr(vocab, "_read_vocabulary", lambda folder: reads.append(folder) or parse(folder))
    store = Store(tmp_path / "cache.sqlite3")
    first = check_pair(real_model("qwen1.5b"), real_model("smollm2"), store)
    assert len(reads) == 2
    again = check_pair(real_model("qwen1.5b"), real_model("smollm2"), store)
    assert len(reads) == 2, "a second check reads no model again"
    assert again == first, "a second check gives the same verdict"
    assert not again.compatible
