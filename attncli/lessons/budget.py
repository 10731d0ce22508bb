"""What a lesson may take, estimated before its work starts: weights listed, bytes and work.

A lesson lists its attention weights as plain numbers (the table, the JSON): past LESSON_CELLS of
them, or a size that would not fit in memory, or work that would take minutes, it ends at once in
one line naming the option or text and the size; `attncli run` is the command for long inputs.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from attncli.core.sizes import NAIVE_CELL_BYTES, NAIVE_STAGES
from attncli.errors import AttnCliError
from attncli.machine import available_bytes, check_fits, size_text

LESSON_CELLS = 2**22  # attention weights a lesson lists (4,194,304: seconds, ~100 MB of JSON)
# A listed weight: a Python float in a list (32 bytes) and its JSON text, with room to spare.
LISTED_CELL_BYTES = 64
FLOAT64_STAGES = 6  # permute's float64 (heads, T, T) stages of one pass, inputs and outputs
LESSON_MACS = 10**11  # multiply-adds a lesson computes: tens of seconds on one CPU core
# kvcache --keep's whole passes, one per cache policy: batched matrix products run far faster per
# multiply-add than a token-by-token decode (SmolLM2: 330 tokens in about 1.5 s a pass here).
STREAMING_MACS = 10**12
STREAMING_CHUNK_ROWS = 512  # positions unembedded at once: (512, vocab) float32 logits
COST_MACS = 2**38  # cost's multiply-adds over every size (about a minute on a loaded CPU)
FLOAT_BYTES = 4
SHORTER = "use a shorter text, or `attncli run` for long inputs"


def _refuse_cells(cells: int, what: str, most_tokens: int, verb: str = "lists") -> None:
    if cells > LESSON_CELLS:
        raise AttnCliError(f"{what} {verb} {cells:,} attention weights, more than the "
                           f"{LESSON_CELLS:,} a lesson shows; {SHORTER} "
                           f"(at most {most_tokens:,} tokens here)")


def _most_tokens(cells_of: Callable[[int], int]) -> int:
    """The most tokens T whose cells_of(T) (growing with T², at least T²/2) stays within
    LESSON_CELLS."""
    tokens = math.isqrt(2 * LESSON_CELLS)
    while tokens > 1 and cells_of(tokens) > LESSON_CELLS:
        tokens -= 1
    return tokens


def _causal_cells(heads: int) -> Callable[[int], int]:
    """Weights of a causal decode, one step per token: heads × T(T+1)/2."""
    return lambda tokens: heads * tokens * (tokens + 1) // 2


def check_permute(num_tokens: int, heads: int, d_in: int, d_out: int, multihead: bool,
                  option: str) -> None:
    """permute lists 2 cases × 2 texts × (heads, T, T) weights, made by float64 passes of a
    float64 copy of the module (option names what set its width: "--d-out 9", "--emb-dim 9")."""
    what = f"permute on two texts of {num_tokens:,} tokens × {heads} head(s)"
    cells = 4 * heads * num_tokens * num_tokens
    _refuse_cells(cells, what, _most_tokens(lambda t: 4 * heads * t * t))
    passes = 2 * FLOAT64_STAGES * 8 * heads * num_tokens * num_tokens  # A and B at once
    check_fits(cells * LISTED_CELL_BYTES + passes, f"{what} needs its weights", SHORTER)
    # W_query, W_key, W_value and out_proj in float64, and A's and B's (T, d_out) stages.
    out_proj = d_out * d_out if multihead else 0
    module = 8 * (3 * d_in * d_out + out_proj + 2 * 6 * num_tokens * d_out)
    check_fits(module, f"{option} needs permute's float64 weights and stages")


def check_kvcache(num_tokens: int, heads: int, d_out: int, option: str) -> None:
    """kvcache lists heads × T(T+1)/2 step weights and runs the full (heads, T, T) pass."""
    what = f"kvcache on {option} ({num_tokens:,} tokens × {heads} head(s))"
    cells = _causal_cells(heads)(num_tokens)
    _refuse_cells(cells, what, _most_tokens(_causal_cells(heads)))
    # The full pass's stages, the steps' tensors and their lists, the caches' copies.
    full = NAIVE_CELL_BYTES * heads * num_tokens * num_tokens
    steps = cells * (FLOAT_BYTES + LISTED_CELL_BYTES) + num_tokens * d_out * LISTED_CELL_BYTES
    check_fits(full + steps, f"{what} needs its weights", SHORTER)


def check_flash(num_tokens: int, heads: int, block: int, option: str) -> None:
    """flash checks itself against the naive full pass: heads × T × T cells of every stage."""
    what = f"flash on {option} ({num_tokens:,} tokens × {heads} head(s))"
    cells = heads * num_tokens * num_tokens
    _refuse_cells(cells, what, _most_tokens(lambda t: heads * t * t),
                  "is checked against a naive pass of")
    steps = -(-num_tokens // block)  # each lists its scores, at most the text's, and acc
    check_fits(NAIVE_CELL_BYTES * cells + steps * (min(block, num_tokens) + 64) * LISTED_CELL_BYTES,
               f"{what} needs the naive pass it is checked against", SHORTER)


def check_model_kvcache(num_tokens: int, heads: int, layers: int, token_macs: int,
                        prefill_macs: int, cache_bytes: int, model: str) -> None:
    """kvcache --model: the shown layer's weights listed, one layer's weights held (tokens are
    decoded layer by layer), the work of decoding every token through every layer (about as
    much again for the full pass it is checked by)."""
    what = f"kvcache --model {model} on {num_tokens:,} tokens"
    cells = _causal_cells(heads)(num_tokens)
    _refuse_cells(cells, f"{what} × {heads} head(s)", _most_tokens(_causal_cells(heads)))
    work = 2 * prefill_macs
    if work > LESSON_MACS:
        per_token = max(work // num_tokens, 1)
        raise AttnCliError(f"{what} needs about {work:.1e} multiply-adds ({layers} layers, "
                           f"decoded and checked by a full pass), more than the "
                           f"{LESSON_MACS:.0e} a lesson computes; {SHORTER} "
                           f"(about {max(LESSON_MACS // per_token, 1):,} tokens here)")
    weights = token_macs * FLOAT_BYTES  # one layer's tensors, read once, dropped after it
    full = NAIVE_CELL_BYTES * heads * num_tokens * num_tokens
    check_fits(weights + full + cells * LISTED_CELL_BYTES + cache_bytes,
               f"{what} needs a layer's weights, the caches and the full pass", SHORTER)


def check_streaming(num_tokens: int, heads: int, passes: int, work_of: Callable[[int], int],
                    vocab: int, model: str) -> None:
    """kvcache --keep: passes whole masked passes of work_of(T) multiply-adds each (the
    unembedding of every position included), the (heads, T, T) stages of two blocks at once, and
    the logits of CHUNK rows (their logsumexp and argmax temporaries beside them)."""
    what = f"kvcache --keep on {model} ({num_tokens:,} tokens, {passes} passes)"
    work = passes * work_of(num_tokens)
    if work > STREAMING_MACS:
        most = _most_within(lambda t: passes * work_of(t), STREAMING_MACS, num_tokens)
        raise AttnCliError(f"{what} needs about {work:.1e} multiply-adds, more than the "
                           f"{STREAMING_MACS:.0e} this lesson computes; use a shorter text "
                           f"(at most {most:,} tokens here)")
    trace = 2 * NAIVE_STAGES * FLOAT_BYTES * heads * num_tokens * num_tokens
    masks = 2 * num_tokens * num_tokens  # the visible mask and its complement, as bools
    logits = 3 * FLOAT_BYTES * min(passes * num_tokens, STREAMING_CHUNK_ROWS) * vocab
    check_fits(trace + masks + logits, f"{what} needs its attention stages and logits", SHORTER)


def _most_within(cost_of: Callable[[int], int], limit: int, above: int) -> int:
    """The most tokens T < above whose cost_of(T), growing with T, stays within limit (0: none)."""
    low, high = 0, above  # cost_of(high) > limit; cost_of(0) is taken to fit
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if cost_of(middle) <= limit else (low, middle)
    return low


def cost_macs(num_tokens: int, emb_dim: int) -> int:
    """Multiply-adds of cost at one size: the causal tiled pass twice (tracked, then timed),
    each half of Q·Kᵀ and half of weights·V, emb_dim · N² (the naive runs are bounded apart)."""
    return 2 * emb_dim * num_tokens * num_tokens


def cost_bytes(num_tokens: int, heads: int, emb_dim: int, block: int) -> int:
    """What cost holds at one size: queries, keys, values (heads, N, head_dim), the pass's
    copies and context, and the tiles' (heads, block, block) scores and temporaries."""
    return (8 * num_tokens * emb_dim + 6 * heads * block * block) * FLOAT_BYTES


