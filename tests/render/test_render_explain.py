"""The walk-through: each variant's stages in order, explanations, checks, language."""

from __future__ import annotations

import pytest
from rich.cells import cell_len

from attncli.core.display import Display
from attncli.core.inputs import load_inputs
from attncli.core.request import Extract, Request
from attncli.long.path import run
from attncli.render.explain import (
    explained_stages,
    render_explain,
    row_sum_check,
    steps_for,
)
from tests.conftest import JOURNEY, SENTENCE, make_console, rendered

EXPECTED_STEPS = {
    "simple": ["Inputs X", "Attention scores ω = X·Xᵀ", "Attention weights α = softmax",
               "Context vectors z = α·X"],
    "qkv": ["Inputs X", "Queries, keys and values", "Attention scores ω = Q·Kᵀ",
            "Scaled scores", "Attention weights α = softmax", "Context vectors z = α·V"],
    "causal": ["Inputs X", "Queries, keys and values", "Attention scores ω = Q·Kᵀ",
               "Scaled scores", "Causal mask applied", "Attention weights α = softmax",
               "Attention weights after dropout", "Context vectors z = α·V"],
    "multihead": ["Inputs X", "Queries, keys and values", "Attention scores ω = Q·Kᵀ",
                  "Scaled scores", "Causal mask applied", "Attention weights α = softmax",
                  "Context vectors of each head", "Heads concatenated, then the output"],
}


def _headings(text: str) -> list[str]:
    return [line.split(" · ", 1)[1] for line in text.splitlines() if line.startswith("Step ")]


@pytest.mark.parametrize("variant", list(EXPECTED_STEPS))
def test_steps_in_order_only_those_the_variant_has(variant: str) -> None:
    dropout = 0.2 if variant == "causal" else 0.0
    result = run(Request(text=SENTENCE, variant=variant, dropout=dropout))
    text = rendered(lambda c: render_explain(c, result, Display()), 100)
    headings = _headings(text)
    assert len(headings) == len(EXPECTED_STEPS[variant])
    for heading, expected in zip(headings, EXPECTED_STEPS[variant], strict=True):
        assert heading.startswith(expected), (heading, expected)
    assert f"Step 1 of {len(headings)}" in text
    assert max(len(line) for line in text.splitlines()) <= 100


def test_explained_stages_skip_the_repeated_weights() -> None:
    result = run(Request(text=SENTENCE, variant="causal"))
    assert explained_stages(result) == ["inputs", "queries", "keys", "values", "scores",
                                        "scaled", "masked", "softmax", "context"]
    assert steps_for(["context", "keys", "inputs"]) == [
        ("inputs", ["inputs"]), ("qkv", ["keys"]), ("context", ["context"])]


def test_scaling_masking_and_row_sums_are_spelled_out() -> None:
    result = run(Request(inputs=load_inputs(JOURNEY), variant="causal", d_out=2))
    text = rendered(lambda c: render_explain(c, result, Display()), 100)
    assert "(d_k = 2, √d_k = 1.4142)" in text
    assert "set to −∞" in text and "· masked (future token)" in text
    assert "Check: every row sums to 1" in text
    assert "-0.4519" in text and "0.2216" in text
    assert "Each row is one token's input vector, given directly" in text


def test_dropout_step_shows_the_rescaling() -> None:
    result = run(Request(text=SENTENCE, variant="causal", dropout=0.5))
    text = rendered(lambda c: render_explain(c, result, Display()), 120)
    assert "1/(1−p) = 2.0000" in text
    dropped, softmax = result.stages["dropped"][0], result.stages["softmax"][0]
    zeroed = sum(1 for i in range(6) for j in range(i + 1) if dropped[i][j] == 0.0)
    assert f"Zeroed {zeroed} of 21 weights" in text
    i, j = next((i, j) for i in range(6) for j in range(i + 1) if dropped[i][j] != 0.0)
    assert f"{softmax[i][j]:.4f} × 2.0000 = {dropped[i][j]:.4f}" in text


def test_row_sum_check_fails_visibly() -> None:
    result = run(Request(text=SENTENCE, variant="qkv"))
    result.stages["softmax"][0][2][0] += 0.5
    assert "Check failed" in row_sum_check(make_console(), result, Display()).plain


def test_chinese_titles_and_explanations_same_numbers() -> None:
    result = run(Request(inputs=load_inputs(JOURNEY), variant="multihead", d_out=2, heads=2))
    en = rendered(lambda c: render_explain(c, result, Display(lang="en")), 80)
    zh = rendered(lambda c: render_explain(c, result, Display(lang="zh")), 80)
    for term in ("注意力分数", "注意力权重", "上下文向量", "因果掩码", "多头注意力"):
        assert term in zh
    assert "第 1 步（共 8 步）" in zh and "Step 1 of 8" in en
    numbers = [w for w in en.split() if w.replace("-", "").replace(".", "").isdigit()]
    assert numbers and all(n in zh for n in numbers if "." in n)
    # Chinese paragraphs wrap at the width too, although they have no spaces.
    assert max(cell_len(line) for line in zh.splitlines()) <= 80


def test_show_and_query_in_explain() -> None:
    result = run(Request(text=SENTENCE, variant="causal"), Extract(query="2"))
    text = rendered(lambda c: render_explain(
        c, result, Display(stages=("weights", "scores"))), 100)
    assert _headings(text)[0].startswith("Attention scores")
    assert _headings(text)[1].startswith("Attention weights used")
    assert "What query 2 (' starts') attends to" in text
