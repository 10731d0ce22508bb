"""The tiled path of pipeline.run against the naive path's full matrices, on the same inputs."""

from __future__ import annotations

import functools
import json
import math
import re
from dataclasses import replace
from typing import Any

import pytest
import torch

from attncli.core import sizes as budget
from attncli.core.display import Window
from attncli.core.pipeline import run_naive
from attncli.core.request import Extract, Request
from attncli.core.result import Result
from attncli.core.sizes import naive_bytes
from attncli.errors import AttnCliError
from attncli.long.path import run
from attncli.machine import available_bytes
from attncli.render.jsonout import dumps
from tests.tolerance import assert_near

TEXT = (("Long documents in bounded memory: every weight of a window is rebuilt exactly from the "
        "log-sum-exp of its row. ") * 5).strip()  # 125 tokens
SETTINGS = {
    "simple": {"emb_dim": 6},
    "qkv": {"emb_dim": 8, "d_out": 6},
    "causal": {"emb_dim": 8, "d_out": 6, "qkv_bias": True},
    "multihead": {"emb_dim": 8, "d_out": 12, "heads": 3},
}


def both(variant: str, view: Extract | None = None, **extra: object) -> tuple[Result, Result]:
    """The naive and the tiled run of the same request."""
    req = Request(text=TEXT, variant=variant, **SETTINGS[variant], **extra)  # type: ignore[arg-type]
    tiled = run(replace(req, impl="tiled"), view)
    assert tiled.long is not None
    return naive_run(replace(req, impl="naive", pool=None, top_k=None, full=False)), tiled


@functools.cache
def naive_run(req: Request) -> Result:
    """The naive run of req, once per request: the reference for many tiled runs."""
    result = run(req)
    assert result.long is None
    return result


def naive_weights(result: Result) -> list[list[list[float | None]]]:
    """The naive weights with None where the masked stage is -inf, as the tiled path shows them."""
    masked = result.stages.get("masked")
    return [[[None if masked is not None and masked[h][i][j] is None else w
              for j, w in enumerate(row)] for i, row in enumerate(head)]
            for h, head in enumerate(result.weights)]


def assert_cells_close(got: Any, want: list) -> None:
    """Masked (None, or NaN from the tiled path) in the same cells, the rest within the bound."""
    if hasattr(got, "tolist"):  # a numpy array from the tiled path: NaN is masked, as in JSON
        got = json.loads(dumps(got))
    assert_near(got, want, equal_nan=True)


@pytest.mark.parametrize("variant", list(SETTINGS))
def test_context_and_config_match_the_naive_path(variant: str) -> None:
    naive, tiled = both(variant)
    assert len(tiled.tokens) == 125
    assert_cells_close(tiled.context, naive.context)
    assert tiled.config.to_dict() == {**naive.config.to_dict(), "impl": "tiled", "top_k": 5,
                                      "pool": "max"}
    assert naive.config.impl == "naive"


WINDOWS = [  # (rows, cols): across the diagonal, odd sizes, one row, one column, the far corner
    ("10:23", "5:31"), ("40:41", None), (None, "77:78"), ("100:125", "99:125"), ("3:4", "3:4"),
]


@pytest.mark.parametrize("variant", list(SETTINGS))
@pytest.mark.parametrize(("rows", "cols"), WINDOWS)
def test_window_is_the_naive_slice(variant: str, rows: str | None, cols: str | None) -> None:
    view = Extract(rows=Window("--rows", *map(_int, rows.split(":"))) if rows else None,
                    cols=Window("--cols", *map(_int, cols.split(":"))) if cols else None)
    naive, tiled = both(variant, view)
    (a, b), (c, d) = tiled.window["rows"], tiled.window["cols"]
    assert (a, b) == (tuple(map(int, rows.split(":"))) if rows else (0, 125))
    assert (c, d) == (tuple(map(int, cols.split(":"))) if cols else (0, 125))
    want = [[row[c:d] for row in head[a:b]] for head in naive_weights(naive)]
    assert_cells_close(tiled.weights, want)


def _int(text: str) -> int | None:
    return int(text) if text else None


@pytest.mark.parametrize("variant", list(SETTINGS))
def test_default_window_is_the_top_left_corner_and_full_is_everything(variant: str) -> None:
    naive, tiled = both(variant)
    assert tiled.window == {"rows": [0, 64], "cols": [0, 64]}
    assert_cells_close(tiled.weights, [[row[:64] for row in head[:64]]
                                       for head in naive_weights(naive)])
    naive, full = both(variant, full=True)
    assert full.window == {"rows": [0, 125], "cols": [0, 125]}
    assert_cells_close(full.weights, naive_weights(naive))


