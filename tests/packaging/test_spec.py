"""The PyInstaller spec, run against stand-ins for PyInstaller's classes (cheap: no build).

It is executed as if on macOS too, so the BUNDLE step and its Info.plist are checked on any
machine. The real build and its smoke test are packaging/smoke.sh.
"""

from __future__ import annotations

import importlib.util
import re
import sys
import types
from pathlib import Path

import pytest

from app import __version__

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "packaging" / "specchat.spec"


class _Recorder:
    def __init__(self) -> None:
        self.calls: dict[str, dict] = {}

    def __call__(self, name):
        def build(*args, **kwargs):
            self.calls[name] = {"args": args, **kwargs}
            return types.SimpleNamespace(name=name, args=args, kwargs=kwargs)

        return build


def _run_spec(monkeypatch, tmp_path, platform: str, metallib_dir: str = "mlx/lib") -> dict[str, dict]:
    recorder = _Recorder()
    site = tmp_path / "site-packages"

    def collect_dynamic_libs(package):
        assert package == "mlx"
        suffix = "dylib" if platform == "darwin" else "so"
        return [(str(site / f"mlx/lib/libmlx.{suffix}"), "mlx/lib")]

    def collect_data_files(package, includes=None, excludes=None):
        if package == "mlx" and platform == "darwin":
            return [(str(site / "mlx/lib/mlx.metallib"), metallib_dir)]
        return []

    def analysis(scripts, **kwargs):
        recorder.calls["Analysis"] = {"scripts": scripts, **kwargs}
        toc = lambda entries, kind: [(f"{dest}/{Path(src).name}", src, kind) for src, dest in entries]
        # As transformers' hook does: metadata of every back-end installed at build time.
        metadata = [
            (f"{dist}.dist-info/METADATA", f"/site/{dist}.dist-info/METADATA", "DATA")
            for dist in ("torch-2.13.0+cpu", "tokenizers-0.23.3")
        ]
        return types.SimpleNamespace(
            binaries=toc(kwargs["binaries"], "BINARY"),
            datas=toc(kwargs["datas"], "DATA") + metadata,
            pure=[],
            scripts=[],
        )

    hooks = types.ModuleType("PyInstaller.utils.hooks")
    hooks.collect_data_files, hooks.collect_dynamic_libs = collect_data_files, collect_dynamic_libs
    monkeypatch.setitem(sys.modules, "PyInstaller", types.ModuleType("PyInstaller"))
    monkeypatch.setitem(sys.modules, "PyInstaller.utils", types.ModuleType("PyInstaller.utils"))
    monkeypatch.setitem(sys.modules, "PyInstaller.utils.hooks", hooks)
    icns = tmp_path / "SpecChat.icns"
    icns.write_bytes(b"icns\0\0\0\x08")
    monkeypatch.setenv("SPECCHAT_ICNS", str(icns))
    for name in ("SPECCHAT_CODESIGN_IDENTITY", "SPECCHAT_BUNDLE_ID", "SPECCHAT_MIN_MACOS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(sys, "platform", platform)
    namespace = {
        "SPECPATH": str(SPEC.parent),
        "Analysis": analysis,
        **{name: recorder(name) for name in ("PYZ", "EXE", "COLLECT", "BUNDLE")},
    }
    exec(compile(SPEC.read_text(), str(SPEC), "exec"), namespace)
    return recorder.calls


def test_macos_build_is_an_app_bundle_with_the_package_version_and_plist(monkeypatch, tmp_path):
    calls = _run_spec(monkeypatch, tmp_path, "darwin")
    bundle = calls["BUNDLE"]
    assert bundle["name"] == "SpecChat.app"
    assert re.fullmatch(r"[A-Za-z0-9.-]+\.[A-Za-z0-9.-]+", bundle["bundle_identifier"])
    assert bundle["version"] == __version__
    assert bundle["icon"].endswith(".icns")
    plist = bundle["info_plist"]
    assert plist["CFBundleShortVersionString"] == plist["CFBundleVersion"] == __version__
    assert plist["NSHighResolutionCapable"] is True
    assert re.fullmatch(r"\d+\.\d+", plist["LSMinimumSystemVersion"])
    exe = calls["EXE"]
    assert exe["name"] == "SpecChat", "the macOS program is called SpecChat"
    assert exe["console"] is False, "the macOS app opens no terminal window"
    assert exe["target_arch"] == "arm64", "the macOS app is built for Apple silicon"
    assert exe["exclude_binaries"] is True  # onedir: COLLECT makes the folder BUNDLE wraps
    assert calls["COLLECT"]["name"] == "SpecChat"


def test_spec_names_the_modules_loaded_by_name_at_run_time(monkeypatch, tmp_path):
    calls = _run_spec(monkeypatch, tmp_path, "linux")
    assert "BUNDLE" not in calls, "Linux gets no .app bundle"
    assert calls["EXE"]["console"] is True, "on Linux the program is a console command"
    analysis = calls["Analysis"]
    [script] = analysis["scripts"]
    assert Path(script) == ROOT / "packaging" / "specchat_main.py" and Path(script).is_file()
    hidden = set(analysis["hiddenimports"])
    for name in (
        "app.smoke",
        "app.cli.toy",
        "app.ui.main_window",
        "mlx_lm.models.qwen2",
        "mlx_lm.models.llama",
        "mlx_lm.models.cache",
        "mlx_lm.tool_parsers.json_tools",
        "mlx_lm.chat_templates.deepseek_v32",
        "transformers.models.auto.tokenization_auto",
        "transformers.models.qwen2.tokenization_qwen2",
        "transformers.models.llama.configuration_llama",
        "tokenizers.decoders",
        "jinja2.sandbox",
        "mlx._reprlib_fix",  # imported by mlx.core's C++ initialisation
        "mlx.nn",
    ):
        assert name in hidden, name
    # Model code needs PyTorch; only the auto package's own (lazy, torch-free) mapping module is in.
    assert [name for name in hidden if ".modeling_" in name] == ["transformers.models.auto.modeling_auto"]
    assert not [name for name in hidden if name.split(".")[0] == "tests"]
    assert {"torch", "tensorflow", "pytest"} <= set(analysis["excludes"])
    assert "mlx.extension" not in hidden  # needs setuptools, which is left out
    collected = [dest for dest, _, _ in calls["COLLECT"]["args"][2]]
    assert "tokenizers-0.23.3.dist-info/METADATA" in collected
    assert not [dest for dest in collected if dest.startswith("torch")]
    assert tuple((dest, Path(src).name) for src, dest in analysis["binaries"] if "libmlx" in src)[0] == (
        "mlx/lib",
        "libmlx.so",
    )


def test_the_bundle_takes_every_ui_feature_and_none_of_the_lab(monkeypatch, tmp_path):
    """The window's features load lazily, so the spec must name them; the lab stays out."""
    analysis = _run_spec(monkeypatch, tmp_path, "linux")["Analysis"]
    hidden = set(analysis["hiddenimports"])
    features = {name.split(".")[2] for name in hidden if name.startswith("app.ui.") and name.count(".") >= 3}
    on_disk = {p.name for p in (ROOT / "app" / "ui").iterdir() if (p / "__init__.py").is_file()}
    assert features == on_disk, "every feature folder of app/ui goes into the bundle"
    for module in ("app.ui.chat.text.markdown", "app.ui.common.settings", "app.engine.measure.bench"):
        assert module in hidden, f"{module} would be missing from the bundle"
    assert not [name for name in hidden if name.split(".")[0] == "lab"], "a lab module would ship"
    assert "lab" in analysis["excludes"], "the lab must stay out even if something imports it"


def test_build_fails_when_metallib_would_not_sit_next_to_libmlx(monkeypatch, tmp_path):
    with pytest.raises(SystemExit, match="metallib"):
        _run_spec(monkeypatch, tmp_path, "darwin", metallib_dir="mlx")


def test_icon_generator_writes_an_icns_of_pngs_at_every_size(tmp_path):
    spec = importlib.util.spec_from_file_location("make_icon", ROOT / "packaging" / "make_icon.py")
    make_icon = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_icon)
    icns, png = tmp_path / "SpecChat.icns", tmp_path / "SpecChat.png"
    make_icon.make_icon(ROOT / "resources" / "icon.svg", icns, png)
    chunks = make_icon.read_icns(icns.read_bytes())
    assert [kind for kind, _ in chunks] == [kind for kind, _ in make_icon.ICNS_TYPES]
    for (kind, data), (_, size) in zip(chunks, make_icon.ICNS_TYPES):
        assert make_icon.png_size(data) == (size, size), kind
    assert make_icon.png_size(png.read_bytes()) == (512, 512)
