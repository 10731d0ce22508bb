"""`attncli show` of everything attncli writes: each command's real --json, shown again with the
same tokens and numbers (tables, --json, --save page.html and .svg), or refused by name."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import JOURNEY, SENTENCE

TOY = "samples/toy-gpt2"
NAIVE = [
    ("run", SENTENCE),
    ("run", SENTENCE, "--variant", "multihead", "--num-heads", "2", "--query", "journey"),
    ("run", SENTENCE, "--show", "scores,softmax,context"),
    ("run", SENTENCE, "--show", "scaled"),
    ("run", SENTENCE, "--variant", "multihead", "--show", "heads_context", "--head", "1"),
    ("run", SENTENCE, "--rows", "1:4", "--cols", "0:3"),
    ("run", "--inputs", str(JOURNEY), "--variant", "simple", "--query", "2"),
    ("run", SENTENCE, "--model", TOY),
    ("run", SENTENCE, "--model", TOY, "--layer", "1", "--query", "2", "--show", "scores"),
    ("compare", SENTENCE),
    ("compare", SENTENCE, "--variants", "causal,multihead"),
]
TILED = [
    ("run", SENTENCE, "--impl", "tiled"),
    ("run", SENTENCE, "--impl", "tiled", "--query", "3"),
    ("run", SENTENCE, "--impl", "tiled", "--rows", "1:4", "--cols", "0:3"),
    ("run", SENTENCE, "--impl", "tiled", "--variant", "multihead", "--num-heads", "2"),
]
EXPLAIN = [
    ("explain", SENTENCE),
    ("explain", SENTENCE, "--variant", "multihead", "--query", "2"),
    ("explain", SENTENCE, "--model", TOY),
]


def _ids(args: tuple[str, ...]) -> str:
    return " ".join(a for a in args if a not in (SENTENCE, str(JOURNEY)))


def _saved(cli, tmp_path: Path, args: tuple[str, ...]) -> tuple[Path, Any]:  # noqa: ANN001
    made = cli(*args, "--json")
    assert made.code == 0, made.err
    path = tmp_path / "saved.json"
    path.write_text(made.out, encoding="utf-8")
    return path, json.loads(made.out)


def _page_doc(page: Path) -> Any:
    """The JSON document a saved page holds."""
    text = page.read_text(encoding="utf-8")
    found = re.search(r'<script type="application/json" id="attncli-data">(.*?)</script>', text,
                      re.S)
    assert found is not None
    return json.loads(found.group(1))


def _check_outputs(cli, path: Path, doc: Any, tmp_path: Path,  # noqa: ANN001
                   drawn: str = "journey") -> None:
    """show --json gives the same document; the page holds it; the SVG draws it."""
    again = cli("show", str(path), "--json")
    assert again.code == 0, again.err
    assert again.json() == doc
    page, svg = tmp_path / "page.html", tmp_path / "view.svg"
    assert cli("show", str(path), "--save", str(page)).code == 0
    assert _page_doc(page) == doc
    assert cli("show", str(path), "--save", str(svg)).code == 0
    assert drawn in svg.read_text(encoding="utf-8")


@pytest.mark.parametrize("args", NAIVE, ids=_ids)
def test_a_naive_run_is_drawn_as_it_was(cli, tmp_path: Path, args: tuple[str, ...]) -> None:  # noqa: ANN001
    path, doc = _saved(cli, tmp_path, args)
    shown = cli("show", str(path))
    assert shown.code == 0, shown.err
    assert shown.out == cli(*args).out
    _check_outputs(cli, path, doc, tmp_path)


@pytest.mark.parametrize("args", TILED, ids=_ids)
def test_a_tiled_run_shows_its_summary_top_keys_and_window(cli, tmp_path: Path,  # noqa: ANN001
                                                          args: tuple[str, ...]) -> None:
    path, doc = _saved(cli, tmp_path, args)
    shown = cli("show", str(path))
    assert shown.code == 0, shown.err
    # What the run printed, less the pooled heatmaps its JSON does not hold.
    assert set(shown.out.splitlines()) <= set(cli(*args).out.splitlines())
    assert "Top 5 keys per query" in shown.out and "Summary per head" in shown.out
    first = doc["summary"][0]
    assert f"{first['entropy']:.3f}" in shown.out
    if "--rows" in args:
        assert "rows 1:4 × columns 0:3" in shown.out
    _check_outputs(cli, path, doc, tmp_path)


@pytest.mark.parametrize("args", EXPLAIN, ids=_ids)
def test_explain_json_shows_every_stage(cli, tmp_path: Path, args: tuple[str, ...],  # noqa: ANN001
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    path, doc = _saved(cli, tmp_path, args)
    monkeypatch.setenv("COLUMNS", "300")  # every dimension in a table, at 4 decimals
    shown = cli("show", str(path), "--draw", "table", "--cols", "0:3")
    assert shown.code == 0, shown.err
    for name, data in doc["stages"].items():
        if data is not None and name != "inputs":
            cells = data[-1][-1] if isinstance(data[-1][-1], list) else data[-1]
            # 4 decimals, or 2 where a table of 64 dimensions needs them to fit
            assert all(f"{v:.4f}" in shown.out or f"{v:.2f}" in shown.out
                       for v in cells[:3] if v is not None), name
    _check_outputs(cli, path, doc, tmp_path)


@pytest.mark.parametrize("args", [("heads", SENTENCE, "--model", TOY),
                                  # its probe's ids are sized by the fields before them
                                  ("heads", "--model", TOY, "--probe", "induction",
                                   "--probe-length", "5")], ids=["text", "probe"])
def test_heads_json_shows_the_measures(cli, tmp_path: Path, args: tuple[str, ...]) -> None:  # noqa: ANN001
    path, doc = _saved(cli, tmp_path, args)
    shown = cli("show", str(path))
    assert shown.code == 0, shown.err
    rows = [line for line in shown.out.splitlines() if re.match(r"\s*\d+\s+\d+\s+\d", line)]
    assert len(rows) == len(doc["heads"]) == 12
    assert set(rows) <= set(cli(*args).out.splitlines())
    _check_outputs(cli, path, doc, tmp_path, drawn="entropy")
    cli("show", str(path), "--head", "1").assert_usage_error("--head does not apply to `heads`")


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> str:
    from tests.llama_fixtures import save_family

    folder = tmp_path_factory.mktemp("show-llama") / "llama"
    save_family(folder, "llama", seed=11)
    return str(folder)


@pytest.mark.parametrize("extra", [(), ("--layer", "-1", "--head", "3"), ("--impl", "tiled")],
                         ids=["all", "head", "tiled"])
def test_a_llama_run_keeps_its_family(cli, llama: str, tmp_path: Path,  # noqa: ANN001
                                      extra: tuple[str, ...]) -> None:
    args = ("run", SENTENCE, "--model", llama, *extra)
    path, doc = _saved(cli, tmp_path, args)
    shown = cli("show", str(path))
    assert shown.code == 0, shown.err
    if "tiled" not in extra:
        assert "llama layer" in shown.out and "kv head" in shown.out
    assert set(shown.out.splitlines()) <= set(cli(*args).out.splitlines())
    again = cli("show", str(path), "--json").json()
    assert again == doc


def test_llama_heads_and_explain(cli, llama: str, tmp_path: Path) -> None:  # noqa: ANN001
    for args in (("heads", SENTENCE, "--model", llama), ("explain", SENTENCE, "--model", llama)):
        path, doc = _saved(cli, tmp_path, args)
        assert cli("show", str(path)).code == 0
        assert cli("show", str(path), "--json").json() == doc



@pytest.mark.parametrize(("change", "message"), [
    (lambda heads: heads[0].update(effect="x"), 'heads[0].effect is "x", not a finite number'),
    (lambda heads: heads[1].pop("effect"), "heads[1] has no 'effect'"),
    # a grouped model's row without its kv head was a KeyError in its bounds check
    (lambda heads: heads[1].pop("kv_head"), "heads[1] has no 'kv_head'"),
    (lambda heads: heads[0].update(kv_head=9), "heads[0].kv_head is 9, outside 0 to 1")])
def test_a_heads_effect_is_read_as_a_number_in_every_row(cli, llama: str, tmp_path: Path,  # noqa: ANN001
                                                          change: Any, message: str) -> None:
    """--effect's column: a number in every row or in none (a string once reached the table's
    colour ranges as a traceback); so is a grouped model's kv head."""
    path, doc = _saved(cli, tmp_path, ("heads", SENTENCE, "--model", llama, "--effect"))
    assert cli("show", str(path), "--json").json() == doc
    change(doc["heads"])
    path.write_text(json.dumps(doc), encoding="utf-8")
    cli("show", str(path)).assert_usage_error(message)


