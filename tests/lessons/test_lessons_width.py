"""kvcache, flash and permute fit 80 columns, every table row on one line; at the narrowest width
attncli allows they still print; CJK labels are cut only as far as the width needs."""

from __future__ import annotations

import re

import pytest
from rich.cells import cell_len

from attncli.cli.streams import MIN_WIDTH
from attncli.core.request import Request
from attncli.lessons.flash import flash
from attncli.lessons.kvcache import kvcache, kvcache_model
from attncli.lessons.permute import permute
from attncli.lessons.setup import build, lesson_config
from attncli.render.lessons.flash import render_flash
from attncli.render.lessons.kvcache import render_kvcache
from attncli.render.lessons.permute import render_permute
from tests.conftest import ROOT, SENTENCE, rendered

CAT, FISH = "猫吃鱼", "鱼吃猫"
NEKO, SAKANA = "猫が魚を食べる", "魚が猫を食べる"
LONGER = " ".join(["the cat eats the fish and the fish eats the cat"] * 5)
TEXTS = [SENTENCE, CAT + "，" + FISH, NEKO, LONGER]
WIDTHS = [80, 60, 40, MIN_WIDTH]


def _lines(out: str, width: int) -> list[str]:
    lines = out.splitlines()
    assert lines, "something is printed"
    assert all(cell_len(line) <= width for line in lines), \
        max(lines, key=cell_len)
    return lines


def _rows_after_rules(lines: list[str], starts: list[list[str]]) -> None:
    """Under the k-th table's rule come its rows, one line each, starting as starts[k] says."""
    rules = [i for i, line in enumerate(lines) if line.startswith("─")]
    assert len(rules) == len(starts), lines
    for rule, table in zip(rules, starts, strict=True):
        body = lines[rule + 1:rule + 1 + len(table)]
        for line, start in zip(body, table, strict=True):
            assert re.match(start, line), (start, line)
        # What follows the last row is prose or a title, never the rest of a wrapped row.
        after = lines[rule + 1 + len(table):rule + 2 + len(table)]
        assert not after or not after[0][:1].isspace(), after


def _kvcache(text: str, **options: object) -> object:
    spec = Request(text=text, **options)  # type: ignore[arg-type]
    return kvcache(build(spec), lesson_config(spec))


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize(("options", "precision"), [({"variant": "causal"}, 3),
                                                     ({"variant": "multihead", "heads": 4,
                                                       "d_out": 16}, 8)])
def test_kvcache_fits_80_columns(text: str, options: dict, precision: int) -> None:
    result = _kvcache(text, **options)
    out = rendered(lambda c: render_kvcache(c, result, "en", precision, head=0), width=80)
    lines = _lines(out, 80)
    _rows_after_rules(lines, [[rf"^\s*{s.index}  " for s in result.steps]])  # type: ignore
    for lang in ("en", "zh"):
        for width in WIDTHS:
            _lines(rendered(lambda c, lang=lang: render_kvcache(c, result, lang, precision),
                            width=width), width)


def test_kvcache_of_a_model_fits_80_columns() -> None:
    result = kvcache_model(Request(text=LONGER[:100], model=str(ROOT / "samples" / "toy-gpt2"),
                                   layer=-1))
    out = rendered(lambda c: render_kvcache(c, result, "en", 8), width=80)
    lines = _lines(out, 80)
    _rows_after_rules(lines, [[rf"^\s*{s.index}  " for s in result.steps]])
    assert f"{result.steps[-1].macs_recompute:,}" in out  # every column kept at 80
    narrow = rendered(lambda c: render_kvcache(c, result, "en", 8), width=40)
    assert "To fit 40 columns: left out MACs without, MACs cached;" in " ".join(narrow.split())


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize(("block", "query", "options", "precision"), [
    (2, 3, {"variant": "causal"}, 3), (4, None, {"variant": "causal"}, 8),
    (1, 0, {"variant": "multihead", "heads": 2}, 3), (16, None, {"variant": "qkv"}, 5)])
def test_flash_fits_80_columns(text: str, block: int, query: int | None, options: dict,
                               precision: int) -> None:
    spec = Request(text=text, **options)
    result = flash(build(spec), lesson_config(spec), block, query)
    out = rendered(lambda c: render_flash(c, result, "en", precision), width=80)
    lines = _lines(out, 80)
    rows = [rf"^\s*{s.keys[0]}–{s.keys[1] - 1}  " for s in result.steps]
    _rows_after_rules(lines, [rows, [rf"^{result.query} "]])
    for lang in ("en", "zh"):
        for width in WIDTHS:
            _lines(rendered(lambda c, lang=lang: render_flash(c, result, lang, precision),
                            width=width), width)


@pytest.mark.parametrize(("a", "b", "variant"), [(CAT, FISH, "qkv"), (NEKO, SAKANA, "causal"),
                                                  ("the cat eats the fish",
                                                   "the fish eats the cat", "multihead")])
def test_permute_fits_80_columns(a: str, b: str, variant: str) -> None:
    result = permute(Request(text=a, variant=variant), a, b)
    out = rendered(lambda c: render_permute(c, result, "en", 3), width=80)
    lines = _lines(out, 80)
    rows = [rf"^{t.index} " for t in result.tokens_a]
    _rows_after_rules(lines, [rows] * 4)
    for width in WIDTHS:
        _lines(rendered(lambda c: render_permute(c, result, "zh", 8), width=width), width)


def _headers(out: str) -> list[str]:
    """The label line of each weights table (the line above its rule)."""
    lines = out.splitlines()
    return [lines[i - 1] for i, line in enumerate(lines) if line.startswith("─")]


def test_cjk_labels_are_cut_only_as_far_as_the_width_needs() -> None:
    result = permute(Request(text=CAT, variant="qkv"), CAT, FISH)
    wide = _headers(rendered(lambda c: render_permute(c, result), width=100))
    assert all("猫[1/3]" in h and "吃[1-2/3]" in h and "…" not in h for h in wide), wide
    # At 80 the whole labels need 85 cells; one more cell than the numbers' width still fits.
    at_80 = _headers(rendered(lambda c: render_permute(c, result), width=80))
    assert all("猫[1/…" in h and "猫[1…" not in h for h in at_80), at_80
    neko = permute(Request(text=NEKO, variant="qkv"), NEKO, SAKANA)
    japanese = _headers(rendered(lambda c: render_permute(c, neko), width=140))
    assert all("猫[1/3]" in h and "食[1-2/3]" in h and "…" not in h for h in japanese), japanese


def test_flash_weights_labels_whole_where_they_fit() -> None:
    spec = Request(text=CAT + FISH, variant="causal")
    result = flash(build(spec), lesson_config(spec), 4, None)
    headers = _headers(rendered(lambda c: render_flash(c, result), width=160))
    assert "猫[1/3]" in headers[-1] and "…" not in headers[-1], headers


def test_cli_at_80_columns(cli, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("COLUMNS", "80")
    for args in (("kvcache", SENTENCE), ("flash", SENTENCE, "--block", "2"),
                 ("permute", CAT, FISH), ("kvcache", NEKO, "--variant", "multihead", "--heads",
                                          "2", "--precision", "8")):
        res = cli(*args)
        assert res.code == 0, res.err
        _lines(res.out, 80)
    monkeypatch.setenv("COLUMNS", str(MIN_WIDTH))
    for args in (("kvcache", SENTENCE), ("flash", SENTENCE), ("permute", CAT, FISH)):
        res = cli(*args)
        assert res.code == 0, res.err
        _lines(res.out, MIN_WIDTH)
