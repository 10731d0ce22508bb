"""One row of heads as browse reads it: exact (every N × N weight held) or tiled (each row's
log-sum-exp held, so any window, row or pooled block is exact on demand and N × N never is)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import torch

from attncli.core.attention import Attention
from attncli.core.convert import masked_lists
from attncli.long.pooling import block_edges, block_size
from attncli.long.run import Tiled, attend, maps, summary
from attncli.long.window import weights_window
from attncli.records.heads import figure

THUMB = 16  # the largest side of an overview thumbnail, in weights


def pool_edges(size: int, blocks: int) -> list[int]:
    """Edges of at most blocks near-equal blocks of size tokens: block b is edges[b]..edges[b+1]."""
    count = max(1, min(size, blocks))
    return [round(k * size / count) for k in range(count + 1)]


def max_pool(matrix: np.ndarray, edges: list[int], cols: list[int] | None = None) -> np.ndarray:
    """matrix (R, C) max-pooled into blocks (NaN, masked, ignored; an all-masked block is NaN).
    Edges rise strictly: block b is rows edges[b]..edges[b+1]-1."""
    cols = edges if cols is None else cols
    seen = np.where(np.isnan(matrix), -np.inf, matrix)  # (R, C)
    out = np.maximum.reduceat(seen, edges[:-1], axis=0)  # (b, C)
    out = np.maximum.reduceat(out, cols[:-1], axis=1).astype(np.float32)  # (b, c)
    out[np.isneginf(out)] = np.nan
    return out


def matrices(data: Any, heads: int, causal: bool = False) -> np.ndarray:
    """Nested lists [heads][T][T] or [T][T] (None where masked) as (heads, T, T) float32; a
    causal row's future keys NaN (masked), whatever value the stage holds there."""
    array = np.array(data, dtype=np.float32)  # None becomes NaN
    array = array.reshape(heads, *array.shape[-2:]) if array.ndim == 2 else array
    if causal:
        array[:, np.triu(np.ones(array.shape[-2:], dtype=bool), 1)] = np.nan
    return array


class RowData(Protocol):
    """One row's heads: their thumbnails and scores, and each head's pattern on demand."""

    @property
    def heads(self) -> int: ...
    @property
    def size(self) -> int: ...  # tokens

    thumbs: list[np.ndarray]  # per head (p, p), max-pooled, NaN where masked
    scores: list[dict[str, float]]  # per head: measures and head scores, as `heads` names them
    exact: bool  # every weight is held (else windows are computed from the tiled pass)

    def window(self, head: int, rows: range, cols: range) -> np.ndarray: ...  # (R, C)
    def pooled(self, head: int, blocks: int) -> tuple[list[int], np.ndarray]: ...  # (b, b)
    def row(self, head: int, index: int) -> np.ndarray: ...  # (N,) NaN where masked


@dataclass(frozen=True, eq=False)
class Cells:
    """Numbers per position of each row's heads (a patch with --per-position)."""

    values: np.ndarray  # (rows, heads, P)
    labels: list[str]  # the P positions' tokens


@dataclass(eq=False)  # one row's arrays: compared by identity
class ExactRow:
    """Every weight of the row's heads: (heads, N, N) float32, NaN where masked."""

    weights: np.ndarray
    scores: list[dict[str, float]]
    thumbs: list[np.ndarray] = field(default_factory=list)
    exact: bool = True

    def __post_init__(self) -> None:
        edges = block_edges(self.size, THUMB)  # as the tiled pass pools
        if not self.thumbs:
            self.thumbs = [max_pool(m, edges) for m in self.weights]

    @property
    def heads(self) -> int:
        return int(self.weights.shape[0])

    @property
    def size(self) -> int:
        return int(self.weights.shape[-1])

    def window(self, head: int, rows: range, cols: range) -> np.ndarray:
        return self.weights[head, rows.start:rows.stop, cols.start:cols.stop]  # (R, C)

    def pooled(self, head: int, blocks: int) -> tuple[list[int], np.ndarray]:
        edges = block_edges(self.size, blocks)  # as the tiled path pools
        return edges, max_pool(self.weights[head], edges)  # (b, b)

    def row(self, head: int, index: int) -> np.ndarray:
        return self.weights[head, index]  # (N,)


def tiled_row(module: Attention, causal: bool, x: torch.Tensor, top_k: int) -> TiledRow:
    """One tiled pass over x (N, d_in), its thumbnails max-pooled inside the pass."""
    side = block_size(block_edges(int(x.shape[0]), THUMB))
    return TiledRow(attend(module, causal, x, top_k, None, side))


def _pooled_array(values: list[list[float | None]]) -> np.ndarray:
    return np.array([[np.nan if v is None else v for v in line] for line in values],
                    dtype=np.float32)  # (b, b)


@dataclass(eq=False)
class TiledRow:
    """A tiled pass's queries, keys and log-sum-exps: windows and rows rebuilt on demand."""

    tiled: Tiled | None  # None once released: its pictures and scores stay
    scores: list[dict[str, float]] = field(default_factory=list)
    thumbs: list[np.ndarray] = field(default_factory=list)
    exact: bool = False
    _pooled: dict[tuple[int, int], tuple[list[int], np.ndarray]] = field(default_factory=dict)
    _shape: tuple[int, int] = (0, 0)

    def __post_init__(self) -> None:
        assert self.tiled is not None, "made from a pass"
        self._shape = (int(self.tiled.queries.shape[0]), int(self.tiled.queries.shape[1]))
        every = list(range(self.heads))
        if not self.scores:
            self.scores = [{k: figure(s, k) for k in s if k != "head"}
                           for s in summary(self.tiled)]
        if not self.thumbs:  # from the blocks the pass pooled, when it did (tiled_row)
            self.thumbs = [_pooled_array(m.values) for m in
                           maps(self.tiled, every, "max", THUMB, None)]
        self.tiled.out.pooled = None  # other block counts are rebuilt from the lse

    @property
    def heads(self) -> int:
        return self._shape[0]

    @property
    def size(self) -> int:
        return self._shape[1]

    @property
    def alive(self) -> bool:
        """Whether the pass's queries and keys are still held."""
        return self.tiled is not None

    def release(self) -> None:
        """Let the pass's tensors go; the thumbnails and scores stay."""
        self.tiled = None

    def _pass(self) -> Tiled:
        if self.tiled is None:
            raise LookupError("released: compute the row again")
        return self.tiled

    def _weights(self, head: int, rows: range, cols: range) -> np.ndarray:
        t, h = self._pass(), slice(head, head + 1)
        with torch.no_grad():
            w = weights_window(t.queries[h], t.keys[h], t.out.lse[h], rows, cols,
                               t.causal)  # (1, R, C)
            out: Any = masked_lists(w, rows, cols, t.causal)
        return np.asarray(out, dtype=np.float32)[0]  # (R, C)

    def window(self, head: int, rows: range, cols: range) -> np.ndarray:
        return self._weights(head, rows, cols)

    def pooled(self, head: int, blocks: int) -> tuple[list[int], np.ndarray]:
        key = (head, blocks)
        if key not in self._pooled:
            (pmap,) = maps(self._pass(), [head], "max", blocks, None)
            self._pooled[key] = (list(pmap.edges), _pooled_array(pmap.values))
        return self._pooled[key]

    def row(self, head: int, index: int) -> np.ndarray:
        return self._weights(head, range(index, index + 1), range(self.size))[0]  # (N,)
