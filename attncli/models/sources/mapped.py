"""A family's tensors under the Llama block's names, whatever its checkpoint calls them.

Families built on the Llama block (Gemma, Phi-3, GPT-NeoX, OLMo 2, SmolLM3) store the same
matrices under other names, and some fuse several into one: Phi-3's qkv_proj stacks Q, K and V;
GPT-NeoX's query_key_value interleaves them head by head. A Piece says where one block matrix
lies in the stored tensor; Mapped reads it there, so the block's code never sees the difference.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from torch import Tensor

from attncli.models.sources.base import WeightSource
from attncli.models.sources.named import Named

if TYPE_CHECKING:
    import numpy as np

    from attncli.models.sources.gguf.qmatmul import QuantizedMatrix


@dataclass(frozen=True)
class Piece:
    """Rows start..stop of each of `groups` equal slices of the stored tensor `name`.

    groups=1 is a plain slice (Phi-3's [Q; K; V]); groups=heads takes each head's share of a
    per-head interleave (GPT-NeoX's [q k v] per head). stop=None: the whole tensor.
    """

    name: str
    groups: int = 1
    start: int = 0
    stop: int | None = None

    def cut(self, t: Tensor) -> Tensor:
        """This piece of the stored tensor t (rows, ...) → (groups · (stop - start), ...)."""
        if self.stop is None:
            return t
        per_group = t.view(self.groups, -1, *t.shape[1:])  # (groups, rows/groups, ...)
        return per_group[:, self.start:self.stop].reshape(-1, *t.shape[1:]).contiguous()

    def columns(self, y: Tensor) -> Tensor:
        """This piece's output features of y (..., rows): what x @ Wᵀ through the whole stored
        tensor gives in the columns of this piece's rows."""
        if self.stop is None:
            return y
        per_group = y.reshape(*y.shape[:-1], self.groups, -1)  # (..., groups, rows/groups)
        return per_group[..., self.start:self.stop].reshape(*y.shape[:-1], -1)

    def shape(self, stored: tuple[int, ...]) -> tuple[int, ...]:
        """The piece's shape, from the stored tensor's shape alone."""
        if self.stop is None:
            return stored
        return (self.groups * (self.stop - self.start), *stored[1:])


class Mapped(Named):
    """source's tensors by block name: each name a Piece of a stored tensor (prefix included).

    A name the table does not hold is read as prefix + name, as Named reads it. A fused tensor
    is read once for its pieces (the last one read is kept).
    """

    def __init__(self, source: WeightSource, prefix: str, table: dict[str, Piece],
                 finite: bool = False, keep: bool = False, held: bool = False) -> None:
        super().__init__(source, prefix, finite, keep, held)
        self.table = table
        self._fused: tuple[str, Tensor] | None = None
        self._plain: dict[str, Piece] = {}  # names the table does not hold, made once each

    def reading_once(self, held: bool = False) -> Mapped:
        return Mapped(self.source, self.prefix, self.table, self.finite, keep=True, held=held)

    def _piece(self, name: str) -> Piece:
        piece = self.table.get(name) or self._plain.get(name)
        if piece is None:  # a decode step asks for the same few hundred names each token
            piece = self._plain[name] = Piece(self.prefix + name)
        return piece

    def stored_name(self, name: str) -> str:
        return self._piece(name).name

    def fused(self, names: list[str]) -> tuple[str, list[Piece]] | None:
        """Where every one of names is a piece of one stored tensor (Phi-3's qkv_proj, NeoX's
        query_key_value): the name that reads that tensor whole, and each name's piece."""
        pieces = [self.table.get(name) for name in names]
        stored = {p.name for p in pieces if p is not None}
        if len(stored) != 1 or any(p is None or p.stop is None for p in pieces):
            return None
        whole = f"fused:{stored.pop()}"
        self.table.setdefault(whole, Piece(whole.removeprefix("fused:")))
        return whole, [p for p in pieces if p is not None]

    def _blocks(self, name: str, into: np.ndarray | None, held: bool) -> QuantizedMatrix | None:
        if self._piece(name).stop is not None:  # a piece of a fused tensor: read as float32
            return None
        return super()._blocks(name, into, held)

    def _read(self, name: str) -> Tensor:
        piece = self._piece(name)
        if self._fused is not None and self._fused[0] == piece.name:
            return piece.cut(self._fused[1])
        stored = self.source.tensor(piece.name)  # (rows, ...)
        if piece.stop is not None:
            self._fused = piece.name, stored
        return piece.cut(stored)

    def shape(self, name: str) -> tuple[int, ...]:
        piece = self._piece(name)
        return piece.shape(self._shapes[piece.name])
