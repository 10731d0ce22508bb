"""`attncli flash`: the online softmax block by block, against the full pass and SDPA."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from attncli.core.request import Request
from attncli.lessons.flash import flash
from attncli.lessons.setup import build, finish_context, heads_qkv, lesson_config
from tests.conftest import SENTENCE
from tests.tolerance import assert_near

STEP_KEYS = {"keys", "scores", "block_max", "m", "scale", "l", "acc"}


def test_json_keys_are_pinned(cli) -> None:  # noqa: ANN001
    doc = cli("flash", SENTENCE, "--block", "2", "--query", "2", "--json").json()
    assert set(doc) == {"kind", "block", "query", "steps", "weights", "context", "max_abs_diff",
                        "memory"}
    assert set(doc["memory"]) == {"naive_cells", "tiled_cells"}
    assert all(set(step) == STEP_KEYS for step in doc["steps"])
    assert (doc["block"], doc["query"]) == (2, 2)
    assert [s["keys"] for s in doc["steps"]] == [[0, 2], [2, 4], [4, 6]]
    skipped = doc["steps"][2]  # keys 4, 5 are after query 2
    assert skipped["scores"] is None and skipped["block_max"] is None and skipped["scale"] is None
    assert doc["steps"][1]["scores"][1] is None  # key 3 is masked inside the diagonal block
    assert doc["memory"] == {"naive_cells": 36, "tiled_cells": 2 + 8 + 2}
    assert len(doc["weights"]) == 6 and len(doc["context"]) == 8


CASES = [("causal", 1, None, 2), ("causal", 1, 0, 4), ("qkv", 1, 3, 4), ("simple", 1, None, 5),
         ("multihead", 2, 4, 2), ("multihead", 4, None, 3)]


@pytest.mark.parametrize(("variant", "heads", "query", "block"), CASES)
def test_result_equals_the_full_pass_and_sdpa(variant: str, heads: int, query: int | None,
                                              block: int) -> None:
    spec = Request(text=SENTENCE, variant=variant, heads=heads if heads > 1 else None)
    lesson = build(spec)
    result = flash(lesson, lesson_config(spec), block, query, head=heads - 1)
    index = 5 if query is None else query
    with torch.no_grad():
        full = lesson.module(lesson.x)  # the ordinary full pass
        queries, keys, values = heads_qkv(lesson, lesson.x)  # each (heads, T, head_dim)
        # heads_qkv gives the tiled kernel's convention (simple's queries carry √d_in), so
        # SDPA's own 1/√head_dim scaling applies to every variant.
        causal = variant in ("causal", "multihead")
        sdpa = F.scaled_dot_product_attention(queries, keys, values,
                                              is_causal=causal)  # (heads, T, head_dim)
        sdpa_context = finish_context(lesson, sdpa.transpose(0, 1).reshape(6, -1))[index]
    weights = torch.tensor(result.weights)
    assert_near(weights, full.weights[heads - 1, index])
    assert_near(torch.tensor(result.context), full.context[index])
    assert_near(torch.tensor(result.context), sdpa_context)
    assert result.max_abs_diff <= 1e-5 and result.tiled_max_abs_diff <= 1e-5
    assert len(result.steps) == math.ceil(6 / block)


def test_running_state_is_the_online_softmax() -> None:
    spec = Request(text=SENTENCE, variant="causal")
    result = flash(build(spec), lesson_config(spec), 2, 5)
    seen: list[float] = []
    previous = -math.inf
    for step in result.steps:
        scores = [s for s in step.scores or [] if s is not None]
        seen += scores
        assert_near(step.m, max(seen))
        assert_near(step.block_max, max(scores))
        assert_near(step.scale, math.exp(previous - step.m))
        assert_near(step.l, sum(math.exp(s - step.m) for s in seen))
        previous = step.m
    assert_near(sum(result.weights), 1.0)


def test_bad_input_exits_2(cli) -> None:  # noqa: ANN001
    cli("flash", "one two", "--block", "0").assert_usage_error("--block must be a positive")
    cli("flash", "one two", "--query", "2").assert_usage_error("--query 2 is out of range")
    cli("flash", "one two", "--head", "1").assert_usage_error("--head 1 is out of range")


def test_prints_steps_check_and_memory(cli) -> None:  # noqa: ANN001
    res = cli("flash", SENTENCE, "--block", "2", "--query", "1")
    assert res.code == 0 and "skipped" in res.out and "Check: equal to the naive" in res.out
    assert "36 cells" in res.out
    zh = cli("flash", SENTENCE, "--block", "2", "--lang", "zh").out.replace("\n", "")
    assert "在线 softmax" in zh and "分块" in zh
