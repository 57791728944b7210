"""The losslessness check and the draft arena, end to end: real worker, toy models, offscreen window."""

from __future__ import annotations

import shutil
from dataclasses import replace

import mlx.core as mx
import pytest
from PySide6.QtCore import Qt, QUrl
from PySide6.QtGui import QAction, QKeySequence

from app.engine.decoding.loading import ModelPair, load_model
from app.engine.decoding.templates.chat import format_chat
from app.engine.features.arena import LOOKUP, load_results
from app.engine.store.transcript import LosslessVerdict, Verdict
from app.ui.chat.settings_dialog import ChatSettings
from app.ui.picker.picker import KEY, PickerDialog
from tests.engine.helpers import next_token_logits
from tests.ui.conftest import open_window

SLOW = 60_000


@pytest.fixture
def library(specchat_home, toy_models):
    lib = specchat_home / "lib"
    for name, src in (
        ("toy-main", toy_models.main),
        ("toy-draft", toy_models.draft),
        ("toy-random", toy_models.draft_random),
    ):
        shutil.copytree(src, lib / name)
    return lib


@pytest.fixture
def window(qtbot, specchat_home, library):
    w = open_window(qtbot, specchat_home, library, str(library / "toy-main"), str(library / "toy-draft"))
    yield w
    w.close()


def ask(qtbot, window, text: str, **settings) -> None:
    window.controller.chat_settings = ChatSettings(
        **{"max_tokens": 16, "speculation": "fixed", "k": 3, **settings}
    )
    window.composer.editor.setPlainText(text)
    qtbot.keyClick(window.composer.editor, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: not window.controller.busy, timeout=SLOW)


def check(qtbot, window, key: int, start=None) -> LosslessVerdict:
    if start is None:
        assert window.check_answer(key)
    else:
        start()
    assert window.checker.busy, "the check starts"
    assert "Checking losslessness" in window.view.toPlainText(), "the chat says the check is running"
    qtbot.waitUntil(lambda: not window.checker.busy, timeout=SLOW)
    return window.controller.transcript.answer(key).stats.lossless


def test_lossless_identical_then_tampered_then_sampled(qtbot, window, library):
    ask(qtbot, window, "Write a haiku")
    answer = window.controller.transcript.last_answer()
    ids = answer.stats.token_ids
    assert len(ids) == answer.stats.tokens, "the answer keeps a token id per token"
    assert answer.stats.temperature == 0.0, "the answer was written greedily"
    link = lambda: window.view.anchorClicked.emit(QUrl(f"specchat:check/{answer.key}"))
    verdict = check(qtbot, window, answer.key, link)  # the link under the answer
    assert verdict.verdict is Verdict.IDENTICAL, "the untouched answer is identical to plain decoding"
    assert verdict.compared == len(ids), "every token was compared"
    assert "✓ Losslessness: Identical" in window.view.toPlainText()
    stored = window.store.load(window.controller.conversation).messages[1]
    assert stored.stats.lossless == verdict  # kept with the message

    main = ModelPair(load_model(library / "toy-main"))  # idle worker: the check is done
    prompt = format_chat(main.tokenizer, [{"role": "user", "content": "Write a haiku"}])
    worst = int(mx.argmin(next_token_logits(main, prompt + list(ids[:4]))).item())
    tampered = replace(answer.stats, token_ids=ids[:4] + (worst,) + ids[5:])  # as if the answer differed
    window.controller.transcript.checkpoint(answer, answer.state, tampered)
    [shortcut] = [a for a in window.findChildren(QAction) if a.shortcut() == QKeySequence("Ctrl+Shift+L")]
    verdict = check(qtbot, window, answer.key, shortcut.trigger)  # the last answer
    assert (verdict.verdict, verdict.position) == (Verdict.WIDE_MARGIN, 4)
    assert "bug in speculative decoding" in verdict.message, (
        "the verdict says it is a bug in speculative decoding"
    )
    assert "where plain decoding has" in verdict.message, "the verdict says what plain decoding has instead"
    [mark] = window.view.extraSelections()  # the divergent token is underlined
    span = window.view.token_range(answer.key, 4)
    assert span is not None, "the divergent token is found in the chat"
    assert (mark.cursor.selectionStart(), mark.cursor.selectionEnd()) == span, (
        "the divergent token is the one underlined"
    )

    ask(qtbot, window, "Another one", temperature=0.8)
    sampled = window.controller.transcript.last_answer()
    assert not window.check_answer(sampled.key), "a sampled answer cannot be checked"
    assert not window.checker.busy, "no check starts for it"
    refused = sampled.stats.lossless
    assert refused.verdict is Verdict.NOT_CHECKED, "a sampled answer is not checked"
    assert "temperature 0.8" in refused.message, "the message gives its temperature as the reason"
    assert "Losslessness not checked" in window.view.toPlainText()


