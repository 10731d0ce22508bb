"""compare: one request per variant, adapted to what each variant has, on the same embeddings."""

from __future__ import annotations

import pytest

from attncli.core.compare import Shared, run_compare, variant_request
from attncli.core.request import Extract, Request
from attncli.long.path import run
from tests.conftest import SENTENCE


def test_requests_keep_only_what_each_variant_takes() -> None:
    base, shared = Request(text=SENTENCE, seed=7), Shared(d_out=4, heads=2, dropout=0.1)
    simple, qkv, causal, multi = (variant_request(base, v, shared)
                                  for v in ("simple", "qkv", "causal", "multihead"))
    assert (simple.d_out, simple.heads, simple.dropout) == (None, None, 0.0)
    assert (qkv.d_out, qkv.heads, qkv.dropout) == (4, None, 0.0)
    assert (causal.d_out, causal.heads, causal.dropout) == (4, None, 0.1)
    assert (multi.d_out, multi.heads, multi.dropout) == (4, 2, 0.1)
    assert {r.seed for r in (simple, qkv, causal, multi)} == {7}


@pytest.mark.parametrize("variant", ["simple", "qkv", "causal", "multihead"])
def test_each_result_equals_its_own_run(variant: str) -> None:
    base, shared = Request(text=SENTENCE), Shared(d_out=4, heads=2)
    results = run_compare(base, ["simple", variant], shared)  # type: ignore[list-item]
    alone = run(variant_request(base, variant, shared), Extract(stages=("inputs",)))
    simple = run(variant_request(base, "simple", shared), Extract(stages=("inputs",)))
    assert simple.stages["inputs"] == alone.stages["inputs"]  # the same embeddings
    assert {k: v for k, v in alone.to_dict().items() if k != "stages"} == results[1].to_dict()
