"""x @ Wᵀ with W kept as the GGUF file holds it: _qmatmul.c computes on the quantized blocks.

A QuantizedMatrix is a matrix's bytes (rows of whole blocks, in HF's row order) and its type;
its linear() hands them and the float32 activations to the C kernels, which dequantize a chunk
of a row at a time (with the gguf package's float32 numerics, bit for bit, as _dequant.c does)
and multiply it with the activations from the first-level cache. So a held model keeps the
file's bytes (an 8B Q4_K: 4.9 GB, not 32 GB of float32) and a step reads each of them once.

The only difference from dequantize-then-float32-matmul is the order of the dot products' sums
(_qmatmul_body.h says which), except one token's Q4_K and Q6_K, which are taken on integers:
x in fixed point, 29 bits a block of 256 values, and exact integer sums (_qmatmul_fixed.h),
faster (a decode's products 1.3 to 1.7 times) and, but for a value far below its block's
largest (2^14 times: 15 bits kept), nearer the exact product than float32 sums. Each result is
within a few float32 roundings of Σ|w·x|, the bound tests/models/gguf/test_gguf_qmatmul.py
holds every kernel to. The types the kernels take: KERNEL_TYPES; the others, a build without a
C compiler, or ATTNCLI_FUSED=0 or ATTNCLI_QMATMUL=0 in the environment leave every matrix to
dequantize-then-matmul.

Within llama_cpp_numerics(), the kernels compute as llama.cpp's CPU backend does instead: each
token's activations quantized to 8 bits (Q8_0, Q8_1 or Q8_K, by the weight's type, as ggml's
reference quantizers do) and the blocks' dot products taken on the integers (_qmatmul_q8.h);
F16 and BF16 matrices multiply activations rounded to their type. The decoders keep their
keys and values in float16 there too (models/llama/decode.py). `generate --numerics llama.cpp`
asks for it (faster on the blocks); its answers agree with llama.cpp's no more often than
float32's do on average, because with 8-bit activations a last-bit difference anywhere upstream
moves values a whole step (docs/performance.md, "llama.cpp's numerics, measured").
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from types import ModuleType
from typing import Any

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


DENSE_PIECE = 1 << 24  # float32 values of the matrix dequantized at once (64 MB)


class _Dense:
    """dense_rows' setting, and the float32 scratch each piece is dequantized into: one
    buffer for the context's products, not a fresh allocation (and its page faults) each."""

    def __init__(self, at_least: int) -> None:
        self.at_least, self.scratch = at_least, np.empty(0, dtype=np.float32)

    def piece(self, shape: tuple[int, ...]) -> np.ndarray:
        """The scratch as an array of shape (grown where it is smaller)."""
        size = int(np.prod(shape))
        if self.scratch.size < size:
            self.scratch = np.empty(size, dtype=np.float32)
        return self.scratch[:size].reshape(shape)


# Within dense_rows(n): a product of n or more rows takes torch's on the dequantized matrix.
_DENSE: ContextVar[_Dense | None] = ContextVar("dense_rows", default=None)

# Outside dense_rows, float32 products of this many rows or more (a prompt's pass) take torch's
# too: from 32 rows, dequantizing a piece and torch's BLAS product beat the kernels' matrix
# path on every type they take (one thread, a 4,096 x 4,096 matrix: Q4_0 1.2x, Q4_1 1.1x, Q8_0
# 1.6x, Q4_K 1.4x, Q6_K 1.6x, F16 1.3x; 2x from 128 rows: docs/performance.md, round 8).
# Each thread keeps its one scratch piece (DENSE_PIECE float32 values, 64 MB) once it has
# made such a product.
DENSE_FROM = 32
_SCRATCH = threading.local()


def _auto_dense() -> _Dense:
    """This thread's scratch for the products of DENSE_FROM rows or more."""
    dense = getattr(_SCRATCH, "dense", None)
    if dense is None:
        dense = _SCRATCH.dense = _Dense(DENSE_FROM)
    return dense


@contextmanager
def dense_rows(at_least: int = 64) -> Iterator[None]:
    """Within: a product of at least this many rows (the causal passes' batches of variants)
    dequantizes the matrix a piece of DENSE_PIECE values at a time and multiplies with torch's
    BLAS product, as ATTNCLI_QMATMUL=0 does: on hundreds of rows that is about twice as fast
    as the kernels' matrix path (SmolLM2's Q4_1 matrices at 459 rows, one thread: 2.2-2.4x;
    its Q8_0 unembedding: 2.0x), and the copy, one piece at a time, costs a tenth of it.
    Fewer rows (a decode step, a short prompt) keep the kernels."""
    token = _DENSE.set(_Dense(at_least))
    try:
        yield
    finally:
        _DENSE.reset(token)


# Within reused_pieces(): the scratch every backward pass dequantizes its pieces into.
_PIECES: ContextVar[_Dense | None] = ContextVar("reused_pieces", default=None)


