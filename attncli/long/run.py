"""Long inputs on the tiled path: context, log-sum-exp, entropy and top-k without the N × N matrix.

With each row's log-sum-exp known, any weight is exact on its own, w_ij = e^(q_i·k_j/√d_k - lse_i),
so a window, one query's row, the summary shares and the pooled heatmaps are rebuilt in memory
proportional to what they show.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import Tensor

from attncli.core.attention import Attention
from attncli.core.convert import masked_lists
from attncli.core.display import resolve_query
from attncli.core.measures import head_means
from attncli.core.pieces import Summary
from attncli.core.pipeline import Prepared
from attncli.core.request import Extract, Pool, Request
from attncli.core.result import LongStats, PooledMap, QueryRow, Result, TokenInfo
from attncli.core.sizes import check_memory
from attncli.errors import AttnCliError
from attncli.long.norm import norm_window
from attncli.long.pooling import block_edges, block_size, maps_from_blocks, pooled_maps
from attncli.long.tiled import tiled_attention
from attncli.long.tiles import TiledOutput
from attncli.long.window import weights_band, weights_window

# (what, done, total): a long run's progress, called from worker threads too.
Progress = Callable[[str, int, int], None]

DEFAULT_WINDOW = 64  # the top-left corner a long run's JSON holds without --rows/--cols
BAND_CELLS = 2**22  # the most weights the page's moving window holds (about 40 MB of JSON)


@dataclass
class Tiled:
    """The tensors of one tiled pass, as the kernel saw them."""

    queries: Tensor  # (heads, N, head_dim) unscaled: the kernel divides by √head_dim
    keys: Tensor  # (heads, N, head_dim)
    causal: bool
    out: TiledOutput
    context: Tensor  # (N, d_out) the module's output


@torch.no_grad()
def attend(module: Attention, causal: bool, x: Tensor, top_k: int,
           progress: Progress | None = None, pool_size: int = 0) -> Tiled:
    """One tiled pass of the variant over x (N, d_in), and its context vectors (N, d_out).

    pool_size > 0 also max-pools the weights into blocks of that many tokens a side.
    """
    queries, keys, values = module.heads_qkv(x)  # each (heads, N, head_dim)
    report = None if progress is None else (lambda done, total: progress("attention", done, total))
    out = tiled_attention(queries, keys, values, causal=causal, top_k=top_k,
                          progress=report, pool_size=pool_size)
    if not (torch.isfinite(out.lse).all() and torch.isfinite(out.context).all()):
        raise AttnCliError("the numbers overflowed float32: the inputs are too large")
    context = module.combine(out.context)  # (N, d_out)
    return Tiled(queries, keys, causal, out, context)


def weights_on(t: Tiled, start: int, lag: int | None, chunk: int = 4096) -> Tensor:
    """(heads, N - start) the weight each row i ≥ start gives key i - lag (key 0 when lag is
    None), exact from the lse; chunk rows at a time, so the products stay a few megabytes."""
    num_tokens = t.queries.shape[1]
    scale = 1.0 / math.sqrt(t.queries.shape[-1])
    parts = []
    for s in range(start, num_tokens, chunk):
        e = min(s + chunk, num_tokens)
        q = t.queries[:, s:e] * scale  # (heads, R', head_dim)
        k = t.keys[:, :1] if lag is None else t.keys[:, s - lag:e - lag]  # (heads, R' or 1, hd)
        parts.append(((q * k).sum(-1) - t.out.lse[:, s:e]).exp())  # (heads, R')
    return torch.cat(parts, -1) if parts else t.out.lse[:, :0]  # (heads, N - start)


def summary(t: Tiled) -> list[Summary]:
    """Per head, the head measures as `attncli heads` defines them (row 0 left out unless N = 1),
    and top_k_mass, the weight of each row's top-k keys."""
    num_tokens = t.queries.shape[1]
    device = t.queries.device
    start = 1 if num_tokens > 1 else 0
    rows = torch.arange(start, num_tokens, device=device)  # (R,)
    shares = head_means(
        entropy=t.out.entropy[:, start:].double(),  # (heads, R)
        first=weights_on(t, start, None).double(),  # (heads, R)
        prev=(weights_on(t, start, 1) if num_tokens > 1
              else t.out.lse[:, :1] * 0).double(),  # (heads, R)
        own=weights_on(t, start, 0).double(),  # (heads, R)
        mean_key=t.out.mean_key[:, start:].double(),  # (heads, R)
        query_pos=rows.double())  # each mean (heads,)
    shares["top_k_mass"] = t.out.topk_weight[:, start:].sum(-1).double().mean(-1)  # (heads,)
    means = {name: value.tolist() for name, value in shares.items()}
    return [{"head": h, "entropy": means["entropy"][h], "first": means["first"][h],
             "prev": means["prev"][h], "self": means["self"][h],
             "top_k_mass": means["top_k_mass"][h], "distance": means["distance"][h]}
            for h in range(t.queries.shape[0])]


