"""The tour: shipped journey vectors, the book's settings and numbers, pages in order."""

from __future__ import annotations

import json

from rich.cells import cell_len

from attncli.core.display import Display
from attncli.lessons.tour import journey, tour
from attncli.render.demo import render_outro, render_page, render_title
from tests.conftest import JOURNEY, rendered


def _rounded(values: list[float]) -> list[float]:
    return [round(v, 4) for v in values]


def test_shipped_vectors_equal_the_sample() -> None:
    sample = json.loads(JOURNEY.read_text())
    shipped = journey()
    assert shipped.labels == sample["tokens"] and shipped.vectors == sample["vectors"]


def test_tour_reproduces_the_books_numbers() -> None:
    steps = {step.key: step for step in tour()}
    assert list(steps) == ["intro", "query", "all", "qkv", "causal", "dropout", "multihead"]
    simple = steps["query"].result
    assert _rounded(simple.weights[0][1]) == [0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581]
    assert _rounded(simple.context[1]) == [0.4419, 0.6515, 0.5683]
    assert _rounded(steps["qkv"].result.context[0]) == [-0.0739, 0.0713]
    assert _rounded(steps["causal"].result.context[0]) == [-0.4519, 0.2216]
    assert _rounded(steps["multihead"].result.context[0]) == [0.3190, 0.4858]
    assert steps["dropout"].result.config.dropout == 0.5
    assert steps["query"].rows == (1, 2)
    assert simple.query is not None and simple.query.index == 1


def test_pages_render_in_both_languages() -> None:
    steps = tour()
    for lang in ("en", "zh"):
        options = Display(lang=lang)
        text = rendered(lambda c, o=options: render_page(c, steps[1], 2, 7, o), 80)
        assert "0.1385" in text and "0.4419" in text and "2/7 · " in text
        assert max(cell_len(line) for line in text.splitlines()) <= 80
    assert "attncli 演示" in rendered(lambda c: render_title("zh"))
    assert "attncli explain" in rendered(lambda c: render_outro("en"))
