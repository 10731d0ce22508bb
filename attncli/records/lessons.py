"""The records the lessons return and their renderers read (render/lessons/, render/demo.py):
plain data and their JSON contracts (to_dict), no torch."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from attncli.core.result import Result, Stack, TokenInfo

REASONS = {  # the same English as the table's (render/lessons/lesson_text.py)
    "few": "the range is too short: {sizes:.0f} size(s) measured, a fit needs {needed:.0f} "
           "(use a larger --max-tokens)",
    "flat": "the range is too short: it did not grow from {a:,.0f} to {b:,.0f} tokens, so the "
            "noise is larger than the growth at these sizes",
    "shrinking": "the range is too short: what each doubling adds shrank (exponent "
                 "{exponent:.2f}), so the sizes are too small for the growth to show",
    "unsettled": "the range is too short: the last doublings disagree (exponents {low:.2f} to "
                 "{high:.2f}, more than {spread} apart), so the growth has not settled",
}


@dataclass(frozen=True)
class Fit:
    """A fitted exponent, or None with the kind of reason and the numbers that say why."""

    exponent: float | None
    kind: str | None = None  # few, flat, shrinking or unsettled; None when fitted
    values: dict[str, float] = field(default_factory=dict)

    @property
    def reason(self) -> str | None:
        """Why no exponent is given, in one English sentence (None when it is)."""
        if self.kind is None:
            return None
        return REASONS[self.kind].format(**self.values)


@dataclass(frozen=True)
class CostRow:
    """One size: seconds and peak bytes of each path; naive None where it was skipped."""

    tokens: int
    naive_seconds: float | None
    naive_bytes: int | None
    tiled_seconds: float
    tiled_bytes: int
    naive_would_need: int | None = None  # projected bytes when the naive path was skipped

    def to_dict(self) -> dict[str, Any]:
        """The JSON of one row."""
        return {"tokens": self.tokens, "naive_seconds": self.naive_seconds,
                "naive_bytes": self.naive_bytes, "tiled_seconds": self.tiled_seconds,
                "tiled_bytes": self.tiled_bytes}


@dataclass(frozen=True)
class CostResult:
    """`attncli cost`: the measured rows, the fitted exponents and the projection."""

    config: dict[str, Any]
    rows: list[CostRow]
    fits: dict[str, Fit]  # naive_bytes_exponent … → the exponent, or why there is none
    projection: dict[str, dict[str, int | None]]  # tokens → projected naive and tiled bytes
    max_abs_diff: float  # the tiled context against the naive one, every size both ran

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract of `attncli cost`."""
        return {"kind": "cost", "rows": [r.to_dict() for r in self.rows], "fit": self.fit,
                "fit_reasons": {key: f.reason for key, f in self.fits.items()},
                "projection": self.projection, "max_abs_diff": self.max_abs_diff}

    @property
    def fit(self) -> dict[str, float | None]:
        """Each exponent, None where the sizes measured do not show it."""
        return {key: f.exponent for key, f in self.fits.items()}


@dataclass(frozen=True)
class FlashStep:
    """One key block: its scores (None where masked) and the running state after it."""

    keys: tuple[int, int]  # keys a..b-1 (half-open)
    scores: list[float | None] | None  # scaled scores of the shown head; None: block skipped
    block_max: float | None
    m: float  # running maximum after this block
    scale: float | None  # exp(m_old - m_new): how much the old sum and accumulator shrink
    l: float  # noqa: E741  (the running sum of the papers)
    acc: list[float]  # [head_dim] Σ exp(s - m)·v so far

    @property
    def skipped(self) -> bool:
        """Whether the block lies wholly above the diagonal (every key is in the future)."""
        return self.scores is None

    def to_dict(self) -> dict[str, Any]:
        """The JSON of one step; a skipped block has scores, block_max and scale null."""
        return {"keys": list(self.keys), "scores": self.scores, "block_max": self.block_max,
                "m": self.m, "scale": self.scale, "l": self.l, "acc": self.acc}


