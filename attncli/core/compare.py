"""Several variants on the same tokens and embeddings, for `attncli compare`."""

from __future__ import annotations

from dataclasses import replace

from attncli.core.pipeline import Request, run_naive
from attncli.core.result import Result

HAS_DROPOUT = ("causal", "multihead")


def variant_request(base: Request, variant: str) -> Request:
    """base for one variant: --heads only for multihead, --dropout only where there is dropout,
    --d-out only where there are projections (simple has none)."""
    return replace(base, variant=variant,
                   heads=base.heads if variant == "multihead" else None,
                   dropout=base.dropout if variant in HAS_DROPOUT else 0.0,
                   d_out=None if variant == "simple" else base.d_out)


def run_compare(base: Request, variants: list[str]) -> list[Result]:
    """One result per variant; the same seed gives every variant the same embeddings."""
    return [run_naive(variant_request(base, variant)) for variant in variants]