def _count(n: int) -> str:
    return f"{n:.1e}" if n < 10**300 else f"10^{len(str(n)) - 1}"


def check_cost(max_tokens: int, sizes: list[int], heads: int, emb_dim: int, block: int) -> None:
    """Every size's inputs and tiles within half the memory available, and the work over all
    sizes within COST_MACS; else the option to change, the size, and what would run."""
    free = available_bytes()
    total, most, over = 0, None, ""
    for n in sizes:
        total += cost_macs(n, emb_dim)
        need = cost_bytes(n, heads, emb_dim, block)
        if total > COST_MACS:
            over = (f"about {_count(total)} multiply-adds up to {n:,} tokens, more than the "
                    f"{COST_MACS:.1e} cost runs (minutes of CPU)")
        elif need > free // 2:
            over = (f"{size_text(need)} at {n:,} tokens, more than half the {size_text(free)} "
                    "available")
        if over:
            break
        most = n
    if not over:
        return
    if most is not None:
        raise AttnCliError(f"--max-tokens {max_tokens} with --emb-dim {emb_dim} needs {over}; "
                           f"use --max-tokens {most} or less")
    tiles = 6 * heads * block * block > 8 * sizes[0] * emb_dim
    option = f"--num-heads {heads} ({heads:,} × {block} × {block} tiles)" if tiles else (
        f"--emb-dim {emb_dim}")
    raise AttnCliError(f"{option} needs {over}; use a smaller {option.split()[0]}")