def test_run_predict_keeps_its_predictions(cli, llama: str, tmp_path: Path) -> None:  # noqa: ANN001
    """--predict's next tokens are read back (they were once dropped): the same JSON, the same
    table, and a broken entry refused in one line."""
    args = ("run", SENTENCE, "--model", llama, "--predict", "2")
    path, doc = _saved(cli, tmp_path, args)
    assert cli("show", str(path), "--json").json() == doc
    assert cli("show", str(path)).out == cli(*args).out
    for change, message in (
            (lambda p: p[0].update(index=10**6), "predictions[0].index is 1000000, outside"),
            (lambda p: p[1]["top"][0].update(prob="x"), 'predictions[1].top[0].prob is "x"'),
            (lambda p: p[1].update(lens=[]), "predictions[1] and predictions[0] differ")):
        broken = json.loads(json.dumps(doc))
        change(broken["predictions"])
        path.write_text(json.dumps(broken), encoding="utf-8")
        cli("show", str(path)).assert_usage_error(message)

UNDRAWN = [
    (("cost", "--max-tokens", "256"), "show cannot draw a `cost` lesson's JSON"),
    (("flash", SENTENCE), "show cannot draw a `flash` lesson's JSON"),
    (("kvcache", SENTENCE), "show cannot draw a `kvcache` lesson's JSON"),
    (("permute", "the dog bit the man", "the man bit the dog"),
     "show cannot draw a `permute` lesson's JSON"),
    (("tokens", SENTENCE), "show cannot draw `tokens`' JSON"),
    (("models",), "show cannot draw `models`' JSON"),
    # these two were "no weights in this JSON: expected attncli's output", which they are
    (("generate", SENTENCE, "--model", "samples/toy-gpt2", "--show-template"),
     "show cannot draw `generate --show-template`'s JSON: it holds tokens, no attention weights; "
     "run `attncli generate TEXT --model M --show-template` to see its text"),
    (("config", "list"), "show cannot draw `config list`'s JSON"),
]


