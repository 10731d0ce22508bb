"""`attncli show`: saved JSON back to the very pictures, bare weights, stdin, bad files."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import JOURNEY, SENTENCE, attncli_process

RUNS = [
    ("run", SENTENCE, "--variant", "causal"),
    ("run", SENTENCE, "--variant", "multihead", "--num-heads", "2", "--query", "journey"),
    ("run", "--inputs", str(JOURNEY), "--variant", "simple", "--rows", "1:4", "--cols", "0:3"),
    ("run", SENTENCE, "--show", "scores,softmax,context"),
    ("compare", SENTENCE),
]


@pytest.mark.parametrize("args", RUNS, ids=lambda a: " ".join(a[2:]) or a[0])
def test_show_prints_what_the_command_printed(cli, tmp_path: Path, args) -> None:  # noqa: ANN001
    saved = tmp_path / "out.json"
    saved.write_text(cli(*args, "--json").out)
    shown = cli("show", str(saved))
    assert shown.code == 0, shown.err
    assert shown.out == cli(*args).out


def test_show_json_round_trips(cli, tmp_path: Path) -> None:  # noqa: ANN001
    doc = cli("run", SENTENCE, "--variant", "multihead", "--json").out
    saved = tmp_path / "run.json"
    saved.write_text(doc)
    assert cli("show", str(saved), "--json").out == doc


def test_bare_weights_and_tokens_weights(cli, tmp_path: Path) -> None:  # noqa: ANN001
    bare = tmp_path / "bare.json"
    bare.write_text("[[0.25, 0.75], [0.6, 0.4]]")
    res = cli("show", str(bare), "--query", "0")
    assert res.code == 0 and "0.7500" in res.out and "2 tokens · 1 head" in res.out
    assert "What query 0" in res.out
    pair = tmp_path / "pair.json"
    pair.write_text('{"tokens": ["cat", "sat"], "weights": [[[1, 0], [0.5, 0.5]], '
                    '[[0.9, 0.1], [0.2, 0.8]]]}')
    res = cli("show", str(pair), "--head", "1", "--draw", "heatmap")
    assert res.code == 0 and "head 1 of 2" in res.out and "cat" in res.out
    assert cli("show", str(pair), "--json").json()["weights"][1][1] == [0.2, 0.8]


def test_stdin_dash() -> None:
    res = attncli_process("show", "-", input=b"[[0.5, 0.5], [0.1, 0.9]]",
                          env={"NO_COLOR": "1", "COLUMNS": "80"})
    assert res.returncode == 0 and b"0.9000" in res.stdout


BAD = [
    ("", "is not valid JSON"),
    ("[[1, 2], [3]]", "row 1 has 1 values, expected 2"),
    ('[[1, "x"], [0, 1]]', 'weights[0][1] is "x"'),
    ("[[NaN]]", "NaN"),
    ('{"a": 1}', "no weights in this JSON"),
    ('{"tokens": ["a"], "weights": [[1, 0], [0, 1]]}', "tokens has 1 items, expected 2"),
    ('{"variant": "causal"}', "not a run's output"),
    ("[[[1, 0], [0, 1]], [[1]]]", "head 1"),
    ("[]", "must be a [N][N] or [H][N][N]"),
]


@pytest.mark.parametrize(("content", "message"), BAD)
def test_bad_files_exit_2_with_one_line(cli, tmp_path: Path, content: str,  # noqa: ANN001
                                        message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    cli("show", str(path)).assert_usage_error(message)


def test_missing_file(cli, tmp_path: Path) -> None:  # noqa: ANN001
    cli("show", str(tmp_path / "nope.json")).assert_usage_error("does not exist")
