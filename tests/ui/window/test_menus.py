"""The menu bar as users know it: every entry in its place with its shortcut (muscle memory), and
the View toggles doing what they say and coming back after a restart."""

from __future__ import annotations

from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QMenu

from tests.ui.test_main_window import make_window

SEPARATOR = "---"


def platform_key(key: QKeySequence.StandardKey) -> str:
    """New and Quit are the platform's (Ctrl+N and Ctrl+Q on Linux, ⌘N and ⌘Q on macOS); asked
    once the application exists."""
    return QKeySequence(key).toString()


MENUS = {
    "&File": [
        ("New chat", QKeySequence.StandardKey.New),
        ("Export as Markdown…", ""),
        ("Export as JSON…", ""),
        SEPARATOR,
        ("Import GGUF…", ""),
        ("Add a model folder…", ""),
        SEPARATOR,
        ("Quit", QKeySequence.StandardKey.Quit),
    ],
    "&Chat": [
        ("Regenerate", "Ctrl+R"),
        ("Stop", "Ctrl+."),
        ("System prompt and settings…", "Ctrl+,"),
        ("Check losslessness of the last answer", "Ctrl+Shift+L"),
    ],
    "&Models": [
        ("Choose models…", "Ctrl+L"),
        ("Draft arena…", "Ctrl+Shift+A"),
        SEPARATOR,
        ("Serve to other programs", "Ctrl+Shift+E"),
        ("Server settings…", ""),
        SEPARATOR,
        ("Measure plain speed on battery too", ""),
    ],
    "&View": [
        ("Highlight draft tokens", ""),
        ("Show refused drafts on hover", ""),
        ("Show conversations", "Ctrl+Shift+S"),
        ("Speedup dashboard", "Ctrl+Shift+D"),
        ("Server log", "Ctrl+Shift+G"),
        SEPARATOR,
        ("Appearance", [("Match the system", ""), ("Light", ""), ("Dark", "")]),
    ],
    "&Help": [("Glossary…", ""), ("About SpecChat…", "")],
}


def entries(menu: QMenu) -> list:
    """A menu as its user reads it: text and shortcut per entry, submenus opened, separators kept."""
    out: list = []
    for action in menu.actions():
        if action.isSeparator():
            out.append(SEPARATOR)
        elif action.menu() is not None:
            out.append((action.text(), entries(action.menu())))
        else:
            out.append((action.text(), action.shortcut().toString()))
    return out


def item(window, path: str) -> QAction:
    """`path` as "View ▸ Show conversations"."""
    top, text = path.split(" ▸ ")
    menu = next(a.menu() for a in window.menuBar().actions() if a.text() == top)
    found = [a for a in menu.actions() if a.text() == text]
    assert len(found) == 1, f"{path}: {len(found)} entries"
    return found[0]


def test_every_menu_entry_keeps_its_place_text_and_shortcut(window):
    bar = {a.text(): entries(a.menu()) for a in window.menuBar().actions()}
    assert list(bar) == list(MENUS), "the menus in the bar, left to right"
    for title, listed in MENUS.items():
        expected = [
            (e[0], platform_key(e[1])) if isinstance(e[1], QKeySequence.StandardKey) else e for e in listed
        ]
        assert bar[title] == expected, f"the {title.lstrip('&')} menu"
    about = item(window, "&Help ▸ About SpecChat…")
    assert about.menuRole() == QAction.MenuRole.AboutRole, "macOS lists About in the application menu"


def test_view_toggles_show_what_they_say_and_come_back_after_a_restart(qtbot, specchat_home):
    w = make_window(qtbot, specchat_home)
    conversations = item(w, "&View ▸ Show conversations")
    highlight = item(w, "&View ▸ Highlight draft tokens")
    refused = item(w, "&View ▸ Show refused drafts on hover")
    assert conversations.isChecked(), "the conversations list is shown at first"
    assert w.sidebar.isVisible()
    assert highlight.isChecked(), "draft tokens are highlighted at first"
    assert w.view.options.highlight
    assert not refused.isChecked(), "refused drafts are hidden at first"
    assert not w.view.options.show_rejected

    conversations.trigger()
    assert not w.sidebar.isVisible(), "Show conversations unticked hides the list"
    conversations.trigger()
    assert w.sidebar.isVisible()
    highlight.trigger()
    refused.trigger()
    assert not w.view.options.highlight, "Highlight draft tokens unticked turns the colours off"
    assert w.view.options.show_rejected, "Show refused drafts ticked shows them on hover"
    w.close()

    again = make_window(qtbot, specchat_home)  # same settings file: a restart
    assert not item(again, "&View ▸ Highlight draft tokens").isChecked()
    assert item(again, "&View ▸ Show refused drafts on hover").isChecked()
    assert not again.view.options.highlight
    assert again.view.options.show_rejected
    again.close()
