"""The O(n²) cost: time and peak attention-state bytes of the naive and the tiled path as N doubles.

Bytes are measured (every tensor each pass allocates, tracked as torch creates and frees it),
never computed from the formula the lesson shows.
"""

from __future__ import annotations

import time

import torch
from torch import Tensor

from attncli.core.attention import QKVAttention
from attncli.core.embed import check_dims
from attncli.core.sizes import FLOAT_BYTES, NAIVE_STAGES
from attncli.errors import AttnCliError
from attncli.lessons.budget import check_cost
from attncli.lessons.growth import Fit, fit_exponent, fit_growth
from attncli.lessons.memory import peak_bytes
from attncli.lessons.setup import max_abs
from attncli.long.tiled import tiled_attention
from attncli.machine import available_bytes
from attncli.records.lessons import CostResult, CostRow

MIN_TOKENS = 128
BLOCK = 128  # query rows and key columns per tile of the measured tiled pass
PROJECT_TO = (32768, 131072)
NAIVE_LIMIT = 2 * 2**30  # the naive path is skipped where it would need more than this


def sizes(max_tokens: int) -> list[int]:
    """128, 256, … up to max_tokens."""
    if max_tokens < MIN_TOKENS:
        raise AttnCliError(f"--max-tokens must be at least {MIN_TOKENS} (got {max_tokens})")
    return [MIN_TOKENS * 2**k for k in range((max_tokens // MIN_TOKENS).bit_length())]


def project(points: list[tuple[int, float]], tokens: int, default_exponent: float) -> int | None:
    """value at tokens, from the largest measured point and the fitted exponent (the default,
    the theory's, where the sizes measured do not show one)."""
    if not points:
        return None
    exponent = fit_exponent(points) or default_exponent
    n, v = points[-1]
    return round(v * (tokens / n) ** exponent)


def _inputs(num_tokens: int, heads: int, head_dim: int, seed: int) -> tuple[Tensor, ...]:
    gen = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(heads, num_tokens, head_dim, generator=gen)  # (heads, N, head_dim)
                 for _ in range(3))


def measure(num_tokens: int, heads: int, head_dim: int, seed: int,
            naive: bool) -> tuple[CostRow, float]:
    """One size: each path in its own fresh run, tracked (bytes) and timed.

    The naive pass is timed in its tracked run (about ten ops, so tracking costs nothing
    visible); the tiled pass, thousands of small ops, is timed in a separate untracked run.
    """
    queries, keys, values = _inputs(num_tokens, heads, head_dim, seed)
    inputs = (queries, keys, values)
    attend = QKVAttention(1, 1)  # only its attend(): the naive path's (heads, N, N) stages

    def naive_pass() -> Tensor:
        return attend.attend(queries, keys, values, causal=True, dropout=None).context

    def tiled_pass() -> Tensor:
        return tiled_attention(queries, keys, values, causal=True, top_k=0, block_q=BLOCK,
                               block_k=BLOCK).context

    tiled_bytes, _ = peak_bytes(tiled_pass, inputs, one_thread=True)
    start = time.perf_counter()
    with torch.no_grad():
        tiled_context = tiled_pass()  # (heads, N, head_dim)
    tiled_seconds = time.perf_counter() - start
    if not naive:
        return CostRow(num_tokens, None, None, tiled_seconds, tiled_bytes), 0.0
    naive_bytes, naive_seconds = peak_bytes(naive_pass, inputs)
    with torch.no_grad():
        heads_side_by_side = tiled_context.transpose(0, 1).reshape(num_tokens, -1)  # (N, d_out)
        diff = max_abs(heads_side_by_side, naive_pass())  # naive: (N, d_out), heads side by side
    return CostRow(num_tokens, naive_seconds, naive_bytes, tiled_seconds, tiled_bytes), diff


def cost(max_tokens: int = 4096, heads: int = 1, emb_dim: int = 64, seed: int = 123,
         naive_limit: int = NAIVE_LIMIT) -> CostResult:
    """Measure both paths as N doubles; skip naive where it would need more than naive_limit
    (or half the memory available), after the sizes and the work are estimated."""
    check_dims(heads=heads, emb_dim=emb_dim)
    if emb_dim % heads:
        raise AttnCliError(f"heads must divide emb-dim (got emb-dim={emb_dim}, heads={heads})")
    measured_sizes = sizes(max_tokens)
    check_cost(max_tokens, measured_sizes, heads, emb_dim, BLOCK)
    limit = min(naive_limit, available_bytes() // 2)
    head_dim = emb_dim // heads
    measure(MIN_TOKENS, heads, head_dim, seed,  # warm-up: first calls are slow
            _naive_need(MIN_TOKENS, heads, []) <= limit)
    rows: list[CostRow] = []
    diff = 0.0
    for num_tokens in measured_sizes:
        measured = [(r.tokens, float(r.naive_bytes)) for r in rows if r.naive_bytes]
        need = _naive_need(num_tokens, heads, measured)
        fits = need <= limit
        row, row_diff = measure(num_tokens, heads, head_dim, seed, fits)
        rows.append(row if fits else CostRow(row.tokens, None, None, row.tiled_seconds,
                                             row.tiled_bytes, need))
        diff = max(diff, row_diff)
    return CostResult({"max_tokens": max_tokens, "heads": heads, "emb_dim": emb_dim,
                       "head_dim": head_dim, "block": BLOCK, "seed": seed},
                      rows, _fit(rows), _projection(rows), diff)


def _naive_need(num_tokens: int, heads: int, measured: list[tuple[int, float]]) -> int:
    """The naive path's bytes at num_tokens: projected from the sizes measured, or before any
    its float32 (heads, N, N) stages."""
    projected = project(measured, num_tokens, 2.0)
    return NAIVE_STAGES * FLOAT_BYTES * heads * num_tokens**2 if projected is None else projected


def _series(rows: list[CostRow], key: str) -> list[tuple[int, float]]:
    return [(r.tokens, float(getattr(r, key))) for r in rows if getattr(r, key) is not None]


def _fit(rows: list[CostRow]) -> dict[str, Fit]:
    return {f"{path}_{what}_exponent": fit_growth(_series(rows, f"{path}_{what}"))
            for path in ("naive", "tiled") for what in ("bytes", "seconds")}


def _projection(rows: list[CostRow]) -> dict[str, dict[str, int | None]]:
    return {str(n): {"naive_bytes": project(_series(rows, "naive_bytes"), n, 2.0),
                     "tiled_bytes": project(_series(rows, "tiled_bytes"), n, 1.0)}
            for n in PROJECT_TO}
