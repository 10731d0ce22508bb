"""The page's moving window: each row's exact weights near the diagonal (long.window.weights_band)
agree with the window rebuilt for any diagonal position, and reach the page's extras."""

from __future__ import annotations

import math

import pytest
import torch

from attncli.core.request import Extract, Request
from attncli.long.path import run
from attncli.long.window import weights_band, weights_window
from attncli.render.page import page_extra
from tests.tolerance import assert_near


def _lse(queries: torch.Tensor, keys: torch.Tensor, causal: bool) -> torch.Tensor:
    scores = queries @ keys.transpose(1, 2) / math.sqrt(queries.shape[-1])  # (h, N, N)
    if causal:
        n = scores.shape[-1]
        scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), -torch.inf)
    return scores.logsumexp(-1)  # (h, N)


@pytest.mark.parametrize("causal", [True, False])
def test_band_holds_every_diagonal_window(causal: bool) -> None:
    torch.manual_seed(0)
    queries, keys = torch.randn(2, 300, 8), torch.randn(2, 300, 8)  # (heads, N, head_dim)
    lse = _lse(queries, keys, causal)
    width = 16
    band = weights_band(queries, keys, lse, width, causal, chunk=64)  # (2, 300, span)
    assert band.shape == (2, 300, width if causal else 2 * width - 1)
    for start in (0, 7, 63, 64, 150, 300 - width):
        rows = range(start, start + width)
        exact = weights_window(queries, keys, lse, rows, rows, causal)  # (2, w, w)
        for i in rows:
            for j in rows:
                got = band[:, i, j - i + width - 1] if j - i + width - 1 < band.shape[2] else None
                if causal and j > i:
                    assert got is None or torch.isnan(got).all()
                else:
                    assert got is not None
                    assert_near(got, exact[:, i - start, j - start])
    assert torch.isnan(band[:, 0, :width - 1]).all()  # before the text's start


def test_a_page_run_carries_the_band_and_a_terminal_run_does_not() -> None:
    req = Request(text="Each token reads the tokens before it. " * 20, impl="tiled")
    page = run(req, Extract(maps=True, page=True))
    terminal = run(req, Extract(maps=True))
    assert terminal.long is not None and terminal.long.band is None
    extra = page_extra(page)
    band = extra["band"]
    assert band["heads"] == [0] and band["width"] == 64
    assert band["values"].shape == (1, len(page.tokens), 64)
    # To 4 significant digits, equal to the JSON's exact window at its corner.
    corner = page.weights[0]  # (64, 64) rows and keys 0..63
    for i in (0, 5, 63):
        for j in range(i + 1):
            assert band["values"][0, i, j - i + 63] == pytest.approx(corner[i, j], rel=6e-4)
