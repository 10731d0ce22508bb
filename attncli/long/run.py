"""Long inputs on the tiled path: context, log-sum-exp, entropy and top-k without the N × N matrix.

With each row's log-sum-exp known, any weight is exact on its own, w_ij = e^(q_i·k_j/√d_k - lse_i),
so a window, one query's row, the summary shares and the pooled heatmaps are rebuilt in memory
proportional to what they show.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor, nn

from attncli.core.display import LongView, check_head, resolve_query
from attncli.core.result import LongResult, PooledMap, TokenInfo
from attncli.errors import AttnCliError
from attncli.long.pooling import block_edges, block_size, maps_from_blocks, pooled_maps
from attncli.long.tiled import TiledOutput, tiled_attention, weights_window

if TYPE_CHECKING:
    from attncli.core.pipeline import Prepared, Request

# (what, done, total): a long run's progress, called from worker threads too.
Progress = Callable[[str, int, int], None]

CAUSAL = ("causal", "multihead")
DEFAULT_WINDOW = 64  # the top-left corner a long run's JSON holds without --rows/--cols
# A weight in the JSON: 4 bytes as float32, ~32 as a Python float in a list, ~20 as JSON text,
# with room to spare for the text's copies.
JSON_CELL_BYTES = 4 + 64


@dataclass
class Tiled:
    """The tensors of one tiled pass, as the kernel saw them."""

    queries: Tensor  # (heads, N, head_dim) unscaled: the kernel divides by √head_dim
    keys: Tensor  # (heads, N, head_dim)
    causal: bool
    out: TiledOutput  # its context holds one extra column: Σ_j w_ij·j
    context: Tensor  # (N, d_out) the module's output

    @property
    def mean_key(self) -> Tensor:
        """(heads, N) Σ_j w_ij·j, the attention-weighted mean key position of each row."""
        return self.out.context[..., -1]


def size_text(num_bytes: float) -> str:
    """A byte count for people: 512 MB, 9.1 GB."""
    return f"{num_bytes / 1e9:.1f} GB" if num_bytes >= 1e9 else f"{num_bytes / 1e6:.0f} MB"


def available_memory() -> int | None:
    """Bytes of memory available now: MemAvailable from /proc/meminfo, else free pages."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None


def check_memory(cells: int, what: str, hint: str) -> None:
    """Refuse to turn cells weights into JSON when they would not fit in memory now."""
    need, free = cells * JSON_CELL_BYTES, available_memory()
    if free is not None and need > free:
        raise AttnCliError(f"{what} needs about {size_text(need)} as JSON ({cells:,} weights), "
                           f"more than the {size_text(free)} of memory available now; {hint}")


