"""The boundaries between engine and UI: the engine stays free of Qt (it runs in a worker and in
command-line tools), and the UI free of model code (the engine sends it text)."""

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

ENGINE = Path(__file__).resolve().parents[1] / "app" / "engine"
FORBIDDEN = ("PySide6", "shiboken6", "qasync", "app.ui")
UI_FORBIDDEN = ("mlx", "mlx_lm", "transformers", "tokenizers")


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_no_engine_module_imports_qt():
    offenders = {
        str(path.relative_to(ENGINE)): sorted(
            name for name in _imports(path) if name.split(".")[0] in FORBIDDEN or name.startswith("app.ui")
        )
        for path in ENGINE.rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_importing_every_engine_module_loads_no_qt():
    modules = [
        "app.engine." + ".".join(p.relative_to(ENGINE).with_suffix("").parts)
        for p in ENGINE.rglob("*.py")
        if p.name != "__init__.py"
    ]
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('PySide6', 'shiboken6', 'qasync')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


APP = ENGINE.parent


def _private_imports(path: Path) -> list[str]:
    """`from app.x import _name` where `_name` is private to another module."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("app"):
            found += [
                f"{node.module}.{a.name}"
                for a in node.names
                if a.name.startswith("_") and not a.name.startswith("__")
            ]
    return found


def test_no_module_imports_another_modules_private_names():
    offenders = {str(p.relative_to(APP)): _private_imports(p) for p in APP.rglob("*.py")}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_no_ui_module_imports_mlx_or_a_tokenizer():
    """The engine sends refused drafts and verdicts as text, so the UI loads no model code."""
    ui = ENGINE.parent / "ui"
    offenders = {
        str(path.relative_to(ui)): sorted(
            name for name in _imports(path) if name.split(".")[0] in UI_FORBIDDEN
        )
        for path in ui.rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_ui_is_grouped_by_feature():
    """A reader finds a feature by its folder: at the top of app/ui only the window that assembles
    the features and the start-up remain beside the folders."""
    ui = ENGINE.parent / "ui"
    loose = sorted(p.name for p in ui.glob("*.py"))
    assert loose == ["__init__.py", "launch.py", "main_window.py"], (
        f"modules outside a feature folder: {loose}"
    )
    folders = sorted(p.name for p in ui.iterdir() if p.is_dir() and p.name != "__pycache__")
    assert folders == [
        "arena",
        "chat",
        "common",
        "dashboard",
        "library",
        "machines",
        "picker",
        "server",
        "window",
    ]


def test_every_ui_feature_stands_in_the_contracts():
    """`lint-imports` (a CI step of its own) keeps the contracts; this keeps them covering every
    feature folder, so a new folder cannot sit outside them."""
    root = ENGINE.parents[1]
    contracts = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    by_name = {c["name"]: c for c in contracts}
    [layers] = [c for c in contracts if c.get("containers") == ["app.ui"]]
    named = sorted(part.strip() for layer in layers["layers"] for part in layer.split("|"))
    folders = sorted(p.name for p in (ENGINE.parent / "ui").iterdir() if (p / "__init__.py").is_file())
    assert named == sorted([*folders, "launch", "main_window"]), "every feature folder is in one layer"
    for name in (
        "The picker builds on the library and the machines dialog only",
        "The server switch builds on the chat only",
    ):
        assert by_name[name]["type"] == "forbidden", f"contract missing from pyproject.toml: {name}"