def reference_summary(weights: list[list[float]], top_k: int) -> dict[str, float]:
    """The summary of one head from its full weights, in plain Python over queries 1..N-1."""
    rows = range(1, len(weights))
    def mean(values: list[float]) -> float:
        return sum(values) / len(values)
    return {
        "entropy": mean([-sum(w * math.log(w) for w in weights[i] if w > 0) for i in rows]),
        "first": mean([weights[i][0] for i in rows]),
        "prev": mean([weights[i][i - 1] for i in rows]),
        "self": mean([weights[i][i] for i in rows]),
        "top_k_mass": mean([sum(sorted(weights[i], reverse=True)[:top_k]) for i in rows]),
        "distance": mean([sum(w * (i - j) for j, w in enumerate(weights[i])) for i in rows]),
    }


@pytest.mark.parametrize("variant", list(SETTINGS))
def test_summary_equals_measures_of_the_naive_weights(variant: str) -> None:
    naive, tiled = both(variant, top_k=3)
    assert [row["head"] for row in tiled.long.summary] == list(range(naive.num_heads))
    for head, row in zip(naive.weights, tiled.long.summary, strict=True):
        want = reference_summary(head, top_k=3)
        for name, value in want.items():
            assert_near(row[name], value, msg=(name, row, want))


@pytest.mark.parametrize("variant", ["qkv", "causal"])
def test_stats_and_query_row_match_the_naive_weights(variant: str) -> None:
    naive, tiled = both(variant, Extract(query="70"), top_k=4)
    weights = naive_weights(naive)[0]
    for i in (0, 1, 70, 124):
        index = tiled.long.stats["top_k"]["index"][0][i].tolist()
        order = sorted((j for j, w in enumerate(weights[i]) if w is not None),
                       key=lambda j: -weights[i][j])
        assert index == (order + [-1] * 4)[:4]
        assert_cells_close(tiled.long.stats["top_k"]["weight"][0][i],
                           [weights[i][j] if j >= 0 else 0.0 for j in index])
        lse, entropy = tiled.long.stats["lse"][0][i], tiled.long.stats["entropy"][0][i]
        assert_near(sum(w for w in weights[i] if w), 1.0)
        assert math.isfinite(lse)
        assert_near(entropy, -sum(w * math.log(w) for w in weights[i] if w))
    assert tiled.query is not None
    assert tiled.query.index == 70 and tiled.query.token == tiled.tokens[70].text
    assert_cells_close(tiled.query.weights, [head[70] for head in naive_weights(naive)])


def reference_pool(weights: list[list[float | None]], edges: list[int],
                   pool: str) -> tuple[list[list[float | None]], list[list[int]]]:
    """Blocks of the full weights, pooled in plain Python; masked cells (None) left out."""
    values, counts = [], []
    spans = [range(edges[b], edges[b + 1]) for b in range(len(edges) - 1)]
    for rows in spans:
        value_row, count_row = [], []
        for cols in spans:
            cells = [weights[i][j] for i in rows for j in cols if weights[i][j] is not None]
            count_row.append(len(cells))
            if not cells:
                value_row.append(None)
            else:
                value_row.append(max(cells) if pool == "max" else sum(cells) / len(cells))
        values.append(value_row)
        counts.append(count_row)
    return values, counts


@pytest.mark.parametrize("pool", ["max", "mean"])
@pytest.mark.parametrize("variant", ["qkv", "multihead"])
def test_pooled_maps_equal_pooling_of_the_naive_weights(variant: str, pool: str) -> None:
    naive, tiled = both(variant, Extract(maps=True, grid=9, head=1 if variant == "multihead"
                                          else None), pool=pool)
    h = 1 if variant == "multihead" else 0
    [pmap] = tiled.long.maps
    assert pmap.head == h
    assert pmap.edges == [0, 14, 28, 42, 56, 70, 84, 98, 112, 125]  # ceil(125 / 9) = 14 a block
    values, counts = reference_pool(naive_weights(naive)[h], pmap.edges, pool)
    assert pmap.counts == counts
    assert_cells_close(pmap.values, values)


def test_pooling_in_small_chunks_gives_the_same_map(monkeypatch: pytest.MonkeyPatch) -> None:
    _, whole = both("causal", Extract(maps=True, grid=10))
    monkeypatch.setattr("attncli.long.pooling.CHUNK_CELLS", 50)  # a few rows at a time
    _, chunked = both("causal", Extract(maps=True, grid=10))
    assert_cells_close(chunked.long.maps[0].values, whole.long.maps[0].values)


