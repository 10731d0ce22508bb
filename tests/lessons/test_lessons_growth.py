"""cost's growth exponents on synthetic measurements: given only where the sizes show them."""

from __future__ import annotations

import pytest

from attncli.lessons.cost import _fit, project
from attncli.lessons.growth import SLOPE_SPREAD, fit_growth
from attncli.records.lessons import REASONS, CostResult, CostRow
from attncli.render.lessons.cost import render_cost
from attncli.render.lessons.lesson_text import STRINGS
from tests.conftest import rendered
from tests.tolerance import assert_near

SIZES = [128 * 2**k for k in range(6)]  # 128 … 4096


def _series(values: list[float], sizes: list[int] = SIZES) -> list[tuple[int, float]]:
    return list(zip(sizes, values, strict=True))


@pytest.mark.parametrize(("exponent", "fixed"), [(2.0, 0.0), (2.0, 1e6), (1.0, 5e5),
                                                 (1.5, 0.0), (3.0, 10.0)])
def test_a_power_law_gives_its_exponent(exponent: float, fixed: float) -> None:
    fit = fit_growth(_series([fixed + 3.0 * n**exponent for n in SIZES]))
    assert_near(fit.exponent, exponent)
    assert fit.kind is None and fit.reason is None


@pytest.mark.parametrize("count", [1, 2, 3])
def test_too_few_sizes(count: int) -> None:
    fit = fit_growth(_series([n * n for n in SIZES[:count]], SIZES[:count]))
    assert fit.exponent is None and fit.kind == "few"
    assert fit.reason == (f"the range is too short: {count} size(s) measured, a fit needs 4 "
                          "(use a larger --max-tokens)")


def test_the_issue_case_a_negative_exponent_is_no_finding() -> None:
    # Times like those `cost --max-tokens 1024` measures: overhead, then noise, no power law.
    times = [0.0478, 0.0841, 0.0844, 0.0948]
    fit = fit_growth(_series(times, SIZES[:4]))
    assert fit.exponent is None and fit.kind == "unsettled", fit
    shrinking = [10.0, 20.0, 25.0, 27.5, 28.75]  # growth halves at every doubling
    fit = fit_growth(_series(shrinking, SIZES[:5]))
    assert fit.exponent is None and fit.kind == "shrinking"
    assert_near(fit.values["exponent"], -1.0)


def test_a_doubling_that_adds_nothing_is_noise() -> None:
    fit = fit_growth(_series([5.0, 6.0, 9.0, 8.5, 20.0, 60.0]))
    assert fit.exponent is None and fit.kind == "flat"
    assert fit.values == {"a": 512, "b": 1024}
    assert "did not grow from 512 to 1,024 tokens" in (fit.reason or "")


def test_the_doublings_must_agree() -> None:
    # Increments 1, 4, 16·2^0.2: local exponents 2 and 2.2, within the spread.
    settled = [0, 1, 5, 5 + 16 * 2**0.2]
    assert fit_growth(_series(settled, SIZES[:4])).exponent is not None
    # Increments 1, 2, 8: local exponents 1 then 2, a spread of 1.
    unsettled = [0, 1, 3, 11]
    fit = fit_growth(_series(unsettled, SIZES[:4]))
    assert fit.exponent is None and fit.kind == "unsettled"
    assert_near([fit.values["low"], fit.values["high"]], [1.0, 2.0])
    assert fit.values["high"] - fit.values["low"] > SLOPE_SPREAD
    # Only the last three doublings count: noise at the smallest sizes does not.
    late = [50.0, 1.0, *(3.0 * n * n for n in SIZES[2:])]
    assert_near(fit_growth(_series(late)).exponent, 2.0)


def _rows(naive_seconds: list[float]) -> list[CostRow]:
    return [CostRow(n, s, 5 * 4 * n * n, s / 10, 1000 * n + 250_000)
            for n, s in zip(SIZES[:len(naive_seconds)], naive_seconds, strict=True)]


def test_table_and_json_say_why_an_exponent_is_missing() -> None:
    rows = _rows([0.0478, 0.0841, 0.0844, 0.0948])
    result = CostResult({"max_tokens": 1024, "heads": 1, "emb_dim": 64, "head_dim": 64,
                         "block": 128, "seed": 123}, rows, _fit(rows), {}, 0.0)
    doc = result.to_dict()
    assert_near(doc["fit"]["naive_bytes_exponent"], 2.0)
    assert_near(doc["fit"]["tiled_bytes_exponent"], 1.0)
    assert doc["fit"]["naive_seconds_exponent"] is None
    assert doc["fit_reasons"]["naive_bytes_exponent"] is None
    assert doc["fit_reasons"]["naive_seconds_exponent"].startswith("the range is too short")
    out = rendered(lambda console: render_cost(console, result), width=200)
    assert "naive bytes 2.00, tiled bytes 1.00; naive time –, tiled time –." in out
    assert "No exponent for naive time: the range is too short: the last doublings disagree" \
        in out
    assert "-0.9" not in out and "−0.9" not in out
    zh = rendered(lambda console: render_cost(console, result, "zh"), width=200)
    assert "朴素用时没有给出增长指数：测量范围太短" in zh


def test_projection_falls_back_to_the_theory() -> None:
    noisy = _series([0.0478, 0.0841, 0.0844, 0.0948], SIZES[:4])
    assert project(noisy, 2048, 2.0) == round(0.0948 * 4)
    quadratic = _series([float(n * n) for n in SIZES])
    assert project(quadratic, 8192, 1.0) == 8192 * 8192


def test_the_table_says_what_the_json_says() -> None:
    for kind, sentence in REASONS.items():
        assert STRINGS[f"cost.reason.{kind}"][0] == sentence, kind
