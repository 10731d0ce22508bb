"""A family's view of a weight source: its tensors under the family's own names, checked."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import Tensor

from attncli.errors import AttnCliError
from attncli.models.sources.base import WeightSource

if TYPE_CHECKING:
    from attncli.models.sources.gguf.qmatmul import QuantizedMatrix

FLOAT_DTYPES = ("F16", "BF16", "F32", "F64")
# Block-quantized types (Q4_1, Q6_K, IQ2_XS, TQ1_0): a source that reports one dequantizes it.
_QUANTIZED = re.compile(r"[IT]?Q\d\w*")


def where(source: WeightSource) -> Path:
    """The path errors name: the weights file where the source has one, else its path."""
    file = getattr(source, "weights_file", None)
    return file if isinstance(file, Path) else source.path


def readable_dtype(dtype: str) -> bool:
    """A float dtype, or a quantized block type its source dequantizes to float32."""
    return dtype in FLOAT_DTYPES or bool(_QUANTIZED.fullmatch(dtype))


class Named:
    """source's tensors as prefix + name: "model." or "transformer." stays out of the family's
    code. finite: refuse NaN and infinity; keep: read each tensor once (decoding rereads);
    held: kept for the run (a held decoder's view), each matrix on pages of its own, not in a
    recycled buffer, which a view dropped after its layer hands on to the next layer's."""

    def __init__(self, source: WeightSource, prefix: str = "", finite: bool = False,
                 keep: bool = False, held: bool = False) -> None:
        self.source, self.prefix, self.finite, self.keep = source, prefix, finite, keep
        self.held = keep and held
        self._shapes = source.shapes()  # read once: a step asks for shapes hundreds of times
        self._names = set(self._shapes)
        self._kept: dict[str, Tensor] = {}
        self._kept_blocks: dict[str, QuantizedMatrix | None] = {}

    def reading_once(self, held: bool = False) -> Named:
        """The same view, each tensor read from the source once; held: for the whole run."""
        return Named(self.source, self.prefix, self.finite, keep=True, held=held)

    def __contains__(self, name: str) -> bool:
        return self.stored_name(name) in self._names

    def stored_name(self, name: str) -> str:
        """The checkpoint's own name of a tensor."""
        return self.prefix + name

    def __getitem__(self, name: str) -> Tensor:
        if name in self._kept:
            return self._kept[name]
        tensor = self._checked(self._read(name), name)
        if self.keep:
            self._kept[name] = tensor
        return tensor

    def quantized(self, name: str, into: np.ndarray | None = None) -> QuantizedMatrix | None:
        """The matrix as its file holds it, for x @ Wᵀ on the quantized blocks (a GGUF source
        on the CPU, a type the kernels take); None: read it as float32 with [name]. Not where
        finite values are asked for: those are checked on the float32 tensor. into: the
        (rows, row_bytes) bytes to read it into (stacked's), not kept apart."""
        if into is None and name in self._kept_blocks:
            return self._kept_blocks[name]
        matrix = self._blocks(name, into, held=self.held and into is None)
        if self.keep and into is None:
            self._kept_blocks[name] = matrix
        return matrix

    def _blocks(self, name: str, into: np.ndarray | None, held: bool) -> QuantizedMatrix | None:
        """The source's read of a matrix as blocks (quantized's, none kept here); held: on pages
        of its own for the run (buffers.populated), not a recycled buffer."""
        reader = getattr(self.source, "quantized", None)
        if self.finite or reader is None:
            return None
        stored = self.stored_name(name)
        return reader(stored, into=into) if into is not None else \
            reader(stored, held=True) if held else reader(stored)

    def stacked(self, names: list[str]) -> QuantizedMatrix | None:
        """A held view's matrices (q, k, v; gate, up) as one, their rows one after another,
        where the kernels take each and they share a type and width: one product computes
        them all. Each is read straight into its rows of the stack: the held copy is made
        with one write of each byte, not read apart and then concatenated. None elsewhere."""
        key = "+".join(names)
        if not self.keep or key in self._kept_blocks:
            return self._kept_blocks.get(key)
        self._kept_blocks[key] = stack = self._stack(names)
        for name in names if stack is not None else ():
            self._kept_blocks.pop(name, None)  # the stack holds their bytes
        return stack

    def _stack(self, names: list[str]) -> QuantizedMatrix | None:
        """names' matrices in one (Σ rows, row_bytes) array, or None where their types or widths
        differ (the header says, before anything is read) or any is not read as blocks. The
        first is read as any matrix is (that read says whether the kernels take its type) and
        copied in; the rest are read straight into their rows."""
        from attncli.models.sources.gguf.buffers import populated
        from attncli.models.sources.gguf.qmatmul import QuantizedMatrix

        if len({(self.dtype(name), self.shape(name)[1:]) for name in names}) != 1:
            return None
        first = self._blocks(names[0], None, held=False)  # copied into the stack, then dropped
        if first is None:
            return None
        counts = [self.shape(name)[0] for name in names]
        stack = populated((sum(counts), first.blocks.shape[1]))  # (Σ rows, row_bytes)
        stack[:counts[0]] = first.blocks
        begin = counts[0]
        for name, count in zip(names[1:], counts[1:], strict=True):
            if self.quantized(name, into=stack[begin:begin + count]) is None:
                return None
            begin += count
        return QuantizedMatrix(stack, first.qtype, first.cols)

    def _read(self, name: str) -> Tensor:
        """The tensor as the source stores it, as float32."""
        return self.source.tensor(self.stored_name(name))

    def rows(self, name: str, indices: Sequence[int]) -> Tensor:
        """Only the given rows of a 2-D tensor: an embedding lookup that skips the rest."""
        return self._checked(self.source.rows(self.stored_name(name), indices), name)

    def shape(self, name: str) -> tuple[int, ...]:
        """The tensor's shape, from the header only."""
        return self._shapes[self.stored_name(name)]

    def dtype(self, name: str) -> str:
        """The tensor's stored dtype name, from the header only."""
        return self.source.dtype_name(self.stored_name(name))

    def _checked(self, t: Tensor, name: str) -> Tensor:
        """t, unless finite is asked for and it holds NaN or infinity."""
        if self.finite and not torch.isfinite(t).all():
            raise AttnCliError(f"tensor {name} of the checkpoint holds NaN or infinite values")
        return t


def check_tensors(expected: dict[str, tuple[int, ...]], shape: Callable[[str], tuple[int, ...]],
                  dtype: Callable[[str], str], has: Callable[[str], bool], prefix: str | Named,
                  at: object, model: str) -> None:
    """Every tensor a run reads is present, float, and shaped as the config says: one line
    naming the first that is not (model: what needs them, e.g. "3-layer GPT-2"). prefix: what
    comes before each name in the checkpoint, or the view that knows its stored names."""
    stored = prefix.stored_name if isinstance(prefix, Named) else (lambda name: prefix + name)
    missing = [stored(name) for name in expected if not has(name)]
    if missing:
        listed = ", ".join(missing[:4]) + (", ..." if len(missing) > 4 else "")
        raise AttnCliError(f"{at} lacks {len(missing)} tensor(s) a {model} needs: {listed}")
    for name, want in expected.items():
        if shape(name) != want:
            raise AttnCliError(f"tensor {stored(name)} in {at} has shape {shape(name)}, "
                               f"expected {want}")
        if not readable_dtype(dtype(name)):
            raise AttnCliError(f"tensor {stored(name)} in {at} has dtype {dtype(name)}, "
                               f"expected one of {', '.join(FLOAT_DTYPES)}")