def window_ranges(extract: Extract, num_tokens: int, full: bool) -> tuple[range, range]:
    """The window's rows and columns: --full's whole matrix, --rows/--cols, or the corner."""
    if full:
        return range(num_tokens), range(num_tokens)
    if extract.rows is None and extract.cols is None:
        side = min(num_tokens, DEFAULT_WINDOW)
        return range(side), range(side)
    rows = extract.rows.resolve(num_tokens) if extract.rows is not None else (0, num_tokens)
    cols = extract.cols.resolve(num_tokens) if extract.cols is not None else (0, num_tokens)
    return range(*rows), range(*cols)


def check_window(rows: range, cols: range, heads: int, full: bool) -> None:
    """Refuse a window (or --full's whole matrix) whose JSON would not fit in memory now."""
    if full:
        check_memory(heads * len(rows) * len(cols), f"--full: {heads} head(s) × "
                     f"{len(rows):,} × {len(cols):,} tokens", "leave out --full, or pick a "
                     "window with --rows a:b --cols c:d")
    else:
        check_memory(heads * len(rows) * len(cols), f"the window --rows {rows.start}:"
                     f"{rows.stop} --cols {cols.start}:{cols.stop} of {heads} head(s)",
                     "pick a smaller window")


def window_weights(t: Tiled, rows: range, cols: range) -> list[Any]:
    """The window's weights (heads, R, C) as a float32 numpy array, NaN where masked."""
    weights = weights_window(t.queries, t.keys, t.out.lse, rows, cols, t.causal)  # (h, R, C)
    return masked_lists(weights, rows, cols, t.causal)


def query_row(t: Tiled, index: int, tokens: list[TokenInfo]) -> QueryRow:
    """One query's exact weights over every key, per head (None for future keys)."""
    rows, cols = range(index, index + 1), range(t.queries.shape[1])
    weights = weights_window(t.queries, t.keys, t.out.lse, rows, cols, t.causal)  # (h, 1, N)
    data = masked_lists(weights, rows, cols, t.causal)
    return QueryRow(index, tokens[index].text, data[:, 0])


def norm_view(t: Tiled, prep: Prepared, rows: range, cols: range, index: int | None,
              tokens: list[TokenInfo]) -> tuple[Any, Any, QueryRow | None]:
    """--measure norm: the window's raw lengths and renormalised rows (float32 numpy, NaN where
    masked), and the query's renormalised row over every key."""
    raw, shown = norm_window(prep.module, prep.x, t.queries, t.keys, t.out.lse, rows, cols,
                             t.causal)  # each (heads, R, C)
    query = None
    if index is not None:
        one, every = range(index, index + 1), range(t.queries.shape[1])
        _, row = norm_window(prep.module, prep.x, t.queries, t.keys, t.out.lse, one, every,
                             t.causal)  # (heads, 1, N)
        query = QueryRow(index, tokens[index].text, masked_lists(row, one, every, t.causal)[:, 0])
    return (masked_lists(raw, rows, cols, t.causal), masked_lists(shown, rows, cols, t.causal),
            query)


def rollout_picks(extract: Extract, labels: list[str]) -> list[int]:
    """The rows a tiled rollout computes: the window's rows, and --query's row."""
    if extract.rows is None and (extract.query is None or extract.cols is not None):
        raise AttnCliError("--measure rollout on the tiled path computes only the rows asked "
                           "for: give --rows a:b (or --query)")
    rows, _ = window_ranges(extract, len(labels), False)
    picked = list(rows)
    if extract.query is not None:
        index = resolve_query(extract.query, labels)
        picked += [] if index in rows else [index]
    return picked


def with_rollout(result: Result, rolled: Tensor, picked: list[int]) -> Result:
    """The tiled result with rollout rows (R, b) of Ã_L ··· Ã_0 as its window (1, R, C) and
    its query's row: one matrix, heads averaged, NaN after each query."""
    assert result.window is not None, "a tiled run holds its window"
    num_tokens = len(result.tokens)
    rows, cols = range(*result.window["rows"]), range(*result.window["cols"])
    at = {row: k for k, row in enumerate(picked)}
    whole = rolled.new_zeros(len(picked), num_tokens)  # (R', N) keys after b get nothing
    whole[:, :rolled.shape[1]] = rolled
    window = whole[[at[i] for i in rows]][:, cols.start:cols.stop]  # (R, C)
    query = result.query
    if query is not None:
        one = range(query.index, query.index + 1)
        row = whole[at[query.index]][None, None]  # (1, 1, N)
        query = replace(query, weights=masked_lists(row, one, range(num_tokens), True)[:, 0])
    return replace(result, weights=masked_lists(window[None], rows, cols, True), query=query)


