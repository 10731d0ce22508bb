"""The pipeline's sizes estimated before they are allocated: what would not fit ends in one line
naming the option (machine.check_fits against the memory available now), so a request too large
fails with exit 2 instead of a MemoryError, or growing until the machine kills it."""

from __future__ import annotations

import math
from enum import Enum

import attncli.machine as machine
from attncli.errors import AttnCliError
from attncli.machine import check_fits, size_text

FLOAT_BYTES = 4  # float32
# One token as the pipeline keeps it: id, TokenPiece, label, TokenInfo and its JSON record
# (about 920 bytes measured on 280,001 tokens), with room to spare.
TOKEN_BYTES = 1024
# A cell of a (T, d) stage the naive path converts to a Python list: a float and its slot.
LIST_CELL_BYTES = 32
SEED_MIN, SEED_MAX = -(2**63), 2**64 - 1  # what torch.manual_seed accepts


def check_embedding(vocab_size: int, emb_dim: int, context_length: int) -> None:
    """The token table (vocab, emb_dim) and position table (context_length, emb_dim)."""
    token_table = vocab_size * emb_dim * FLOAT_BYTES
    pos_table = context_length * emb_dim * FLOAT_BYTES
    if pos_table > token_table:
        what = (f"--context-length {context_length} needs a {context_length:,} × {emb_dim:,} "
                "positional embedding table")
    else:
        what = f"--emb-dim {emb_dim} needs a {vocab_size:,} × {emb_dim:,} embedding table"
    check_fits(token_table + pos_table, what)


def check_module(d_in: int, d_out: int, num_tokens: int, multihead: bool, option: str) -> None:
    """W_query, W_key, W_value (d_in, d_out), out_proj (d_out, d_out), and the (T, d_out) stages.

    option names what set the sizes: "--d-out 9", "--emb-dim 9" or "--inputs vectors 9 wide".
    """
    weights = (3 * d_in * d_out + (d_out * d_out if multihead else 0)) * FLOAT_BYTES
    # queries, keys, values, context and heads_context as tensors, the tiled pass's [k | 1] and
    # [v | 1] copies; two of them also as lists.
    stages = num_tokens * d_out * (7 * FLOAT_BYTES + 2 * LIST_CELL_BYTES)
    matrices = f"three {d_in:,} × {d_out:,} weight matrices" + (
        f" and a {d_out:,} × {d_out:,} out_proj" if multihead else "")
    check_fits(weights + stages, f"{option} needs {matrices} and {num_tokens:,} × {d_out:,} "
               "stages")


def check_naive(num_bytes: int, num_tokens: int, heads: int) -> None:
    """--impl naive forced on an input whose (heads, N, N) stages would not fit."""
    check_fits(num_bytes, f"--impl naive on {num_tokens:,} tokens × {heads} head(s) needs "
               f"{heads} × {num_tokens:,} × {num_tokens:,} matrices for each stage",
               "use --impl auto (the tiled path) for long inputs")


def check_tokens(num_tokens: int) -> None:
    """The token records of a long text, before they are made."""
    check_fits(num_tokens * TOKEN_BYTES, f"the text's {num_tokens:,} tokens need their records",
               "split the text")


def check_seed(seed: int) -> None:
    """A seed torch can take."""
    if not SEED_MIN <= seed <= SEED_MAX:
        raise AttnCliError(f"--seed {seed} is out of range (use {SEED_MIN}..{SEED_MAX})")


def finite(value: int | float) -> bool:
    """True for a number float32 can hold: an integer of 400 digits is not one."""
    return abs(value) <= 3.4e38 if isinstance(value, int) else math.isfinite(value) and abs(
        value) <= 3.4e38


LAYER_BOUND = 1000  # layers; GPT-2 XL has 48
class Impl(str, Enum):
    """How attention is computed: every N × N stage, tiles without them, or auto."""

    naive = "naive"
    tiled = "tiled"
    auto = "auto"


NAIVE_BUDGET = 256 * 2**20  # bytes auto lets the naive path use
# The (heads, N, N) float32 tensors the naive path keeps: scores, scaled, masked, softmax, weights.
NAIVE_STAGES = 5
# The stages `run` converts to Python lists (weights, masked): a 24-byte float + an 8-byte slot.
PLAIN_STAGES, PLAIN_CELL_BYTES = 2, 32
NAIVE_CELL_BYTES = NAIVE_STAGES * 4 + PLAIN_STAGES * PLAIN_CELL_BYTES  # 84 per (head, query, key)
# A weight in the JSON: 4 bytes as float32, ~32 as a Python float in a list, ~20 as JSON text,
# with room to spare for the text's copies.
JSON_CELL_BYTES = 4 + 64


def naive_bytes(num_tokens: int, num_heads: int) -> int:
    """What the naive path of `run` holds: its float32 (heads, N, N) stages and their lists."""
    return NAIVE_CELL_BYTES * num_heads * num_tokens * num_tokens


def choose_impl(impl: Impl, num_tokens: int, num_heads: int,
                budget_bytes: int = NAIVE_BUDGET) -> Impl:
    """Resolve --impl: auto picks naive while naive_bytes fits the budget, tiled beyond it."""
    impl = Impl(impl)
    if impl is not Impl.auto:
        return impl
    return Impl.naive if naive_bytes(num_tokens, num_heads) <= budget_bytes else Impl.tiled


def check_memory(cells: int, what: str, hint: str) -> None:
    """Refuse to turn cells weights into JSON when they would not fit in memory now."""
    need, free = cells * JSON_CELL_BYTES, machine.available_bytes()
    if need > free:
        raise AttnCliError(f"{what} needs about {size_text(need)} as JSON ({cells:,} weights), "
                           f"more than the {size_text(free)} of memory available now; {hint}")
