"""Several variants on the same tokens and embeddings, for `attncli compare`."""

from __future__ import annotations

from dataclasses import dataclass, replace

from attncli.core.display import Window
from attncli.core.pipeline import run_naive
from attncli.core.request import Extract, Request
from attncli.core.result import Result
from attncli.core.variants import TRAITS, Variant


@dataclass(frozen=True)
class Shared:
    """The settings every compared variant gets, where it has them."""

    d_out: int | None = None  # variants with projections
    heads: int | None = None  # multihead
    dropout: float = 0.0  # causal, multihead


def variant_request(base: Request, variant: Variant, shared: Shared) -> Request:
    """base for one variant: --num-heads, --dropout and --d-out only where the variant has them."""
    traits = TRAITS[Variant(variant)]
    return replace(base, variant=Variant(variant),
                   heads=shared.heads if traits.multihead else None,
                   dropout=shared.dropout if traits.dropout else 0.0,
                   d_out=shared.d_out if traits.projections else None)


def run_compare(base: Request, variants: list[Variant], shared: Shared,
                rows: Window | None = None, cols: Window | None = None) -> list[Result]:
    """One result per variant; the same seed gives every variant the same embeddings."""
    extract = Extract(stages=(), rows=rows, cols=cols)
    return [run_naive(variant_request(base, variant, shared), extract) for variant in variants]
