"""How precise a model should be on this device, and what to say about one that is not.

MLX's GPU backends (Metal, CUDA) have fast kernels for quantized matrix products, so 4-bit
models there are both small and quick. Its CPU build has none: a quantized product runs a
generic loop, while a float32 product goes to BLAS, so on a CPU a 4-bit model writes several
times slower than the same model at 16 bits and reads a prompt up to hundreds of times slower
(docs/performance.md gives the figures and the command). So where MLX computes on the CPU,
new models default to 16 bits, and a 4-bit model gets a warning with a one-click 16-bit copy.
"""

from __future__ import annotations

from dataclasses import dataclass

QUANTIZED_DEFAULT = 4
UNQUANTIZED = 16
# how much slower quantized models are on a CPU (docs/performance.md), for the warning's words
SLOWDOWN = "2 to 14"
PROMPT_SLOWDOWN = "17 to 250"


def mlx_on_gpu() -> bool:
    """Whether MLX computes on a GPU (Metal or CUDA) in this process."""
    from app.engine.decoding.shapes.buckets import on_gpu

    return on_gpu()


def default_bits() -> int:
    """The precision a new import or fetch gets when none is asked for: 4 bits where MLX runs on
    a GPU, whose quantized kernels make 4-bit models quick and four times smaller; 16 bits where
    it computes on the CPU, whose build has no fast quantized kernels (2 to 14 times slower to
    write and 17 to 250 times slower to read a prompt than 16 bits; see the module docstring)."""
    return QUANTIZED_DEFAULT if mlx_on_gpu() else UNQUANTIZED


def default_words() -> str:
    """The default for command-line help, with why it is that here."""
    if mlx_on_gpu():
        return f"default here {QUANTIZED_DEFAULT}: MLX runs on a GPU, where 4-bit models are quick"
    return (
        f"default here {UNQUANTIZED}: MLX runs on this computer's processor, where 4-bit models "
        f"are {SLOWDOWN} times slower; 4 where MLX runs on a GPU"
    )


STORED_DTYPE = "bfloat16"  # how new unquantized weights are written: half float32's disk


def unquantized_dtype() -> str:
    """How unquantized weights run fastest here, so how they are held once loaded
    (`loading.held_dtype`); they are stored as STORED_DTYPE."""
    from app.engine.decoding.loading import held_dtype

    return held_dtype()


def dtype_bytes(dtype: str) -> int:
    return 4 if dtype == "float32" else 2


@dataclass(frozen=True, slots=True)
class DevicePrecision:
    """What the window needs to know about precision here, read once off the GUI thread."""

    default_bits: int
    quantized_slow: bool  # quantized models run far slower than unquantized ones here
    unquantized_dtype: str

    def copy_bytes(self, params: int | None) -> int | None:
        """About how much disk an unquantized copy of a model with `params` weights takes."""
        return params * dtype_bytes(STORED_DTYPE) if params else None


def this_device() -> DevicePrecision:
    bits = default_bits()
    return DevicePrecision(bits, bits == UNQUANTIZED, unquantized_dtype())


def slow_model_warning(bits: int) -> str:
    """The warning for a `bits`-bit model on a device where quantized models are slow."""
    return (
        f"This model is stored at {bits} bits. On this computer's processor, {bits}-bit models "
        f"write {SLOWDOWN} times slower than 16-bit ones and read a message {PROMPT_SLOWDOWN} "
        "times slower: expect about a word per second or less."
    )