def qkv_heads(module: nn.Module, variant: str, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Queries, keys and values (heads, N, head_dim) of x (N, d_in), as the kernel takes them."""
    if variant == "simple":
        # Simple attention is unscaled x·xᵀ: √d_in on the queries cancels the kernel's 1/√d_k.
        return x[None] * math.sqrt(x.shape[1]), x[None], x[None]  # (1, N, d_in) each
    queries, keys, values = module.project(x)  # each (N, d_out)
    if variant == "multihead":
        return tuple(module.split_heads(t) for t in (queries, keys, values))  # type: ignore[return-value]
    return queries[None], keys[None], values[None]  # (1, N, d_out) each


@torch.no_grad()
def attend(module: nn.Module, variant: str, x: Tensor, top_k: int,
           progress: Progress | None = None, pool_size: int = 0) -> Tiled:
    """One tiled pass of the variant over x (N, d_in), and its context vectors (N, d_out).

    pool_size > 0 also max-pools the weights into blocks of that many tokens a side.
    """
    queries, keys, values = qkv_heads(module, variant, x)
    heads, num_tokens, _ = values.shape
    # A last value column holding each key's position j makes the pass also return Σ_j w_ij·j.
    positions = torch.arange(num_tokens, dtype=values.dtype, device=values.device)  # (N,)
    with_pos = torch.cat([values, positions.expand(heads, num_tokens)[..., None]], -1)
    report = None if progress is None else (lambda done, total: progress("attention", done, total))
    out = tiled_attention(queries, keys, with_pos, causal=variant in CAUSAL, top_k=top_k,
                          progress=report, pool_size=pool_size)
    heads_context = out.context[..., :-1]  # (heads, N, head_dim)
    if not (torch.isfinite(out.lse).all() and torch.isfinite(heads_context).all()):
        raise AttnCliError("the numbers overflowed float32: the inputs are too large")
    if variant == "multihead":
        # Heads side by side again, (N, d_out), then the output projection.
        context = module.out_proj(heads_context.transpose(0, 1).reshape(num_tokens, -1))
    else:
        context = heads_context[0]  # (N, d_out)
    return Tiled(queries, keys, variant in CAUSAL, out, context)


def weight_at(t: Tiled, rows: Tensor, cols: Tensor, chunk: int = 2048) -> Tensor:
    """(heads, R) the weights w[rows[r], cols[r]] for each r, exact from the lse.

    chunk rows at a time, so the gathered queries and keys stay a few megabytes.
    """
    parts = []
    for s in range(0, len(rows), chunk):
        r, c = rows[s:s + chunk], cols[s:s + chunk]  # (R',) each
        q = t.queries[:, r] * (1.0 / math.sqrt(t.queries.shape[-1]))  # (heads, R', head_dim)
        scores = (q * t.keys[:, c]).sum(-1)  # (heads, R')
        parts.append((scores - t.out.lse[:, r]).exp())  # (heads, R')
    return torch.cat(parts, -1) if parts else t.out.lse[:, :0]  # (heads, R)


def summary(t: Tiled) -> list[dict[str, Any]]:
    """Per head, means over query rows 1..N-1 as `attncli heads` takes them (row 0 when N = 1).

    first, prev and self are the weights on key 0, i-1 and i; top_k_mass the weight of each row's
    top-k keys; mean_distance the tokens back, i - Σ_j w_ij·j (negative: ahead, without a mask).
    """
    num_tokens = t.queries.shape[1]
    device = t.queries.device
    rows = torch.arange(1 if num_tokens > 1 else 0, num_tokens, device=device)  # (R,)
    shares = {
        "mean_entropy": t.out.entropy[:, rows],
        "first": weight_at(t, rows, torch.zeros_like(rows)),
        "prev": weight_at(t, rows, rows - 1) if num_tokens > 1 else t.out.lse[:, :1] * 0,
        "self": weight_at(t, rows, rows),
        "top_k_mass": t.out.topk_weight[:, rows].sum(-1),
        "mean_distance": rows - t.mean_key[:, rows],
    }
    means = {name: value.double().mean(-1).tolist() for name, value in shares.items()}
    return [{"head": h, **{name: means[name][h] for name in shares}}
            for h in range(t.queries.shape[0])]


def masked_lists(weights: Tensor, rows: range, cols: range, causal: bool) -> Any:
    """weights (heads, R, C) as a float32 numpy array, NaN where a causal key follows its query."""
    data = weights.cpu().numpy()  # (heads, R, C)
    if causal:
        row_pos = torch.arange(rows.start, rows.stop)[:, None]  # (R, 1)
        data[:, (torch.arange(cols.start, cols.stop)[None, :] > row_pos).numpy()] = math.nan
    return data


def window_ranges(view: LongView, num_tokens: int, full: bool) -> tuple[range, range]:
    """The window's rows and columns: --full's whole matrix, --rows/--cols, or the corner."""
    if full:
        return range(num_tokens), range(num_tokens)
    if view.rows is None and view.cols is None:
        side = min(num_tokens, DEFAULT_WINDOW)
        return range(side), range(side)
    rows = view.rows.resolve(num_tokens) if view.rows is not None else (0, num_tokens)
    cols = view.cols.resolve(num_tokens) if view.cols is not None else (0, num_tokens)
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


def query_row(t: Tiled, index: int, tokens: list[TokenInfo]) -> dict[str, Any]:
    """One query's exact weights over every key, per head (None for future keys)."""
    rows, cols = range(index, index + 1), range(t.queries.shape[1])
    weights = weights_window(t.queries, t.keys, t.out.lse, rows, cols, t.causal)  # (h, 1, N)
    data = masked_lists(weights, rows, cols, t.causal)
    return {"index": index, "token": tokens[index].text, "weights": data[:, 0]}


def stats(out: TiledOutput) -> dict[str, Any]:
    """The per-row stats of every head as numpy arrays."""
    return {"lse": out.lse.cpu().numpy(), "entropy": out.entropy.cpu().numpy(),
            "top_k": {"index": out.topk_index.cpu().numpy(),
                      "weight": out.topk_weight.cpu().numpy()}}


def maps(t: Tiled, view: LongView, pool: str, progress: Progress | None) -> list[PooledMap]:
    """Pooled heatmaps of the heads shown, each rebuilt from the lse by chunks of rows."""
    heads, num_tokens = t.queries.shape[:2]
    shown = list(range(heads)) if view.head is None else [view.head]
    if t.out.pooled is not None:  # max-pooled by the tiled pass itself
        return maps_from_blocks(t.out.pooled, shown, block_edges(num_tokens, view.grid), t.causal)
    done, total = 0, len(shown) * num_tokens

    def report(rows: int) -> None:  # called by one worker at a time
        nonlocal done
        done += rows
        if progress is not None:
            progress("pooling", done, total)

    def weights_of(h: int, rows: range, cols: range) -> Tensor:
        return weights_window(t.queries[h:h + 1], t.keys[h:h + 1], t.out.lse[h:h + 1], rows,
                              cols, t.causal)[0]  # (R, C)

    return pooled_maps(weights_of, shown, num_tokens, t.causal, pool, view.grid, report,
                       on_cpu=t.queries.device.type == "cpu")


def check_long(view: LongView, num_tokens: int, heads: int) -> None:
    """Refuse what the tiled path cannot show, before any work."""
    if view.stages:
        raise AttnCliError(f"--show picks stages of the naive path, but {num_tokens:,} tokens "
                           f"× {heads} head(s) took the tiled path, which keeps none of them; "
                           "use --impl naive to see them")
    check_head(view.head, heads)


def run_long(req: Request, prep: Prepared, view: LongView,
             progress: Progress | None = None) -> LongResult:
    """The tiled path of `run`: the one place its tensors become plain data."""
    tokens = prep.tokens
    check_long(view, len(tokens), prep.heads)
    index = None if view.query is None else resolve_query(view.query, [t.text for t in tokens])
    rows, cols = window_ranges(view, len(tokens), req.full)
    check_window(rows, cols, prep.heads, req.full)
    # Max pooling happens inside the tiled pass; mean pooling rebuilds the weights afterwards.
    pool_size = (block_size(block_edges(len(tokens), view.grid))
                 if view.maps and req.pool == "max" else 0)
    t = attend(prep.module, req.variant, prep.x, req.top_k, progress, pool_size)
    with torch.no_grad():
        shown: dict[str, Any] = {
            "maps": maps(t, view, req.pool, progress) if view.maps else [],
            "stats": stats(t.out), "summary": summary(t), "weights": window_weights(t, rows, cols),
            "query": None if index is None else query_row(t, index, tokens)}
    context = t.context
    del t  # queries, keys and each head's context go before the context becomes lists
    return LongResult(variant=req.variant, config=prep.config, tokens=tokens,
                      context=context.cpu().numpy(),
                      window={"rows": [rows.start, rows.stop], "cols": [cols.start, cols.stop]},
                      **shown)
