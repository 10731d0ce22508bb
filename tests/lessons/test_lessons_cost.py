"""`attncli cost`: tracked peak bytes, the exponents (≈2 naive, ≈1 tiled), skips, JSON keys."""

from __future__ import annotations

import torch

from attncli.lessons.cost import cost, fit_exponent, sizes
from attncli.lessons.memory import AllocationTracker, peak_bytes
from tests.tolerance import assert_near

ROW_KEYS = {"tokens", "naive_seconds", "naive_bytes", "tiled_seconds", "tiled_bytes"}
FIT_KEYS = {"naive_bytes_exponent", "naive_seconds_exponent", "tiled_bytes_exponent",
            "tiled_seconds_exponent"}


def test_tracker_counts_each_storage_once_and_frees() -> None:
    def work() -> torch.Tensor:
        a = torch.zeros(1000)  # 4000 bytes
        view = a.view(10, 100)  # the same storage
        a.add_(1)  # in place: nothing new
        b = torch.ones(500)  # 2000 bytes, peak 6000
        del a, b
        return view

    assert peak_bytes(work, ())[0] == 6000
    inputs = torch.ones(1000)
    with torch.no_grad(), AllocationTracker([inputs]) as tracker:
        slice_of_input = inputs[:10]  # an input's storage is not counted
        doubled = inputs * 2  # 4000 new bytes
        del doubled
    assert tracker.peak == 4000 and tracker.live == 0 and slice_of_input.numel() == 10


def test_exponents_are_about_2_and_1() -> None:
    result = cost(max_tokens=2048, heads=2, emb_dim=64)
    fit = result.fit
    assert 1.85 <= fit["naive_bytes_exponent"] <= 2.15, fit
    assert 0.85 <= fit["tiled_bytes_exponent"] <= 1.15, fit
    rows = result.rows
    assert [r.tokens for r in rows] == [128, 256, 512, 1024, 2048]
    assert all(r.naive_bytes > r.tiled_bytes for r in rows[1:])
    # Measured, not computed: at least the (heads, N, N) weights, at most a few such stages.
    for r in rows:
        matrix = 2 * r.tokens * r.tokens * 4
        assert matrix <= r.naive_bytes <= 8 * matrix
    assert result.max_abs_diff <= 1e-5
    big = result.projection["131072"]
    assert big["naive_bytes"] > 100 * 2**30 > big["tiled_bytes"]


def test_naive_is_skipped_where_it_cannot_fit() -> None:
    result = cost(max_tokens=1024, naive_limit=2 * 2**20)
    skipped = [r for r in result.rows if r.naive_bytes is None]
    assert [r.tokens for r in skipped] == [512, 1024]
    assert all(r.naive_seconds is None and r.naive_would_need > 2 * 2**20 for r in skipped)
    assert result.rows[-1].to_dict()["naive_bytes"] is None


def test_fit_and_sizes() -> None:
    assert sizes(1000) == [128, 256, 512]
    assert sizes(128) == [128] and sizes(255) == [128]
    huge = sizes(10**400)  # no float on the way (10^400 / 128 overflows one)
    assert huge[-1] <= 10**400 < 2 * huge[-1] and len(huge) == 1322
    quadratic = [(n, 5000 + 3 * n * n) for n in (128, 256, 512, 1024)]
    assert_near(fit_exponent(quadratic), 2.0)
    assert fit_exponent([(128, 1.0)]) is None


def test_cli_json_keys_and_table(cli) -> None:  # noqa: ANN001
    doc = cli("cost", "--max-tokens", "512", "--json").json()
    assert set(doc) == {"kind", "rows", "fit", "fit_reasons", "projection", "max_abs_diff"}
    assert all(set(row) == ROW_KEYS for row in doc["rows"]) and set(doc["fit"]) == FIT_KEYS
    # Three sizes are too few for a finding: every exponent null, each with its reason.
    assert set(doc["fit_reasons"]) == FIT_KEYS and all(v is None for v in doc["fit"].values())
    assert all("the range is too short: 3 size(s) measured, a fit needs 4" in reason
               for reason in doc["fit_reasons"].values())
    assert set(doc["projection"]) == {"32768", "131072"}
    assert set(doc["projection"]["32768"]) == {"naive_bytes", "tiled_bytes"}
    res = cli("cost", "--max-tokens", "256")
    assert res.code == 0 and "naive bytes" in res.out and "Growth exponents" in res.out
    cli("cost", "--max-tokens", "100").assert_usage_error("--max-tokens must be at least 128")
    cli("cost", "--num-heads", "3", "--emb-dim", "64").assert_usage_error("heads must divide")
