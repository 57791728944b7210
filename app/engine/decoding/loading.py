"""Loading a main model and an optional draft through mlx-lm.

Call these on the engine's worker thread only: MLX streams belong to the thread that made them.
Remote code is never honoured, whatever a config asks for.
"""

from __future__ import annotations

import gc
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mlx.core as mx
from mlx.utils import tree_flatten, tree_map
from mlx_lm.tokenizer_utils import TokenizerWrapper
from mlx_lm.utils import load as mlx_load

from app.engine.decoding.safetensors_file import safetensors_problem

# owner/name, each part of letters, digits, '-', '_', '.', no '..' and no leading '.'/'-'.
_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}$")


NOT_A_MODEL_FILE = "this is not a model file SpecChat can read: it may be damaged, or not a model at all"
UNREADABLE = "its files could not be read: they may be damaged, or this kind of model is not supported"


class ModelLoadError(Exception):
    """A model could not be loaded. The message is the technical account (a path, a header
    length); `plain` says it in words anyone understands, or is "" where the message already does."""

    def __init__(self, message: str, plain: str = "") -> None:
        super().__init__(message)
        self.plain = plain


def check_safetensors(path: Path) -> None:
    """Refuse a weights file whose header is not what safetensors promises, before MLX reads it,
    so a pickle in disguise or a header lying about sizes is named instead of crashing the loader."""
    problem = safetensors_problem(path)
    if problem is not None:
        raise ModelLoadError(f"{path}: {problem}", NOT_A_MODEL_FILE)


@dataclass
class LoadedModel:
    model: Any  # an mlx.nn.Module (mlx declares no types for its modules)
    tokenizer: TokenizerWrapper
    config: dict[str, Any]
    source: str

    @property
    def name(self) -> str:
        return Path(self.source).name or self.source


@dataclass
class ModelPair:
    main: LoadedModel
    draft: LoadedModel | None = None

    @property
    def tokenizer(self) -> TokenizerWrapper:
        return self.main.tokenizer


def is_repo_id(text: str) -> bool:
    return bool(_REPO_ID.match(text)) and ".." not in text


class LoadCancelled(ModelLoadError):
    """The load was cancelled; what it had read is given back."""

    def __init__(self, source: str) -> None:
        super().__init__(f"loading {source} was cancelled", "the load was cancelled")


def held_dtype() -> str:
    """How unquantized weights run fastest on this device, so how they are held once loaded
    (they are stored as bfloat16 and widened at load where this says float32). MLX's CPU build
    sends float32 matrix products to BLAS but runs bfloat16 ones without it, so where MLX computes
    on the CPU with an optimized BLAS loaded, float32 runs faster (measured 2.0 against 0.8
    tokens/s on Qwen2.5-Coder 1.5B/0.5B); everywhere else bfloat16 halves the memory at the same
    speed."""
    from app.engine.blas import ensure_blas

    if ensure_blas().optimized and mx.default_device().type == mx.cpu:
        return "float32"
    return "bfloat16"


def _widen(model: Any) -> None:
    """16-bit float weights as float32, lazily: each is read and widened together, in `_read_weights`."""
    narrow = (mx.bfloat16, mx.float16)
    model.update(tree_map(lambda p: p.astype(mx.float32) if p.dtype in narrow else p, model.parameters()))


READ_AT_ONCE = 256 * 2**20  # bytes of weights read between two looks at the cancel flag


def release_memory() -> None:
    """Give MLX's cached buffers back to the system: arrays no one holds stay in its cache
    otherwise, so a dropped or cancelled model would keep its memory until the next load."""
    gc.collect()
    mx.clear_cache()


def _read_weights(model: Any, cancel: threading.Event | None) -> bool:
    """Read the lazily loaded weights a group of tensors at a time, so a cancel stops the load
    within a few hundred megabytes' read instead of after all of them; False when it did. (No
    exception is raised here: its traceback would hold the model, and its memory, meanwhile.)"""
    tensors: list[tuple[str, mx.array]] = tree_flatten(model.parameters())  # type: ignore[assignment]
    group: list[mx.array] = []
    size = 0
    for _name, weights in tensors:
        group.append(weights)
        size += weights.nbytes
        if size >= READ_AT_ONCE:
            if cancel is not None and cancel.is_set():
                return False
            mx.eval(group)
            group, size = [], 0
    if cancel is not None and cancel.is_set():
        return False
    mx.eval(group)
    return True


def load_model(source: str | Path, cancel: threading.Event | None = None) -> LoadedModel:
    """Load from a local MLX folder, or a hub repo id (downloaded unless offline). A set
    `cancel` stops it between two groups of tensors with LoadCancelled, its memory given back."""
    text = str(source)
    path = Path(text).expanduser()
    if path.exists():
        if not (path / "config.json").is_file():
            raise ModelLoadError(
                f"{path} is not a model folder: it has no config.json",
                "this folder holds no model SpecChat can read: a model folder has a config.json file",
            )
        if not any(path.glob("*.safetensors")):
            raise ModelLoadError(
                f"{path} has no .safetensors weights (pickle weights are refused)",
                "this folder has no weights SpecChat can read: a model's weights are .safetensors files",
            )
        for weights in sorted(path.glob("*.safetensors")):
            check_safetensors(weights)
        target = str(path)
    elif is_repo_id(text):
        target = text
    else:
        raise ModelLoadError(
            f"{text!r} is neither an existing folder nor a hub repo id (owner/name)",
            "no folder or downloadable model goes by that name",
        )
    try:
        # mlx-lm annotates two results; return_config=True adds the third
        model, tokenizer, config = mlx_load(target, lazy=True, return_config=True, trust_remote_code=False)  # type: ignore[misc]
        if not ({"quantization", "quantization_config"} & set(config)) and held_dtype() == "float32":
            _widen(model)  # stored at 16 bits, computed faster at 32 here
        read = _read_weights(model, cancel)
    except ModelLoadError:
        raise
    except Exception as exc:
        # Whatever a damaged folder makes mlx-lm or the tokenizer raise is a load failure, not a crash.
        raise ModelLoadError(f"could not load {text}: {type(exc).__name__}: {exc}", UNREADABLE) from exc
    if not read:
        del model, tokenizer
        release_memory()
        raise LoadCancelled(text)
    return LoadedModel(model=model, tokenizer=tokenizer, config=config, source=text)


def load_pair(
    main: str | Path, draft: str | Path | None = None, cancel: threading.Event | None = None
) -> ModelPair:
    main_model = load_model(main, cancel)
    if draft is not None and cancel is not None and cancel.is_set():
        del main_model
        release_memory()
        raise LoadCancelled(str(main))
    draft_model = load_model(draft, cancel) if draft is not None else None  # a cancel here drops the main too
    if draft_model is not None:
        main_vocab = main_model.model.args.vocab_size if hasattr(main_model.model, "args") else None
        draft_vocab = draft_model.model.args.vocab_size if hasattr(draft_model.model, "args") else None
        if main_vocab is not None and draft_vocab is not None and abs(main_vocab - draft_vocab) > 128:
            raise ModelLoadError(
                f"the draft's vocabulary ({draft_vocab}) does not match the main's ({main_vocab})",
                "the draft model reads text differently from the main model, so it can't guess ahead for it",
            )
    return ModelPair(main=main_model, draft=draft_model)
