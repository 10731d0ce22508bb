"""Which path a run takes: naive while its N × N stages fit the budget, else tiled."""

from __future__ import annotations

from typing import TYPE_CHECKING

from attncli.core.pipeline import Prepared, check_measure, naive, prepare
from attncli.core.request import Extract, Request
from attncli.core.result import Result
from attncli.core.sizes import NAIVE_BUDGET, Impl, naive_bytes
from attncli.errors import AttnCliError
from attncli.machine import size_text

if TYPE_CHECKING:
    from attncli.long.run import Progress


def refuse_dropout(req: Request, prep: Prepared) -> None:
    """The tiled path has no dropout: say how to get it, and what it costs."""
    why = "--impl tiled" if req.impl is Impl.tiled else (
        f"--impl auto takes it beyond {NAIVE_BUDGET // 2**20} MiB")
    cost = size_text(naive_bytes(len(prep.tokens), prep.heads))
    raise AttnCliError(
        f"--dropout {req.dropout} is not supported on the tiled path ({why}); use --impl naive "
        f"to apply it (about {cost} for {len(prep.tokens):,} tokens × {prep.heads} head(s)), "
        "or leave out --dropout")


def run(req: Request, extract: Extract | None = None, progress: Progress | None = None,
        budget_bytes: int = NAIVE_BUDGET) -> Result:
    """Run one chapter-3 variant on the request's text or vectors, naive or tiled (--impl)."""
    extract = extract or Extract()
    prep = prepare(req, extract.head, budget_bytes)
    check_measure(req, extract, len(prep.tokens), prep.heads, prep.impl)
    if prep.impl is Impl.naive:
        return naive(prep, extract)
    if req.dropout > 0:
        refuse_dropout(req, prep)
    from attncli.long.run import run_long  # the tiled machinery, only when it is taken

    return run_long(req, prep, extract, progress)
