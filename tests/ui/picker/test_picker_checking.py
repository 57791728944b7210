"""While the chosen main's drafts are checked, the draft list says so, with the real count."""

from __future__ import annotations

import shutil
import threading

from app.engine.library import roles
from app.engine.library.store import Store
from app.ui.picker.picker import KEY, PickerDialog
from tests.ui.picker.test_picker import BIG, build_library, sources


def test_the_draft_list_counts_the_drafts_being_checked(qtbot, toy_models, tmp_path, monkeypatch):
    root = build_library(toy_models, tmp_path / "lib")  # a main and two drafts
    for n in range(5):
        shutil.copytree(toy_models.draft, root / f"toy-draft-{n}")  # seven drafts in all
    gate, real = threading.Semaphore(0), roles.check_pair

    def slow_check(*args, **kwargs):
        assert gate.acquire(timeout=60), "the test never let this check through"
        return real(*args, **kwargs)

    monkeypatch.setattr(roles, "check_pair", slow_check)
    dialog = PickerDialog(sources(root), usable_memory=BIG, store=Store(tmp_path / "cache.sqlite3"))
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitUntil(lambda: dialog.main_model.rowCount() == 8, timeout=30_000)
    row = dialog.draft_model.item(2)
    assert row.text() == "Checking 7 drafts…", (
        "while checking, the draft list says how many drafts are being checked"
    )
    assert not row.isEnabled(), "the checking row cannot be chosen"
    assert row.data(KEY) is None, "the checking row is no draft"
    assert not dialog.drafts_checked()
    gate.release(3)
    qtbot.waitUntil(lambda: dialog.draft_model.item(2).text() == "Checking 7 drafts… 3 done", timeout=30_000)
    gate.release(4)
    qtbot.waitUntil(dialog.drafts_checked, timeout=30_000)
    texts = [dialog.draft_model.item(i).text() for i in range(dialog.draft_model.rowCount())]
    assert not any(t.startswith("Checking") for t in texts)
    assert dialog.draft_model.item(2).data(KEY).endswith("toy-draft")