@contextmanager
def reused_pieces() -> Iterator[None]:
    """Within: the backward passes of products on blocks (_ThroughBlocks) dequantize each piece
    into one scratch, not a fresh 64 MB each (and its page faults: 0.9 GB an 8B block)."""
    token = _PIECES.set(_Dense(0))
    try:
        yield
    finally:
        _PIECES.reset(token)


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

    def __init__(self, blocks: np.ndarray, qtype: GGMLQuantizationType, cols: int,
                 reload: Callable[[], QuantizedMatrix | None] | None = None) -> None:
        block, size = GGML_QUANT_SIZES[qtype]
        if blocks.ndim != 2 or blocks.dtype != np.uint8 or cols % block or \
                blocks.shape[1] != cols // block * size:
            raise ValueError(f"{blocks.shape} bytes are not rows of {cols} {qtype.name} values")
        self.blocks, self.qtype, self.cols = np.ascontiguousarray(blocks), qtype, cols
        self._code = int(qtype)  # the kernels' type number, converted once
        self.shape = (blocks.shape[0], cols)
        self.reload = reload  # the same matrix read again from its file; None: keep this one

    @property
    def nbytes(self) -> int:
        """The bytes held: the file's own."""
        return int(self.blocks.nbytes)

    def linear(self, x: Tensor, bias: Tensor | None = None) -> Tensor:
        """x (..., cols) @ Wᵀ (+ bias): (..., rows), as F.linear on the dequantized matrix
        computes it up to the order of its sums; on the CPU threads torch would use."""
        if x.requires_grad and torch.is_grad_enabled():  # attribution patching's backward
            y = _ThroughBlocks.apply(x, self)  # (..., rows)
            return y if bias is None else y + bias
        if not x.is_cpu or _native is None:  # torch's product, dequantized
            return torch.nn.functional.linear(x, self.dequantized().to(x.device), bias)
        rows, llama_cpp = self.shape[0], as_llama_cpp()
        flat = x.detach() if x.requires_grad else x  # a step's row: (1, cols) float32 as is
        if flat.dim() != 2 or flat.shape[1] != self.cols or flat.dtype != torch.float32 \
                or not flat.is_contiguous():
            flat = flat.reshape(-1, self.cols).to(torch.float32).contiguous()  # (T, cols)
        dense = _DENSE.get() or (_auto_dense() if flat.shape[0] >= DENSE_FROM else None)
        if dense is not None and not llama_cpp and flat.shape[0] >= dense.at_least:
            y = self._dense(flat, dense).reshape(*x.shape[:-1], rows)  # (..., rows)
            return y if bias is None else y + bias
        if llama_cpp and self.qtype in _ROUNDED:  # ggml's F16 and BF16 dot products
            flat = flat.to(_ROUNDED[self.qtype]).to(torch.float32)  # (T, cols)
        out = torch.empty(flat.shape[0], rows)  # (T, rows)
        _native.matmul(self._code, self.blocks, self.cols, flat.numpy(), out.numpy(),
                       torch.get_num_threads(), llama_cpp)
        y = out if x.dim() == 2 else out.reshape(*x.shape[:-1], rows)  # (..., rows)
        return y if bias is None else y + bias

    def _dense(self, flat: Tensor, dense: _Dense) -> Tensor:
        """flat (T, cols) @ Wᵀ: (T, rows), W dequantized DENSE_PIECE values at a time into
        dense's scratch, each piece's product written into its columns of the one result (a
        list of the pieces' products joined at the end would hold the result twice: 1 GB more
        for an 8B's logits over 2,000 positions)."""
        step, rows = max(1, DENSE_PIECE // self.cols), self.shape[0]  # matrix rows a piece
        if rows <= step:  # one piece: its product is the result
            piece = dequantize(self.blocks, self.qtype, empty=dense.piece)  # (rows, cols)
            return torch.nn.functional.linear(flat, torch.from_numpy(piece))  # (T, rows)
        out = flat.new_empty(flat.shape[0], rows)  # (T, rows)
        for begin in range(0, rows, step):
            piece = dequantize(self.blocks[begin:begin + step], self.qtype, empty=dense.piece)
            out[:, begin:begin + step] = torch.nn.functional.linear(
                flat, torch.from_numpy(piece))  # (T, c)
        return out  # (T, rows)

    def dequantized(self, into: np.ndarray | None = None) -> Tensor:
        """The float32 matrix (rows, cols), as the source's tensor() gives it; into: a
        (rows, cols) float32 array to write it in (a scratch reused across layers)."""
        return torch.from_numpy(dequantize(self.blocks, self.qtype, empty=None if into is None
                                           else lambda shape: into.reshape(shape)))


class _ThroughBlocks(torch.autograd.Function):
    """x @ Wᵀ whose gradient flows back to x without a float32 copy of W kept for it: the
    forward on the blocks (or dequantized, off the CPU), the backward ∂x = ∂y · W with W
    dequantized DENSE_PIECE values at a time, read again from its file where it came from one,
    so a backward pass through an 8B holds one matrix at a time, not 32 GB of float32."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, matrix: QuantizedMatrix) -> Tensor:
        ctx.matrix = matrix.reload or matrix  # the blocks themselves dropped where re-readable
        with torch.no_grad():
            return matrix.linear(x)  # (..., rows)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
        held = ctx.matrix
        matrix = held if isinstance(held, QuantizedMatrix) else held()
        assert matrix is not None
        flat = grad.reshape(-1, matrix.shape[0])  # (N, rows)
        out = flat.new_zeros(flat.shape[0], matrix.cols)  # (N, cols)
        step = max(1, DENSE_PIECE // matrix.cols)  # matrix rows a piece
        scratch = _PIECES.get() or _Dense(0)
        for begin in range(0, matrix.shape[0], step):
            piece = torch.from_numpy(dequantize(matrix.blocks[begin:begin + step],
                                                matrix.qtype, empty=scratch.piece))  # (r, cols)
            out += flat[:, begin:begin + step] @ piece.to(grad.device)  # (N, cols)
        return out.reshape(*grad.shape[:-1], matrix.cols), None
