"""compare's view: panels side by side where they fit, stacked otherwise, one shared legend."""

from __future__ import annotations

from attncli.core.compare import Shared, run_compare
from attncli.core.display import Display, View
from attncli.core.request import Request
from attncli.core.variants import Variant
from attncli.render.compare import render_compare
from tests.conftest import SENTENCE, rendered

VARIANTS = [Variant.simple, Variant.causal, Variant.multihead]


def _titles_per_line(text: str) -> list[int]:
    titles = ("simple attention", "causal attention", "multi-head attention")
    return [sum(line.count(t) for t in titles) for line in text.splitlines()
            if any(t in line for t in titles)]


def test_side_by_side_when_wide_stacked_when_narrow() -> None:
    results = run_compare(Request(text=SENTENCE), VARIANTS, Shared(heads=2))
    wide = rendered(lambda c: render_compare(c, results, Display()), 130)
    narrow = rendered(lambda c: render_compare(c, results, Display()), 70)
    assert max(_titles_per_line(wide)) == 2 and sum(_titles_per_line(wide)) == 4
    assert _titles_per_line(narrow) == [1, 1, 1, 1]
    for text, width in ((wide, 130), (narrow, 70)):
        assert max(len(line) for line in text.splitlines()) <= width
        assert "multi-head attention · head 1" in text
        assert f"{results[1].weights[0][5][0]:.4f}" in text
        assert text.count("masked (future token)") == 1


def test_heatmaps_share_one_shade_legend() -> None:
    results = run_compare(Request(text=SENTENCE), VARIANTS, Shared())
    text = rendered(lambda c: render_compare(c, results, Display(view=View.heatmap)), 80)
    assert max(_titles_per_line(text)) >= 2
    assert text.count("[ ░▒▓█]") == 1
    assert "simple, causal, multihead on the same 6 tokens and embeddings (seed 123)" in text
