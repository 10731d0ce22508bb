"""Renderers: colour scale, masked cells, width fitting and escaping."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from attncli.core.display import Display
from attncli.core.inputs import InputVectors
from attncli.core.request import Extract, Request
from attncli.long.path import run
from attncli.render.draw.colors import VIRIDIS, cell_style, colour_of
from attncli.render.run import render_run
from tests.conftest import SENTENCE


def _render(result, width: int = 100, colour: bool = False, **kwargs) -> str:  # noqa: ANN001
    buf = io.StringIO()
    console = Console(file=buf, width=width, force_terminal=colour, no_color=not colour,
                      color_system="truecolor" if colour else None)
    console.print(render_run(console, result, Display(**kwargs)))
    return buf.getvalue()


def test_colour_scale_ends_and_monotonic_brightness() -> None:
    assert colour_of(0.0, 0.0, 1.0) == VIRIDIS[0]
    assert colour_of(1.0, 0.0, 1.0) == VIRIDIS[-1]
    assert colour_of(5.0, 0.0, 1.0) == VIRIDIS[-1]
    lum = [sum(colour_of(i / 20, 0, 1)) for i in range(21)]
    assert lum[-1] > lum[0]
    assert cell_style(0.0, 0, 1).color.triplet == (255, 255, 255)
    assert cell_style(1.0, 0, 1).color.triplet == (0, 0, 0)


def test_table_shows_values_masks_and_labels() -> None:
    result = run(Request(text=SENTENCE, variant="causal"))
    text = _render(result)
    row = result.weights[0][1]
    assert f"{row[0]:.4f}" in text and f"{row[1]:.4f}" in text
    assert "·" in text and "masked" in text
    assert " journey" in text and "Context vectors" in text
    assert "\x1b[" not in text


def test_colour_only_when_asked() -> None:
    result = run(Request(text=SENTENCE, variant="qkv"))
    assert "\x1b[" in _render(result, colour=True)
    assert "\x1b[" not in _render(result, colour=False)


def test_markup_in_labels_is_escaped() -> None:
    vectors = InputVectors(labels=["[bold]x", "[red]"], vectors=[[1.0, 0.0], [0.0, 1.0]])
    text = _render(run(Request(inputs=vectors, variant="simple")))
    assert "[bold]x" in text and "[red]" in text


@pytest.mark.parametrize("width", [40, 60, 80, 120])
@pytest.mark.parametrize("view", ["table", "auto", "heatmap"])
def test_fits_the_width(width: int, view: str) -> None:
    result = run(Request(text=" ".join(["word"] * 30), variant="multihead"))
    text = _render(result, width=width, view=view)
    assert max(len(line) for line in text.splitlines()) <= width
    if view == "table":
        assert "cut to fit" in text
    else:
        # Too wide for numbers: the weights become shades, 30 key columns under index ticks.
        assert "[ ░▒▓█]" in text and "29  word" in text


def test_journey_fits_80_columns_with_four_decimals() -> None:
    for variant in ("simple", "qkv", "causal", "multihead"):
        text = _render(run(Request(text=SENTENCE, variant=variant)), width=80)
        assert "cut to fit" not in text
        assert max(len(line) for line in text.splitlines()) <= 80


def test_precision_and_head() -> None:
    both = run(Request(text=SENTENCE, variant="multihead", heads=2))
    result = run(Request(text=SENTENCE, variant="multihead", heads=2), Extract(head=1))
    text = _render(result, precision=2)
    assert "head 1 of 2" in text and "head 0 of 2" not in text
    assert result.weights == [both.weights[1]] and result.config.head == 1
    assert f"{both.weights[1][5][0]:.2f}" in text