def band(t: Tiled, shown: list[int]) -> Any:
    """The heads' weights near the diagonal for the page's moving window (a float32 numpy
    array, see weights_band) to 4 significant digits, as the page shows them (a third of the
    text); None when it would hold more than BAND_CELLS."""
    span = DEFAULT_WINDOW if t.causal else 2 * DEFAULT_WINDOW - 1
    if len(shown) * t.queries.shape[1] * span > BAND_CELLS:
        return None
    heads = torch.tensor(shown, device=t.queries.device)
    values = weights_band(t.queries[heads], t.keys[heads], t.out.lse[heads], DEFAULT_WINDOW,
                          t.causal)  # (heads, N, span)
    digits = 10.0 ** (3 - values.abs().clamp(min=1e-38).log10().floor())  # (heads, N, span)
    return ((values * digits).round() / digits).numpy()


def stats(out: TiledOutput) -> dict[str, Any]:
    """The per-row stats of every head as numpy arrays."""
    return {"lse": out.lse.cpu().numpy(), "entropy": out.entropy.cpu().numpy(),
            "top_k": {"index": out.topk_index.cpu().numpy(),
                      "weight": out.topk_weight.cpu().numpy()}}


def maps(t: Tiled, shown: list[int], pool: str, grid: int,
         progress: Progress | None) -> list[PooledMap]:
    """Pooled heatmaps of the heads shown, each rebuilt from the lse by chunks of rows."""
    num_tokens = t.queries.shape[1]
    if t.out.pooled is not None:  # max-pooled by the tiled pass itself
        return maps_from_blocks(t.out.pooled, shown, block_edges(num_tokens, grid), t.causal)
    done, total = 0, len(shown) * num_tokens

    def report(rows: int) -> None:  # called by one worker at a time
        nonlocal done
        done += rows
        if progress is not None:
            progress("pooling", done, total)

    def weights_of(h: int, rows: range, cols: range) -> Tensor:
        return weights_window(t.queries[h:h + 1], t.keys[h:h + 1], t.out.lse[h:h + 1], rows,
                              cols, t.causal)[0]  # (R, C)

    return pooled_maps(weights_of, shown, num_tokens, t.causal, pool, grid, report,
                       on_cpu=t.queries.device.type == "cpu")


def refuse_stages(extract: Extract, num_tokens: int, heads: int) -> None:
    """The tiled path keeps no N × N stage: refuse --show before any work."""
    if extract.stages:
        raise AttnCliError(f"--show picks stages of the naive path, but {num_tokens:,} tokens "
                           f"× {heads} head(s) took the tiled path, which keeps none of them; "
                           "use --impl naive to see them")


def one_head(result: Result, head: int | None) -> Result:
    """With --head, the result holds that head alone (its weights, stats and summary)."""
    if head is None or result.long is None:
        return result
    long, query, one = result.long, result.query, slice(head, head + 1)
    picked = {"lse": long.stats["lse"][one], "entropy": long.stats["entropy"][one],
              "top_k": {name: rows[one] for name, rows in long.stats["top_k"].items()}}
    return replace(result, weights=result.weights[one],
                   norm=None if result.norm is None else result.norm[one],
                   long=replace(long, stats=picked, summary=long.summary[one]),
                   query=None if query is None else replace(query, weights=query.weights[one]))


def run_long(req: Request, prep: Prepared, extract: Extract,
             progress: Progress | None = None) -> Result:
    """The tiled path of `run`: the one place its tensors become plain data."""
    tokens, traits = prep.tokens, req.traits
    refuse_stages(extract, len(tokens), prep.heads)
    index = None if extract.query is None else resolve_query(extract.query,
                                                             [t.text for t in tokens])
    rows, cols = window_ranges(extract, len(tokens), req.full)
    check_window(rows, cols, 1 if extract.head is not None else prep.heads, req.full)
    # Max pooling happens inside the tiled pass; mean pooling rebuilds the weights afterwards.
    pool_size = (block_size(block_edges(len(tokens), extract.grid))
                 if extract.maps and req.pooling is Pool.max else 0)
    t = attend(prep.module, traits.causal, prep.x, req.keys_kept, progress, pool_size)
    shown = list(range(prep.heads)) if extract.head is None else [extract.head]
    with torch.no_grad():
        long = LongStats(stats=stats(t.out), summary=summary(t),
                         maps=maps(t, shown, req.pooling.value, extract.grid, progress)
                         if extract.maps else [], band=band(t, shown) if extract.page else None)
        weights = window_weights(t, rows, cols)
        query = None if index is None else query_row(t, index, tokens)
        norm = None
        if prep.config.measure == "norm":
            norm, weights, query = norm_view(t, prep, rows, cols, index, tokens)
    context = t.context
    del t  # queries, keys and each head's context go before the context becomes lists
    result = Result(variant=req.kind.value, config=prep.config, tokens=tokens, weights=weights,
                    context=context.cpu().numpy(), query=query, long=long, norm=norm,
                    window={"rows": [rows.start, rows.stop], "cols": [cols.start, cols.stop]})
    return one_head(result, extract.head)
