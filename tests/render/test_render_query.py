"""One query's view: keys ranked by weight, values equal to the weights row, masks noted."""

from __future__ import annotations

import pytest

from attncli.core.display import Display
from attncli.core.inputs import load_inputs
from attncli.core.request import Extract, Request
from attncli.long.path import run
from attncli.render.query import bar, ranking, render_query
from tests.conftest import JOURNEY, SENTENCE, rendered


def _bar_lines(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines() if "█" in line or line.endswith("0.0000")]


def test_bar_lengths_in_eighths() -> None:
    assert bar(1.0, 1.0, 4) == "████"
    assert bar(0.5, 1.0, 4) == "██  "
    assert bar(1 / 8, 1.0, 4) == "▌   " and bar(1 / 16, 1.0, 4) == "▎   "
    assert bar(0.0, 1.0, 4) == "    " and bar(0.3, 0.0, 4) == "    "


def test_book_query_x2_ranking() -> None:
    result = run(Request(inputs=load_inputs(JOURNEY), variant="simple"), Extract(query="1"))
    text = rendered(lambda c: render_query(c, result, Display()), 80)
    assert "What query 1 ('journey') attends to" in text
    rows = _bar_lines(text)
    assert [r[1] for r in rows] == ["journey", "starts", "step", "Your", "with", "one"]
    assert [r[-1] for r in rows] == ["0.2379", "0.2333", "0.1581", "0.1385", "0.1240", "0.1082"]
    assert max(len(line) for line in text.splitlines()) <= 80


@pytest.mark.parametrize("query", [0, 3, 5])
def test_order_and_values_match_the_weights_row_per_head(query: int) -> None:
    result = run(Request(text=SENTENCE, variant="multihead", heads=2), Extract(query=str(query)))
    for head in range(2):
        pairs, masked, _ = ranking(result, query, head)
        row = result.weights[head][query]
        assert [j for j, _ in pairs] == sorted(range(query + 1), key=lambda j: (-row[j], j))
        assert [w for _, w in pairs] == [row[j] for j, _ in pairs]
        assert masked == list(range(query + 1, 6))
    text = rendered(lambda c: render_query(c, result, Display(precision=3)))
    assert "head 0 of 2" in text and "head 1 of 2" in text
    assert (f"keys {query + 1}–5: masked" in text) == (query < 5)
    first = _bar_lines(text)[0]
    best = max(range(query + 1), key=lambda j: result.weights[0][query][j])
    assert first[0] == str(best) and first[-1] == f"{result.weights[0][query][best]:.3f}"


def test_one_head_and_a_key_window() -> None:
    result = run(Request(text=SENTENCE, variant="multihead", heads=2),
                 Extract(query="5", head=1))
    options = Display(cols=(2, 5))
    text = rendered(lambda c: render_query(c, result, options))
    assert "head 1 of 2" in text and "head 0 of 2" not in text
    assert sorted(int(r[0]) for r in _bar_lines(text)) == [2, 3, 4]
