"""`scan --effect`: the heads table's effect column is `heads --effect` on each document (one
place computes it: models/heads.head_effects), the summary's effect each head's mean over the
documents; without --effect the table has no such column; an encoder is refused before --out
is made."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import ROOT
from tests.encoder_fixtures import save_encoder
from tests.tolerance import assert_near

TOY = str(ROOT / "samples" / "toy-gpt2")
DOCS = ["The cat sat on the mat because it was tired",
        "one two three four one two three four one two three four"]


def _rows(out: Path) -> pa.Table:
    return pa.concat_tables([pq.read_table(p) for p in sorted((out / "heads").glob("part-*"))])


@pytest.mark.process
def test_the_effect_column_is_heads_effect_on_each_document(cli, tmp_path: Path) -> None:  # noqa: ANN001
    corpus = tmp_path / "docs.txt"
    corpus.write_text("\n".join(DOCS) + "\n", encoding="utf-8")
    run = cli("scan", str(corpus), "--model", TOY, "--out", str(tmp_path / "out"),
              "--workers", "1", "--effect", "--json")
    assert run.code == 0, run.err
    rows = _rows(tmp_path / "out").to_pylist()
    assert rows and all(isinstance(r["effect"], float) for r in rows)
    for number, text in enumerate(DOCS, start=1):
        heads = cli("heads", text, "--model", TOY, "--effect", "--json")
        assert heads.code == 0, heads.err
        mine = {(r["layer"], r["head"]): r["effect"] for r in rows
                if r["document"] == f"docs.txt:{number}"}
        want = {(r["layer"], r["head"]): r["effect"] for r in heads.json()["heads"]}
        assert mine.keys() == want.keys()
        # Within the house tolerance: the scan's worker runs one torch thread, this process
        # as many as the test run gives it, and two thread counts split a product's sums apart.
        assert_near([mine[k] for k in sorted(want)], [want[k] for k in sorted(want)])
    summary = run.json()
    for head in summary["heads"]:
        both = [r["effect"] for r in rows if (r["layer"], r["head"]) == (head["layer"],
                                                                          head["head"])]
        assert_near(head["effect"], sum(both) / len(both))


def test_without_effect_the_table_has_no_effect_column(cli, tmp_path: Path) -> None:  # noqa: ANN001
    corpus = tmp_path / "docs.txt"
    corpus.write_text(DOCS[0] + "\n", encoding="utf-8")
    run = cli("scan", str(corpus), "--model", TOY, "--out", str(tmp_path / "out"),
              "--workers", "1", "--json")
    assert run.code == 0, run.err
    assert "effect" not in _rows(tmp_path / "out").column_names
    assert "effect" not in run.json()["heads"][0]
    again = cli("scan", str(corpus), "--model", TOY, "--out", str(tmp_path / "out"),
                "--workers", "1", "--effect")
    again.assert_usage_error("holds a scan with other settings (effect)")


def test_an_encoder_is_refused_before_out_is_made(cli, tmp_path: Path) -> None:  # noqa: ANN001
    save_encoder(tmp_path / "bert", "bert", seed=3)
    corpus = tmp_path / "docs.txt"
    corpus.write_text(DOCS[0] + "\n", encoding="utf-8")
    run = cli("scan", str(corpus), "--model", str(tmp_path / "bert"), "--out",
              str(tmp_path / "out"), "--effect")
    run.assert_usage_error("BERT-style encoder models have no next-token logits")
    assert not (tmp_path / "out").exists()
