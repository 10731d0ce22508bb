"""The online softmax of the tiled ("flash") path, one key block at a time, for one query.

Each block's scores move the running maximum m; what was summed so far is rescaled by
exp(m_old - m_new), so the softmax never needs the whole row, let alone the N × N matrix.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from attncli.core.request import Request
from attncli.errors import AttnCliError
from attncli.lessons.budget import check_flash
from attncli.lessons.setup import (
    Lesson,
    build,
    finish_context,
    heads_qkv,
    lesson_config,
    max_abs,
    source_of,
    within,
)
from attncli.long.tiled import tiled_attention
from attncli.records.lessons import FlashResult, FlashStep


@dataclass
class _State:
    """The running online-softmax state of one query row, every head."""

    m: Tensor  # (heads,) largest score so far
    l: Tensor  # noqa: E741  (heads,) Σ exp(s - m)
    acc: Tensor  # (heads, head_dim) Σ exp(s - m)·v


def check_args(num_tokens: int, block: int, query: int | None, head: int, heads: int) -> int:
    """The query index (default the last; negative counts from the end), after checks."""
    if block < 1:
        raise AttnCliError(f"--block must be a positive integer (got {block})")
    if not 0 <= head < heads:
        raise AttnCliError(f"--head {head} is out of range (use 0..{heads - 1})")
    index = num_tokens - 1 if query is None else query
    if not -num_tokens <= index < num_tokens:
        raise AttnCliError(f"--query {query} is out of range for {num_tokens} tokens "
                           f"(use 0..{num_tokens - 1}, or negative from the end)")
    return index % num_tokens


def _fold(state: _State, scores: Tensor, values: Tensor) -> Tensor:
    """Fold one key block into the state; returns the rescale factor exp(m_old - m_new)."""
    new_max = torch.maximum(state.m, scores.amax(dim=-1))  # (heads,)
    # What was summed so far is relative to the old maximum: shrink it to the new one.
    scale = torch.exp(state.m - new_max)  # (heads,); exp(-inf) = 0 before the first block
    p = torch.exp(scores - new_max[:, None])  # (heads, bk); masked keys: exp(-inf) = 0
    state.l = scale * state.l + p.sum(dim=-1)  # (heads,)
    state.acc = scale[:, None] * state.acc + (p[:, None] @ values)[:, 0]  # (heads, head_dim)
    state.m = new_max
    return scale


def _steps(q: Tensor, keys: Tensor, values: Tensor, query: int, block: int, causal: bool,
           head: int) -> tuple[list[FlashStep], _State]:
    """Walk the key blocks for one query: q (heads, hd), keys and values (heads, N, hd)."""
    heads, num_tokens = keys.shape[:2]
    state = _State(q.new_full((heads,), -math.inf), q.new_zeros(heads), q.new_zeros(heads,
                                                                                   values.shape[-1]))
    steps = []
    for a in range(0, num_tokens, block):
        b = min(a + block, num_tokens)
        if causal and a > query:  # every key of the block is in the query's future
            steps.append(FlashStep((a, b), None, None, float(state.m[head]), None,
                                   float(state.l[head]), state.acc[head].tolist()))
            continue
        scores = (keys[:, a:b] @ q[:, :, None])[..., 0]  # (heads, bk) scaled: q is pre-scaled
        if causal:
            # Keys after the query get -inf: exp gives them weight 0.
            future = torch.arange(a, b) > query  # (bk,)
            scores = scores.masked_fill(future, -math.inf)  # (heads, bk)
        block_max = scores[head].max()
        scale = _fold(state, scores, values[:, a:b])
        shown = [None if math.isinf(s) else s for s in scores[head].tolist()]
        steps.append(FlashStep((a, b), shown, float(block_max), float(state.m[head]),
                               float(scale[head]), float(state.l[head]),
                               state.acc[head].tolist()))
    return steps, state


@torch.no_grad()
def flash(lesson: Lesson, config: dict[str, Any], block: int, query: int | None = None,
          head: int = 0) -> FlashResult:
    """The online softmax of one query, block by block, checked against the naive full pass."""
    num_tokens = lesson.x.shape[0]
    index = check_args(num_tokens, block, query, head, lesson.heads)
    block = min(block, num_tokens)  # a larger block holds the same keys: all of them
    check_flash(num_tokens, lesson.heads, block, source_of(config))
    causal = lesson.causal
    queries, keys, values = heads_qkv(lesson, lesson.x)  # each (heads, N, head_dim)
    q = queries[:, index] * lesson.scale  # (heads, head_dim)
    steps, state = _steps(q, keys, values, index, block, causal, head)
    # The weights, rebuilt from the final m and l: w_j = exp(s_j - m) / l.
    scores = (keys @ q[:, :, None])[..., 0]  # (heads, N)
    if causal:
        scores = scores.masked_fill(torch.arange(num_tokens) > index, -math.inf)  # (heads, N)
    weights = torch.exp(scores - state.m[:, None]) / state.l[:, None]  # (heads, N)
    heads_context = (state.acc / state.l[:, None]).reshape(1, -1)  # (1, d_out) heads side by side
    context = finish_context(lesson, heads_context)[0]  # (d_out,)
    naive = lesson.module(lesson.x)  # the ordinary full pass: weights (heads, N, N)
    tiled = tiled_attention(queries * (lesson.scale * math.sqrt(queries.shape[-1])), keys, values,
                            causal, top_k=0, block_k=block)  # context (heads, N, head_dim)
    tiled_context = finish_context(lesson, tiled.context[:, index].reshape(1, -1))[0]  # (d_out,)
    heads, head_dim = lesson.heads, values.shape[-1]
    return FlashResult(
        config=config, tokens=lesson.tokens, block=block, query=index, head=head, steps=steps,
        weights=weights[head].tolist(), context=context.tolist(),
        weights_max_abs_diff=max_abs(weights, naive.weights[:, index]),
        context_max_abs_diff=max_abs(context, naive.context[index]),
        tiled_max_abs_diff=max_abs(tiled_context, context),
        naive_cells=heads * num_tokens * num_tokens, tiled_cells=heads * (block + head_dim + 2),
        ok=within(weights, naive.weights[:, index]) and within(context, naive.context[index]))


def flash_lesson(req: Request, block: int, query: int | None = None,
                 head: int = 0) -> FlashResult:
    """`attncli flash` on req's chapter-3 variant."""
    return flash(build(req), lesson_config(req), block, query, head)