@dataclass(frozen=True)
class FlashResult:
    """`attncli flash`: the block-by-block state of one query, and its check."""

    config: dict[str, Any]
    tokens: list[TokenInfo]
    block: int
    query: int
    head: int
    steps: list[FlashStep]
    weights: list[float]  # [N] the shown head's weights, rebuilt from m and l
    context: list[float]  # [d_out] query's context vector
    weights_max_abs_diff: float  # against the naive full pass, every head
    context_max_abs_diff: float
    tiled_max_abs_diff: float  # the context of long/tiled.py (the path `run` takes) against ours
    naive_cells: int
    tiled_cells: int
    ok: bool  # weights and context within setup.within of the naive pass

    @property
    def max_abs_diff(self) -> float:
        """The largest difference from the naive pass, weights and context together."""
        return max(self.weights_max_abs_diff, self.context_max_abs_diff)

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract of `attncli flash`."""
        return {"kind": "flash", "block": self.block, "query": self.query,
                "steps": [s.to_dict() for s in self.steps], "weights": self.weights,
                "context": self.context, "max_abs_diff": self.max_abs_diff,
                "memory": {"naive_cells": self.naive_cells, "tiled_cells": self.tiled_cells}}


@dataclass(frozen=True)
class KVStep:
    """One decoding step as plain data."""

    index: int
    token: str
    cache_len: int
    cache_bytes: int
    weights: list[list[float]]  # [heads][t + 1]
    context: list[float]  # [d_out]
    macs_cached: int
    macs_recompute: int

    def to_dict(self) -> dict[str, Any]:
        """The JSON of one step."""
        return {"index": self.index, "token": self.token, "cache_len": self.cache_len,
                "cache_bytes": self.cache_bytes, "weights": self.weights,
                "context": self.context, "macs_cached": self.macs_cached,
                "macs_recompute": self.macs_recompute}


@dataclass(frozen=True)
class KVCacheResult:
    """`attncli kvcache`: every step, the check against the full pass, and the totals."""

    config: dict[str, Any]
    tokens: list[TokenInfo]
    steps: list[KVStep]
    weights_max_abs_diff: float  # every step's weights against row t of the full pass
    context_max_abs_diff: float  # every step's context against row t of the full pass
    totals: dict[str, Any]
    ok: bool  # every step within setup.within of the full pass (contexts by their rows' size)

    @property
    def max_abs_diff(self) -> float:
        """The largest difference from the full pass, weights and context together."""
        return max(self.weights_max_abs_diff, self.context_max_abs_diff)

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract of `attncli kvcache`."""
        return {"kind": "kvcache", "steps": [s.to_dict() for s in self.steps],
                "max_abs_diff": self.max_abs_diff, "totals": self.totals}


@dataclass(frozen=True)
class PermuteCase:
    """A and B run with or without positions, and how far B is from A reordered."""

    positions: bool
    equivariant: bool
    max_abs_diff: float  # over the weights and the context vectors
    weights_a: Stack  # [heads][T][T]
    weights_b: Stack  # [heads][T][T]

    def to_dict(self) -> dict[str, Any]:
        """The JSON of one case."""
        return {"equivariant": self.equivariant, "max_abs_diff": self.max_abs_diff,
                "weights_a": self.weights_a, "weights_b": self.weights_b}


@dataclass(frozen=True)
class PermuteResult:
    """`attncli permute`: two orders of the same tokens, with and without positions."""

    config: dict[str, Any]
    text_a: str
    text_b: str
    tokens_a: list[TokenInfo]
    tokens_b: list[TokenInfo]
    permutation: list[int]  # for each position of B, the position in A of the same token
    without_positions: PermuteCase
    with_positions: PermuteCase
    causal: bool = False  # the variant's trait: the causal mask carries order by itself

    @property
    def masked(self) -> bool:
        """Whether the variant has the causal mask, which carries order by itself."""
        return self.causal

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract of `attncli permute`."""
        return {"kind": "permute", "a": {"tokens": [t.to_dict() for t in self.tokens_a]},
                "b": {"tokens": [t.to_dict() for t in self.tokens_b]},
                "permutation": self.permutation,
                "without_positions": self.without_positions.to_dict(),
                "with_positions": self.with_positions.to_dict()}


@dataclass(frozen=True)
class Step:
    """One page of the tour: its i18n key, a run, the stages shown and what to focus on."""

    key: str
    result: Result
    stages: tuple[str, ...]
    rows: tuple[int, int] | None = None