def test_arena_ranks_cancels_persists_and_applies(qtbot, window, library):
    main, good, bad = (str(library / n) for n in ("toy-main", "toy-draft", "toy-random"))
    [menu] = [a for a in window.findChildren(QAction) if a.shortcut() == QKeySequence("Ctrl+Shift+A")]
    menu.trigger()
    dialog = window.arena
    assert dialog is not None, "the shortcut opens the arena"
    assert dialog.isVisible(), "the arena is shown"
    qtbot.waitUntil(lambda: dialog.candidates.count() == 3, timeout=SLOW)
    assert dialog.current_main() == main, "the arena opens on the loaded main"
    assert set(dialog.checked_candidates()) == {good, bad, LOOKUP}, "every candidate is ticked"
    assert dialog.table.rowCount() == 0  # no arena yet for this main

    dialog.prompts.add_prompt("def add(a, b):")  # user prompts join the built-ins and persist
    assert dialog.prompts.prompt_list()[-1][0].prompt_class == "user"
    assert dialog.run(), "the arena starts"
    assert window.engine_taken() is not None, "it takes the engine from the chat"
    dialog.cancel()  # before the worker even starts: the request starts cancelled
    qtbot.waitUntil(lambda: not dialog.running, timeout=SLOW)
    assert "Cancelled" in dialog.state.text(), "the arena says it was cancelled"
    assert dialog.run_button.isEnabled(), "it can be run again"
    assert load_results(main) == [], "a cancelled run keeps no results"
    ask(qtbot, window, "Still usable?", max_tokens=4)
    assert window.controller.transcript.last_answer().state == "complete"

    for i in range(dialog.prompts.count() - 1):  # one short prompt keeps the test fast
        dialog.prompts.item(i).setCheckState(Qt.CheckState.Unchecked)
    dialog.k.setValue(3)
    dialog.tokens.setValue(12)
    assert dialog.run()
    qtbot.waitUntil(lambda: not dialog.running, timeout=SLOW)
    ranked = [dialog.table.item(r, 0).data(KEY) for r in range(dialog.table.rowCount())]
    assert set(ranked) == {good, bad, LOOKUP}, "every candidate is ranked"
    assert ranked.index(good) < ranked.index(bad), "the trained draft ranks above the random one"
    assert [dialog.table.item(r, 0).text() for r in range(3)] == ["1", "2", "3"]
    assert dialog.table.item(ranked.index(good), 2).text().endswith("×"), "the speedup column gives a ratio"
    assert "user" in dialog.table.item(0, 5).text(), "the per-prompt-class column has the user's own prompts"
    assert load_results(main) == dialog.results

    picker = PickerDialog(window.library.sources, usable_memory=64 * 2**30)
    qtbot.addWidget(picker)
    qtbot.waitUntil(
        lambda: picker.current_main() is not None and picker.current_main().path in picker.verdicts,
        timeout=SLOW,
    )
    texts = {
        picker.draft_model.item(i).data(KEY): picker.draft_model.item(i).text()
        for i in range(picker.draft_model.rowCount())
    }
    speedup = {r.candidate: r.speedup for r in dialog.results}
    assert f"arena: {speedup[good]:.2f}× vs plain" in texts[good], (
        "the picker gives the arena's speedup beside the draft"
    )
    assert "arena:" in texts[LOOKUP], "the picker gives the arena's note beside lookup"

    winner = dialog.results[0]
    assert dialog.selected_result() == winner, "the winner is selected"
    assert dialog.use_button.isEnabled(), "the winner can be used at once"
    dialog.use_button.click()
    expected = (main, None if winner.candidate == LOOKUP else winner.candidate)
    qtbot.waitUntil(lambda: window.controller.pair == expected, timeout=SLOW)
    assert window.settings.value("pair/mode") == ("lookup" if winner.candidate == LOOKUP else "model")


def test_a_candidate_that_proposed_nothing_is_not_shown_as_rejected():
    from app.engine.features.arena import ArenaResult, arena_note

    silent = ArenaResult(LOOKUP, 1.0, None, None, 50.0, 50.0)  # lookup found no match to propose
    assert arena_note(silent) == "arena: 1.00× vs plain (measured), nothing proposed"
    assert "0% accepted" in arena_note(ArenaResult(LOOKUP, 0.9, 0.0, 2, 45.0, 50.0))  # proposed, all rejected
