"""Screenshots of the picker guiding a newcomer: drafts hidden with a count, then shown with a
reason in plain words. Uses the real small models from `fetch-models` when they are present."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from PySide6.QtWidgets import QApplication, QWidget

Wait = Callable[..., bool]
Save = Callable[[QApplication, QWidget, Path], Path]
REAL_MODELS = Path.home() / ".cache" / "specchat" / "mlx"


def _library(root: Path) -> Path:
    """The toy pair plus a draft whose token ids mean other text, like one of another family."""
    import json

    from app.engine.measure.toy import write_toy_models

    toy = write_toy_models(root / "toy-guide", seed=0)
    lib = root / "lib-guide"
    for name, src in (("toy-main", toy.main), ("toy-draft", toy.draft), ("toy-other-family", toy.draft)):
        shutil.copytree(src, lib / name)
    path = lib / "toy-other-family" / "tokenizer.json"
    spec = json.loads(path.read_text(encoding="utf-8"))
    vocab = spec["model"]["vocab"]
    by_id = {i: text for text, i in vocab.items()}
    vocab[by_id[300]], vocab[by_id[301]] = 301, 300
    path.write_text(json.dumps(spec, ensure_ascii=False), encoding="utf-8")
    return lib


def render_picker_guide(app: QApplication, home: Path, out: Path, wait: Wait, save: Save) -> None:
    from app.engine.library.discovery import Sources
    from app.ui.picker.picker import PickerDialog

    real = tuple(p for p in (REAL_MODELS,) if p.is_dir() and any(REAL_MODELS.glob("*/config.json")))
    sources = Sources(hub_cache=None, lmstudio=None, specchat=_library(home), extra=real, use_hub=False)
    picker = PickerDialog(sources, usable_memory=64 * 2**30)
    picker.resize(1100, 760)
    picker.show()
    wait(app, lambda: picker.main_model.rowCount() > 0 and picker.drafts_checked(), 120)
    save(app, picker, out / "picker-hidden-drafts.png")
    picker.show_incompatible.setChecked(True)
    save(app, picker, out / "picker-hidden-drafts-shown.png")
    picker.close()
