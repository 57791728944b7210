"""Help ▸ About names the BLAS MLX runs on, from a string the engine hands over."""

from __future__ import annotations

from html import escape

from app.engine.blas import BUILTIN, BlasStatus, ensure_blas
from app.ui.window.about import AboutDialog


def test_about_names_the_blas_mlx_runs_on(qtbot, window):
    help_menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&Help")
    next(a for a in help_menu.actions() if a.text() == "About SpecChat…").trigger()
    qtbot.waitUntil(lambda: any(d.isVisible() for d in window.findChildren(AboutDialog)))
    [dialog] = window.findChildren(AboutDialog)
    assert escape(ensure_blas().describe()) in dialog.text.text()


def test_about_says_how_to_get_a_faster_blas_when_there_is_none(qtbot):
    status = BlasStatus(BUILTIN, note="no OpenBLAS found on this machine")
    dialog = AboutDialog(status.describe(), "sudo apt install libopenblas0-pthread")
    qtbot.addWidget(dialog)
    assert escape(BUILTIN) in dialog.text.text()
    assert "libopenblas0-pthread" in dialog.text.text()
