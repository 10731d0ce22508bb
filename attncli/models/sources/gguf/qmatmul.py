"""x @ Wᵀ with W kept as the GGUF file holds it: _qmatmul.c computes on the quantized blocks.

A QuantizedMatrix is a matrix's bytes (rows of whole blocks, in HF's row order) and its type;
its linear() hands them and the float32 activations to the C kernels, which dequantize a chunk
of a row at a time (with the gguf package's float32 numerics, bit for bit, as _dequant.c does)
and multiply it with the activations from the first-level cache. So a held model keeps the
file's bytes (an 8B Q4_K: 4.9 GB, not 32 GB of float32) and a step reads each of them once.

The only difference from dequantize-then-float32-matmul is the order of the dot products' sums
(_qmatmul_body.h says which): each result is within a few float32 roundings of Σ|w·x|, the bound
tests/models/gguf/test_gguf_qmatmul.py holds every kernel to. The types the kernels take:
KERNEL_TYPES; the others, a build without a C compiler, or ATTNCLI_FUSED=0 or
ATTNCLI_QMATMUL=0 in the environment leave every matrix to dequantize-then-matmul.

Within llama_cpp_numerics(), the kernels compute as llama.cpp's CPU backend does instead: each
token's activations quantized to 8 bits (Q8_0, Q8_1 or Q8_K, by the weight's type, as ggml's
reference quantizers do) and the blocks' dot products taken on the integers (_qmatmul_q8.h);
F16 and BF16 matrices multiply activations rounded to their type. The decoders keep their
keys and values in float16 there too (models/llama/decode.py). A measuring tool, not a mode of
the commands: its answers agree with llama.cpp's no more often than float32's do, because with
8-bit activations a last-bit difference anywhere upstream moves values a whole step
(docs/performance.md, "llama.cpp's numerics, measured").
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from types import ModuleType

import numpy as np
import torch
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType
from torch import Tensor

from attncli.models.sources.gguf.dequant import dequantize

_native: ModuleType | None
try:
    import attncli.models.sources.gguf._qmatmul as _native
except ImportError:  # built without a C compiler: every matrix is dequantized
    _native = None

ENABLED = (_native is not None and os.environ.get("ATTNCLI_FUSED", "1") != "0"
           and os.environ.get("ATTNCLI_QMATMUL", "1") != "0")
# The C code's types whose block layout is the one the gguf package gives.
KERNEL_TYPES = frozenset(
    qtype for qtype in GGMLQuantizationType
    if _native is not None and _native.kinds().get(int(qtype)) == GGML_QUANT_SIZES.get(qtype))


_LLAMA_CPP: ContextVar[bool] = ContextVar("llama_cpp_numerics", default=False)


@contextmanager
def llama_cpp_numerics(on: bool = True) -> Iterator[None]:
    """Within: products on the quantized blocks compute as llama.cpp does (see the top)."""
    token = _LLAMA_CPP.set(on)
    try:
        yield
    finally:
        _LLAMA_CPP.reset(token)


def as_llama_cpp() -> bool:
    """Whether this run computes as llama.cpp does (llama_cpp_numerics)."""
    return _LLAMA_CPP.get()


def computes(qtype: GGMLQuantizationType) -> bool:
    """Whether the kernels multiply matrices of this type here."""
    return ENABLED and qtype in KERNEL_TYPES


# The float types whose activations llama.cpp rounds to the weights' own type first.
_ROUNDED = {GGMLQuantizationType.F16: torch.float16, GGMLQuantizationType.BF16: torch.bfloat16}


class QuantizedMatrix:
    """A (rows, cols) matrix as rows of quantized blocks, multiplied without a float32 copy."""

    def __init__(self, blocks: np.ndarray, qtype: GGMLQuantizationType, cols: int) -> None:
        block, size = GGML_QUANT_SIZES[qtype]
        if blocks.ndim != 2 or blocks.dtype != np.uint8 or cols % block or \
                blocks.shape[1] != cols // block * size:
            raise ValueError(f"{blocks.shape} bytes are not rows of {cols} {qtype.name} values")
        self.blocks, self.qtype, self.cols = np.ascontiguousarray(blocks), qtype, cols
        self.shape = (blocks.shape[0], cols)

    @property
    def nbytes(self) -> int:
        """The bytes held: the file's own."""
        return int(self.blocks.nbytes)

    def linear(self, x: Tensor, bias: Tensor | None = None) -> Tensor:
        """x (..., cols) @ Wᵀ (+ bias): (..., rows), as F.linear on the dequantized matrix
        computes it up to the order of its sums; on the CPU threads torch would use."""
        # Off the CPU, or where a gradient must flow back through x (attribution patching):
        # torch's product on the dequantized matrix, which autograd differentiates.
        if x.device.type != "cpu" or _native is None or (x.requires_grad
                                                          and torch.is_grad_enabled()):
            return torch.nn.functional.linear(x, self.dequantized().to(x.device), bias)
        rows, llama_cpp = self.shape[0], as_llama_cpp()
        flat = x.detach()  # a decode step's row is already (1, cols) float32: nothing to do
        if flat.dim() != 2 or flat.shape[1] != self.cols or flat.dtype != torch.float32 \
                or not flat.is_contiguous():
            flat = flat.reshape(-1, self.cols).to(torch.float32).contiguous()  # (T, cols)
        if llama_cpp and self.qtype in _ROUNDED:  # ggml's F16 and BF16 dot products
            flat = flat.to(_ROUNDED[self.qtype]).to(torch.float32)  # (T, cols)
        out = torch.empty(flat.shape[0], rows)  # (T, rows)
        _native.matmul(int(self.qtype), self.blocks, self.cols, flat.numpy(), out.numpy(),
                       torch.get_num_threads(), llama_cpp)
        y = out if x.dim() == 2 else out.reshape(*x.shape[:-1], rows)  # (..., rows)
        return y if bias is None else y + bias

    def dequantized(self) -> Tensor:
        """The float32 matrix (rows, cols), as the source's tensor() gives it."""
        return torch.from_numpy(dequantize(self.blocks, self.qtype))
