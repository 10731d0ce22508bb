"""Narrow terminals show numbers (issue 46: at COLUMNS=60 every value of the `heads` table was
`0.…`): a table too wide is shown in parts of whole columns, each with its key columns; and every
command that prints a table of numbers is checked at 40, 60 and 80 columns for a cut number."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from attncli.render.draw.fitted import column_parts
from attncli.render.draw.listing import listing_width
from tests.conftest import ROOT
from tests.llama_fixtures import save_family

TOY = str(ROOT / "samples" / "toy-gpt2")
SENTENCE = "Your journey starts with one step"
# A number cut to fit: digits or a decimal point right before the ellipsis, then a space or
# the line's end ("0.…", "14.5…", "34…"); prose such as "keys 0…i" goes on with a letter.
CUT = re.compile(r"[\d.]…(?=\s|$)", re.MULTILINE)
WIDTHS = (40, 60, 80)


@pytest.mark.parametrize("width", [10, 24, 40, 60, 80, 200])
def test_each_part_fits_and_holds_the_keys_then_every_column_once(width: int) -> None:
    widths = [5, 4, 7, 7, 7, 7, 8, 14, 15, 9]
    parts = column_parts(widths, 2, width)
    assert all(part[:2] == [0, 1] for part in parts)
    assert [k for part in parts for k in part[2:]] == list(range(2, len(widths)))
    for part in parts:  # a part over the width holds one column only: it cannot be split
        assert listing_width([widths[k] for k in part]) <= width or len(part) == 3


def test_a_table_that_fits_is_one_part() -> None:
    assert column_parts([5, 4, 7], 2, 80) == [[0, 1, 2]]


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> str:
    folder = tmp_path_factory.mktemp("narrow") / "llama"
    save_family(folder, "llama", seed=21)
    return str(folder)


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A saved run, for `show`."""
    from attncli.cli.main import execute

    path = tmp_path_factory.mktemp("narrow-show") / "run.json"
    assert execute(["run", SENTENCE, "--variant", "multihead", "--num-heads", "2", "--save-json",
                    str(path), "--json"]) == 0
    return str(path)


def _long(tmp_path: Path) -> str:
    path = tmp_path / "long.txt"
    path.write_text("Tiled attention keeps memory bounded. " * 120, encoding="utf-8")
    return str(path)


COMMANDS = {
    "run causal": ["run", SENTENCE, "--variant", "causal"],
    "run multihead": ["run", SENTENCE, "--variant", "multihead", "--num-heads", "2", "--emb-dim",
                      "16", "--show", "scores,weights,context"],
    "run query": ["run", SENTENCE, "--query", "journey"],
    "run tiled": ["run", "--file", "LONG", "--impl", "tiled", "--variant", "multihead",
                  "--num-heads", "2"],
    "run model": ["run", "The cat sat on the mat", "--model", TOY, "--predict", "3"],
    "explain": ["explain", SENTENCE],
    "explain model": ["explain", "The cat sat on the mat", "--model", TOY, "--predict", "3"],
    "compare": ["compare", SENTENCE],
    "tokens": ["tokens", SENTENCE],
    "heads": ["heads", "--file", f"{TOY}/probe.txt", "--allow-special", "--model", TOY],
    "heads rollout": ["heads", "The cat sat on the mat because it was tired", "--model", TOY,
                      "--measure", "rollout"],
    "generate": ["generate", "the cat", "--model", "LLAMA", "--max-new-tokens", "4"],
    "show": ["show", "SAVED"],
    "permute": ["permute", "the cat eats the fish", "the fish eats the cat"],
    "kvcache": ["kvcache", SENTENCE],
    "flash": ["flash", SENTENCE],
    "doctor": ["doctor"],
    "pull": ["pull"],
    "check": ["check", "samples/my_attention.py:MultiHeadAttention"],  # exits 1: it is wrong
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_no_table_cuts_a_number_at_40_60_or_80_columns(
        cli, name: str, llama: str, saved: str, tmp_path: Path,  # noqa: ANN001
        monkeypatch: pytest.MonkeyPatch) -> None:
    args = [{"LONG": _long(tmp_path), "LLAMA": llama, "SAVED": saved}.get(a, a)
            for a in COMMANDS[name]]
    for width in WIDTHS:
        monkeypatch.setenv("COLUMNS", str(width))
        monkeypatch.chdir(ROOT)
        done = cli(*args)
        assert done.code == (1 if name == "check" else 0), done.err
        assert CUT.findall(done.out) == [], f"{name} at {width} columns:\n{done.out}"


@pytest.mark.process  # scan's worker pool
def test_a_scan_summary_cuts_no_number(cli, tmp_path: Path,  # noqa: ANN001
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    corpus = tmp_path / "docs.txt"
    corpus.write_text("The cat sat on the mat. The cat sat on the mat.\nA b c d a b c d\n",
                      encoding="utf-8")
    out = tmp_path / "out"
    assert cli("scan", str(corpus), "--model", TOY, "--out", str(out), "--workers", "1").code == 0
    for width in WIDTHS:
        monkeypatch.setenv("COLUMNS", str(width))
        shown = cli("show", str(out / "summary.json")).out
        assert "Top heads" in shown and CUT.findall(shown) == [], shown


def test_the_heads_table_at_60_columns_shows_every_measure_whole(cli,  # noqa: ANN001
                                                                  monkeypatch: pytest.MonkeyPatch
                                                                  ) -> None:
    args = ["heads", "--file", f"{TOY}/probe.txt", "--allow-special", "--model", TOY]
    rows = json.loads(cli(*args, "--json").out)["heads"]
    monkeypatch.setenv("COLUMNS", "60")
    out = cli(*args).out
    assert CUT.findall(out) == []
    for row in rows:
        for key in ("entropy", "prev", "first", "self", "distance", "induction"):
            assert re.search(rf"^\s+{row['layer']}\s+{row['head']}\s.*\b{row[key]:.3f}\b", out,
                             re.MULTILINE), (row["layer"], row["head"], key)
    assert all(len(line) <= 60 for line in out.splitlines())
