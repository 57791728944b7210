"""The machines dialog, offscreen: the connection test run for real on this machine (no ssh),
a machine that refuses ssh, one with other versions, the warning, the memory share, the choice."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from PySide6.QtCore import QSettings, Qt

from app.engine.distributed.hosts import NOT_PRIVATE, LocalAddress, read_hostfile
from app.engine.distributed.memory_split import ModelShape
from app.engine.distributed.probe import local_info, probe_script
from app.engine.library.facts import compute_facts
from app.ui.common.platform_words import this_machine
from app.ui.common.settings import chosen_hostfile
from app.ui.common.theme import current_theme
from app.ui.machines.hosts_dialog import SOURCE_KEY, HostsDialog
from app.ui.machines.hosts_table import CONNECTION, FIT, FREE, MLX, SPECCHAT

ROOT = Path(__file__).resolve().parents[2]
GIB = 2**30


def runner(host: str, script: str) -> list[str]:
    """`this-mac` really runs the probe here; `studio` refuses ssh; `mini` runs another MLX."""
    if host == "studio":
        return ["bash", "-c", "echo 'ssh: connect to host studio port 22: Connection refused' >&2; exit 255"]
    if host == "other":
        return ["echo", json.dumps(replace(local_info(), hostname="other-mac.local").to_json())]
    if host == "mini":
        other = replace(local_info(), hostname="mini", mlx_version="0.1.0")
        return ["echo", json.dumps(other.to_json())]
    return ["bash", "-c", script]


@pytest.fixture
def settings(tmp_path):
    return QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat)


def make(qtbot, settings, typed: str = "", **kwargs) -> HostsDialog:
    kwargs.setdefault(
        "addresses", [LocalAddress("bridge0", "169.254.1.1"), LocalAddress("en0", "203.0.113.5")]
    )
    dialog = HostsDialog(settings, runner=runner, script=probe_script(sys.executable, str(ROOT)), **kwargs)
    qtbot.addWidget(dialog)
    if typed:
        dialog.typed.setPlainText(typed)
    dialog.show()
    return dialog


def wait_tested(qtbot, dialog: HostsDialog) -> None:
    qtbot.waitUntil(lambda: dialog.job is None and not dialog.progress.isVisible(), timeout=60_000)


def test_enter_tests_every_machine_and_the_table_says_who_answered(qtbot, settings):
    dialog = make(qtbot, settings, "this-mac 10.0.0.1\nstudio 10.0.0.2\nmini 10.0.0.3")
    dialog.address.setFocus()
    qtbot.keyClick(dialog.address, Qt.Key.Key_Return)
    # the GUI never waits on it
    assert dialog.job is not None, "pressing Enter starts the test in the background"
    assert dialog.progress.isVisible(), "the dialog shows its progress while it tests"
    wait_tested(qtbot, dialog)
    t = dialog.table
    assert t.rowCount() == 3, "the table lists the three typed machines"
    assert t.text(0, 0) == f"this-mac ({this_machine()})", "the first row names this machine"
    assert t.text(0, CONNECTION).startswith("Reachable")
    assert (t.text(0, MLX), t.text(0, SPECCHAT)) == (local_info().mlx_version, local_info().specchat_version)
    assert t.text(0, FREE).endswith(" free") is False and " of " in t.text(0, FREE), (
        "this machine's free memory is shown as 'x of y', not just 'free'"
    )
    assert t.text(1, CONNECTION) == (
        "Not reachable\nCould not connect with ssh: connect to host studio port 22: Connection refused"
    )
    assert t.text(1, MLX) == "—"
    error_bg = current_theme().error_bg
    assert t.item(2, MLX).background().color() == error_bg, (
        "a machine with another MLX version is marked in red"
    )
    assert t.text(2, MLX) == "0.1.0", "the table shows that machine's MLX version"
    assert t.item(2, SPECCHAT).background().color() != error_bg  # the same SpecChat there
    assert t.item(0, MLX).background().color() != error_bg
    words = dialog.verdict.text()
    assert words.startswith("Fix these before using these machines")
    assert "studio: Could not connect with ssh" in words
    assert f"MLX 0.1.0 there but {local_info().mlx_version} on {this_machine()}" in words
    assert not dialog.use_button.isEnabled()  # refused: one unreachable, one with other versions


def test_every_machine_answering_lets_the_choice_be_kept(qtbot, settings, specchat_home):
    dialog = make(qtbot, settings, "this-mac 10.0.0.1\n127.0.0.1")
    dialog.address.setCurrentIndex(1)  # bridge0: this Mac listens on the Thunderbolt link
    qtbot.mouseClick(dialog.test_button, Qt.MouseButton.LeftButton)
    wait_tested(qtbot, dialog)
    assert dialog.verdict.text().startswith("Every machine answered")
    assert dialog.use_button.isEnabled()
    qtbot.mouseClick(dialog.use_button, Qt.MouseButton.LeftButton)
    path = chosen_hostfile(settings)
    assert path is not None, "keeping the choice writes a hostfile"
    assert path.parent == specchat_home, "the hostfile is kept in SpecChat's own folder"
    assert [(h.ssh, h.ips) for h in read_hostfile(path).hosts] == [
        ("this-mac", ("169.254.1.1",)),
        ("127.0.0.1", ("127.0.0.1",)),
    ]
    again = make(qtbot, settings)  # reopened: the typed machines come back
    assert again.typed.toPlainText() == "this-mac 10.0.0.1\n127.0.0.1", (
        "reopened, the dialog shows the machines as typed"
    )
    assert again.typed_choice.isChecked(), "the typed list is the chosen source again"
    qtbot.mouseClick(again.alone_button, Qt.MouseButton.LeftButton)
    assert chosen_hostfile(settings) is None


def test_a_first_machine_that_is_not_this_one_gets_advice(qtbot, settings):
    dialog = make(qtbot, settings, "other 10.0.0.4\nthis-mac 10.0.0.1")
    dialog.test()
    wait_tested(qtbot, dialog)
    words = dialog.verdict.text()
    assert words.startswith("Every machine answered")
    here = f"{this_machine()} is {local_info().hostname}"
    assert f"The first machine answered as other-mac.local, but {here}" in words
    assert dialog.use_button.isEnabled()


def test_editing_after_a_test_asks_for_a_new_one(qtbot, settings):
    dialog = make(qtbot, settings, "this-mac 10.0.0.1")
    dialog.test()
    wait_tested(qtbot, dialog)
    assert dialog.use_button.isEnabled()
    dialog.typed.setPlainText("this-mac 10.0.0.1\nstudio 10.0.0.2")
    assert not dialog.use_button.isEnabled()
    assert [dialog.table.text(r, CONNECTION) for r in range(2)] == ["Not tested yet"] * 2


def test_a_connection_that_is_not_private_is_warned_about(qtbot, settings):
    dialog = make(qtbot, settings, "this-mac 203.0.113.5\nstudio 10.0.0.2")
    assert dialog.warning.isVisibleTo(dialog), "a public address shows a warning"
    assert NOT_PRIVATE in dialog.warning.text(), "the warning says the connection is not private"
    assert "(this-mac at 203.0.113.5)" in dialog.warning.text()
    dialog.address.setCurrentIndex(1)  # 169.254.1.1 on the bridge
    assert not dialog.warning.isVisibleTo(dialog)
    dialog.address.setCurrentIndex(2)  # en0's public address
    assert dialog.warning.isVisibleTo(dialog)
    assert [dialog.address.itemText(i) for i in (1, 2)] == [
        "169.254.1.1 on bridge0 — direct cable (Thunderbolt)",
        "203.0.113.5 on en0 — not private",
    ]


def test_bad_machine_lists_say_what_to_fix_and_cannot_be_tested(qtbot, settings, tmp_path):
    dialog = make(qtbot, settings, "this-mac 10.0.0.1\nstudio")
    assert "studio has no IP address" in dialog.problem.text(), (
        "the problem names the machine without an IP address"
    )
    assert not dialog.test_button.isEnabled(), "a list with a problem cannot be tested"
    dialog.typed.setPlainText("a 10.0.0.1\nA 10.0.0.2")
    assert "names A twice" in dialog.problem.text()
    dialog.file_choice.setChecked(True)
    assert dialog.problem.text() == "Choose a hostfile, or type the machines."
    bad = tmp_path / "hosts.json"
    bad.write_text("[{")
    dialog.path.setText(str(bad))
    assert "is not valid JSON" in dialog.problem.text(), "a broken hostfile is named as not valid JSON"
    assert not dialog.test_button.isEnabled(), "a broken hostfile cannot be tested"
    bad.write_text(json.dumps([{"ssh": "this-mac", "ips": ["10.0.0.1"]}]))
    dialog.path.setText(str(bad) + " ")
    assert dialog.problem.text() == "", "a good hostfile shows no problem"
    assert dialog.test_button.isEnabled(), "a good hostfile can be tested"


def test_a_chosen_hostfile_is_remembered(qtbot, settings, tmp_path):
    hosts = tmp_path / "hosts.json"
    hosts.write_text(json.dumps([{"ssh": "this-mac", "ips": ["10.0.0.1"]}]))
    dialog = make(qtbot, settings)
    dialog.path.setText(str(hosts))
    dialog.file_choice.setChecked(True)
    dialog.test()
    wait_tested(qtbot, dialog)
    qtbot.mouseClick(dialog.use_button, Qt.MouseButton.LeftButton)
    assert settings.value(SOURCE_KEY) == str(hosts)
    again = make(qtbot, settings)
    assert again.file_choice.isChecked(), "reopened, the hostfile is the chosen source again"
    assert again.path.text() == str(hosts), "reopened, the dialog shows the chosen hostfile"


def test_escape_closes(qtbot, settings):
    dialog = make(qtbot, settings, "this-mac 10.0.0.1")
    qtbot.keyClick(dialog, Qt.Key.Key_Escape)
    assert not dialog.isVisible(), "Escape closes the dialog"
    assert dialog.result() == 0, "Escape counts as cancel"
    assert chosen_hostfile(settings) is None


def test_each_machines_share_of_the_main_is_weighed_against_its_free_memory(qtbot, settings, toy_models):
    main, draft = compute_facts(toy_models.main), compute_facts(toy_models.draft)
    free = local_info().free_memory
    big = replace(main, size_bytes=4 * free)  # half of it is twice what this machine has free
    shape = ModelShape(weights=4 * free, whole=GIB, kv_heads=2)
    dialog = make(qtbot, settings, "this-mac 10.0.0.1\n127.0.0.1", main=big, draft=draft, shape=shape)
    assert dialog.table.text(0, FIT).startswith("Needs ")  # before the test: what it needs
    dialog.test()
    wait_tested(qtbot, dialog)
    assert dialog.table.text(0, FIT).startswith("Does not fit: needs ")
    assert "draft" in dialog.table.item(0, FIT).toolTip()  # the draft counts on this Mac only
    assert "draft" not in dialog.table.item(1, FIT).toolTip()
    assert "Its part of the main model does not fit here" in dialog.verdict.text()
    assert "this-mac: needs model part" in dialog.verdict.text()
    assert dialog.use_button.isEnabled()  # memory is told, not refused: other apps may be closed
    assert "split across 2 machines" in dialog.fit_note.text()


def test_the_shape_is_read_from_the_main_folder_off_the_gui_thread(qtbot, settings, toy_models):
    main = compute_facts(toy_models.main)
    dialog = make(qtbot, settings, "this-mac 10.0.0.1", main=main)
    qtbot.waitUntil(lambda: dialog.shape is not None, timeout=10_000)
    assert dialog.shape is not None, "the dialog has read the main's shape"
    assert dialog.shape.weights > dialog.shape.whole > 0, (
        "all the weights weigh more than the part every machine holds whole, which is not empty"
    )
    assert dialog.table.text(0, FIT).startswith("Needs ")


def test_the_picker_opens_it_for_the_selected_main(qtbot, toy_models, tmp_path):
    from tests.ui.picker.test_picker import BIG, build_library, open_picker

    settings = QSettings(str(tmp_path / "window.ini"), QSettings.Format.IniFormat)
    picker = open_picker(
        qtbot, build_library(toy_models, tmp_path / "lib"), usable_memory=BIG, settings=settings
    )
    dialog = picker.open_machines()
    qtbot.addWidget(dialog)
    assert dialog.settings is settings  # the window's own settings, which the load reads
    assert dialog.main is not None, "the picker hands its main to the dialog"
    assert dialog.main.name == "toy-main", "the dialog weighs the main selected in the picker"
    assert dialog.context == picker.context.value()
    assert picker.machines_button.text() == "Run the main model across machines…"


def _all_words(widget) -> list[str]:
    """Every text a user can read in `widget`: labels, buttons, tooltips, placeholders, lists."""
    from PySide6.QtWidgets import QAbstractButton, QComboBox, QLabel, QPlainTextEdit, QTableWidget

    out = [widget.toolTip(), widget.windowTitle()]
    for child in widget.findChildren(QLabel) + widget.findChildren(QAbstractButton):
        out += [child.text(), child.toolTip()]
    for box in widget.findChildren(QComboBox):
        out += [box.itemText(i) for i in range(box.count())]
    for edit in widget.findChildren(QPlainTextEdit):
        out.append(edit.placeholderText())
    for table in widget.findChildren(QTableWidget):
        out += [table.item(r, c).text() for r in range(table.rowCount()) for c in range(table.columnCount())]
    return out


def test_away_from_a_mac_the_machines_dialog_says_this_computer(qtbot, settings, monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "platform", "linux")
    from app.engine.library.discovery import Sources
    from app.ui.picker.picker import PickerDialog

    dialog = make(qtbot, settings, "other 10.0.0.4\nthis-pc 10.0.0.1")
    dialog.test()
    wait_tested(qtbot, dialog)
    words = _all_words(dialog)
    assert not [w for w in words if "Mac" in w]
    assert "Run on this computer only" in words, "the choice to stay on one machine says 'this computer'"
    assert "This computer connects over:" in words, "the address choice says 'this computer'"
    assert dialog.table.text(0, 0) == "other (this computer)"
    assert "list this computer first" in dialog.verdict.text()
    picker = PickerDialog(Sources(None, None, tmp_path, use_hub=False), settings=settings)
    qtbot.addWidget(picker)
    assert "Mac" not in picker.machines_button.toolTip()
    assert "this computer" in picker.machines_button.toolTip()


def test_a_huge_hostfile_is_refused_without_freezing_the_dialog(qtbot, settings, tmp_path):
    hosts = tmp_path / "hosts.json"
    many = [
        {"ssh": f"m{i}.local", "ips": [f"10.{i // 65536}.{i // 256 % 256}.{i % 256}"]} for i in range(200_000)
    ]
    hosts.write_text(json.dumps(many))
    dialog = make(qtbot, settings)
    dialog.file_choice.setChecked(True)
    started = time.thread_time()  # the window's own work, which a busy machine does not lengthen
    dialog.path.setText(str(hosts))
    assert time.thread_time() - started < 1.0  # each keystroke in the path reads the file again
    assert "a machine list is at most 256 KB and 64 machines" in dialog.problem.text()
    assert not dialog.test_button.isEnabled(), "a list over the limit cannot be tested"
    assert dialog.table.rowCount() == 0, "a list over the limit fills no rows"


def test_a_machine_name_ssh_could_misread_cannot_be_tested(qtbot, settings):
    dialog = make(qtbot, settings, "this-mac 10.0.0.1\n-oProxyCommand=id 10.0.0.2")
    assert "starts with '-', which ssh would read as an option" in dialog.problem.text()
    assert not dialog.test_button.isEnabled()
    dialog.typed.setPlainText("this-mac 10.0.0.1\nme@studio.local 10.0.0.2")
    assert dialog.problem.text() == "", "a fixed list shows no problem"
    assert dialog.test_button.isEnabled(), "a fixed list can be tested"
