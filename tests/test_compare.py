"""compare: one request per variant, adapted to what each variant has, on the same embeddings."""

from __future__ import annotations

import pytest

from attncli.core.compare import run_compare, variant_request
from attncli.core.pipeline import Request, run
from tests.conftest import SENTENCE


def test_requests_keep_only_what_each_variant_takes() -> None:
    base = Request(text=SENTENCE, d_out=4, heads=2, dropout=0.1, seed=7)
    simple, qkv, causal, multi = (variant_request(base, v)
                                  for v in ("simple", "qkv", "causal", "multihead"))
    assert (simple.d_out, simple.heads, simple.dropout) == (None, None, 0.0)
    assert (qkv.d_out, qkv.heads, qkv.dropout) == (4, None, 0.0)
    assert (causal.d_out, causal.heads, causal.dropout) == (4, None, 0.1)
    assert (multi.d_out, multi.heads, multi.dropout) == (4, 2, 0.1)
    assert {r.seed for r in (simple, qkv, causal, multi)} == {7}


@pytest.mark.parametrize("variant", ["simple", "qkv", "causal", "multihead"])
def test_each_result_equals_its_own_run(variant: str) -> None:
    base = Request(text=SENTENCE, d_out=4, heads=2)
    results = run_compare(base, ["simple", variant])
    assert results[0].stages["inputs"] == results[1].stages["inputs"]
    alone = run(variant_request(base, variant))
    assert results[1].to_dict() == alone.to_dict()