def test_auto_switches_at_the_budget() -> None:
    req = Request(text=TEXT, variant="multihead", emb_dim=8, d_out=12, heads=3)
    at = naive_bytes(125, 3)
    assert isinstance(run(req, budget_bytes=at), Result)
    long_run = run(req, budget_bytes=at - 1)
    assert long_run.long is not None and long_run.config.impl == "tiled"
    assert isinstance(run_naive(req, budget_bytes=at), Result)


def test_explain_and_compare_refuse_what_auto_sends_to_the_tiled_path() -> None:
    req = Request(text=TEXT, variant="multihead", emb_dim=8, d_out=12, heads=3)
    with pytest.raises(AttnCliError) as info:
        run_naive(req, budget_bytes=1000)
    assert str(info.value) == (
        "125 tokens × 3 head(s) need about 4 MB as full N × N matrices, more than --impl auto "
        "allows (256 MiB); `attncli run` shows long inputs, or force this with --impl naive")
    with pytest.raises(AttnCliError, match=r"--impl tiled applies to `attncli run` only"):
        run_naive(replace(req, impl="tiled"))


@pytest.mark.parametrize(("impl", "why"), [
    ("tiled", "--impl tiled"), ("auto", "--impl auto takes it beyond 256 MiB")])
def test_dropout_on_the_tiled_path_is_refused_with_the_naive_cost(impl: str, why: str) -> None:
    req = Request(text=TEXT, variant="causal", dropout=0.1, impl=impl)
    with pytest.raises(AttnCliError) as info:
        run(req, budget_bytes=1000)
    assert str(info.value) == (
        f"--dropout 0.1 is not supported on the tiled path ({why}); use --impl naive to apply "
        "it (about 1 MB for 125 tokens × 1 head(s)), or leave out --dropout")


def test_full_is_refused_when_memory_is_short(monkeypatch: pytest.MonkeyPatch) -> None:
    # A JSON cell of 1 MB: the 46,875 weights need 46.9 GB, more than this machine has.
    monkeypatch.setattr(budget, "JSON_CELL_BYTES", 10**6)
    req = Request(text=TEXT, variant="multihead", d_out=12, heads=3, impl="tiled", full=True)
    with pytest.raises(AttnCliError) as info:
        run(req)
    assert re.fullmatch(
        r"--full: 3 head\(s\) × 125 × 125 tokens needs about 46\.9 GB as JSON \(46,875 weights\), "
        r"more than the [\d.]+ [MG]B of memory available now; leave out --full, or pick a window "
        r"with --rows a:b --cols c:d", str(info.value)), str(info.value)


def test_available_memory_reads_meminfo() -> None:
    free = available_bytes()
    assert free is None or free > 0


@pytest.mark.parametrize(("view", "message"), [
    (Extract(stages=("scores",)), "--show picks stages of the naive path, but 125 tokens × 1 "
     "head(s) took the tiled path, which keeps none of them; use --impl naive to see them"),
    (Extract(head=1), "--head 1 is out of range: this run has 1 head(s), numbered 0 to 0"),
    (Extract(query="999"), "--query 999 is out of range: this run has 125 tokens, numbered "
     "0 to 124"),
])
def test_what_the_tiled_path_cannot_show_is_refused_before_work(view: Extract,
                                                                message: str) -> None:
    with pytest.raises(AttnCliError) as info:
        run(Request(text=TEXT, impl="tiled"), view)
    assert str(info.value) == message


def test_tiled_does_not_apply_with_a_model() -> None:
    from attncli.models.run import run_model

    with pytest.raises(AttnCliError, match="--impl tiled does not apply to a GPT-2 checkpoint"):
        run_model(Request(text="a b", model="gpt2", impl="tiled"))


@pytest.mark.parametrize("variant", ["causal", "multihead"])
def test_one_token_has_a_summary(variant: str) -> None:
    result = run(Request(text="Hello", variant=variant, impl="tiled"))
    assert result.long is not None
    assert len(result.long.summary) == result.num_heads == (2 if variant == "multihead" else 1)
    for row in result.long.summary:
        assert_near([row["self"], row["first"], row["distance"]], [1.0, 1.0, 0.0])
        assert row["prev"] == 0.0
    assert_near(result.weights, [[[1.0]]] * result.num_heads)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_matches_cpu() -> None:
    req = Request(text=TEXT, variant="multihead", d_out=12, heads=3, impl="tiled")
    on_cpu, on_gpu = run(req), run(replace(req, device="cuda"))
    assert on_cpu.long is not None and on_gpu.long is not None
    assert_cells_close(on_gpu.context, on_cpu.context, tol=1e-4)
    assert_cells_close(on_gpu.weights, on_cpu.weights, tol=1e-5)