@pytest.mark.parametrize(("args", "message"), UNDRAWN, ids=lambda a: a[0] if isinstance(a, tuple)
                         else "")
def test_what_show_cannot_draw_is_refused_by_name(cli, tmp_path: Path,  # noqa: ANN001
                                                  args: tuple[str, ...], message: str) -> None:
    path, _ = _saved(cli, tmp_path, args)
    cli("show", str(path)).assert_usage_error(message)


def test_the_tiled_corner_is_the_long_paths(cli, tmp_path: Path) -> None:  # noqa: ANN001
    from attncli.long.run import DEFAULT_WINDOW
    from attncli.saved.run import CORNER

    assert CORNER == DEFAULT_WINDOW
    path, _ = _saved(cli, tmp_path, ("run", SENTENCE, "--impl", "tiled", "--rows", "1:4"))
    cli("show", str(path), "--rows", "0:2").assert_usage_error("outside the window")
    shown = cli("show", str(path), "--rows", "2:3", "--cols", "0:2")
    assert shown.code == 0 and "rows 2:3 × columns 0:2" in shown.out


@pytest.mark.parametrize("stages", [-1, 1e308, True, "scores"])
def test_stages_that_are_not_an_object_are_one_line(cli, tmp_path: Path,  # noqa: ANN001
                                                     stages: Any) -> None:
    # len() of the saved stages sized the run before their type was checked: a traceback
    path, doc = _saved(cli, tmp_path, ("explain", SENTENCE))
    doc["stages"] = stages
    path.write_text(json.dumps(doc))
    cli("show", str(path)).assert_usage_error("saved file: stages is")
