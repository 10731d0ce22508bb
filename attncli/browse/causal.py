"""A saved `attncli patch --json` as browse shows it: one row per layer, each head's patched
metric (normalised) as its one cell, so the overview is patch's layer × head grid, coloured on
a scale centred on zero (the attribution estimate's grid where the file holds no exact one)."""

from __future__ import annotations

import numpy as np

from attncli.browse.patterns import ExactRow, RowData
from attncli.browse.source import WEIGHTS, RowInfo, Source
from attncli.errors import AttnCliError
from attncli.records.causal import Patching
from attncli.saved.causal import patching_from_dict
from attncli.saved.kinds import kind_of, read_saved


def patch_source(result: Patching) -> Source:
    """What browse shows of a patch: each layer a row of heads, each head one cell."""
    exact = bool(result.grid)
    estimate = None if result.attribution is None else result.attribution["grid"]
    values = np.asarray(result.grid if exact or estimate is None else estimate,
                        dtype=np.float64)  # (layers, heads) as the JSON holds them
    grid = values.astype(np.float32)  # (layers, heads)
    heads = grid.shape[1]
    rows = [RowInfo(f"layer {k}", f"L{k}", heads) for k in range(len(grid))]
    what = "patched metric" if exact else "attribution estimate"
    title = (f"{result.model['path']} · patch --{result.direction}: each head's {what}, "
             f"normalised (1: the clean metric restored) · top heads: {top_heads(values)}")

    def compute(row: int, view: str) -> RowData:
        if view != WEIGHTS:
            raise AttnCliError(f"a patch holds one number per head, not {view}")
        return ExactRow(grid[row][:, None, None], [{} for _ in range(heads)])  # (heads, 1, 1)

    return Source(title, [what], rows, compute)


def top_heads(grid: np.ndarray, count: int = 5) -> str:
    """The count heads of grid (layers, heads) farthest from zero, largest first, as patch's
    table lists them: "L16.0 +0.820 · L18.6 -0.310"."""
    order = np.argsort(-np.abs(np.nan_to_num(grid)), axis=None, kind="stable")[:count]
    return " · ".join(f"L{k // grid.shape[1]}.{k % grid.shape[1]} {grid.flat[k]:+.3f}"
                      for k in order.tolist())


def saved_patch(path: str) -> Source:
    """browse --patch: a saved `attncli patch --json` file."""
    data = read_saved(path)
    if not isinstance(data, dict) or kind_of(data) != "patch":
        raise AttnCliError("--patch takes `attncli patch --json` output")
    return patch_source(patching_from_dict(data))
