"""Stages as titled matrices: per head, masked cells shown as masked, multihead's concatenation."""

from __future__ import annotations

from attncli.core.display import Display
from attncli.core.request import Extract, Request
from attncli.long.path import run
from attncli.render.stages import panels, render_stage, shown_weights, stage_title
from tests.conftest import SENTENCE, rendered


def test_panels_per_head_and_shapes() -> None:
    result = run(Request(text=SENTENCE, variant="multihead", heads=2, d_out=4))
    options = Display()
    scores = panels(result, "scores", options)
    assert [p.caption for p in scores] == ["head 0 of 2 · row = query, column = key",
                                           "head 1 of 2 · row = query, column = key"]
    assert scores[1].cells == result.stages["scores"][1] and scores[0].token_cols
    one = run(Request(text=SENTENCE, variant="multihead", heads=2, d_out=4), Extract(head=1))
    queries = panels(one, "queries", options)
    assert len(queries) == 1 and queries[0].cells == result.stages["queries"][1]
    assert queries[0].caption.startswith("head 1 of 2")
    assert panels(one, "heads_context", options)[0].cells == [
        row[2:] for row in result.stages["heads_context"]]
    assert list(queries[0].cols.labels) == ["d0", "d1"] and not queries[0].token_cols
    per_head = panels(result, "heads_context", options)
    assert [row[2:] for row in result.stages["heads_context"]] == per_head[1].cells
    concat, projected = panels(result, "context", options)
    assert list(concat.cols.labels) == ["h0·d0", "h0·d1", "h1·d0", "h1·d1"]
    assert concat.cells == result.stages["heads_context"] and projected.cells == result.context


def test_weights_show_masked_cells_as_none() -> None:
    result = run(Request(text=SENTENCE, variant="causal"))
    cells = shown_weights(result, result.weights[0])
    assert all((cells[i][j] is None) == (j > i) for i in range(6) for j in range(6))
    assert panels(result, "softmax", Display())[0].vmin == 0.0
    qkv = run(Request(text=SENTENCE, variant="qkv"))
    assert shown_weights(qkv, qkv.weights[0]) == qkv.weights[0]


def test_titles_carry_d_k_and_p_in_both_languages() -> None:
    result = run(Request(text=SENTENCE, variant="multihead", heads=2, dropout=0.25))
    assert stage_title(result, "scaled", "en") == (
        "Scaled scores ω ÷ √d_k (d_k = 4, √d_k = 2.0000)")
    assert stage_title(result, "dropped", "zh") == "dropout 之后的注意力权重（p = 0.25）"
    simple = run(Request(text=SENTENCE, variant="simple"))
    assert stage_title(simple, "scores", "en") == "Attention scores ω = X·Xᵀ"
    assert stage_title(simple, "context", "zh") == "上下文向量 z = α·X"


def test_render_stage_prints_values_and_masks() -> None:
    result = run(Request(text=SENTENCE, variant="causal"))
    text = rendered(lambda c: [*render_stage(c, result, "masked", Display())][0], 100)
    assert text.startswith("Causal mask applied — row = query, column = key")
    assert f"{result.stages['masked'][0][5][5]:.4f}" in text
    assert text.count("·") >= 15
