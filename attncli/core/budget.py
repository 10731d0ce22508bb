"""Sizes before allocation: what the naive path would hold, the memory free now, and the choice
of path (--impl auto) that follows from them."""

from __future__ import annotations

from enum import Enum

from attncli.core.sizes import available_bytes, size_text
from attncli.errors import AttnCliError

__all__ = ["Impl", "available_bytes", "choose_impl", "naive_bytes", "size_text"]


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
    need, free = cells * JSON_CELL_BYTES, available_bytes()
    if need > free:
        raise AttnCliError(f"{what} needs about {size_text(need)} as JSON ({cells:,} weights), "
                           f"more than the {size_text(free)} of memory available now; {hint}")
