"""`attncli run` on long inputs: the tiled path's JSON, its refusals, and its terminal view."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import SENTENCE
from tests.tolerance import assert_near

TEXT = "Every window of the weights is exact. " * 40  # 321 tokens


def square_matrices(value: Any, n: int) -> list[str]:
    """Where in a JSON document a list holds n lists of n items."""
    found: list[str] = []

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            for key, child in node.items():
                walk(child, f"{path}.{key}")
        elif isinstance(node, list):
            if len(node) == n and all(isinstance(row, list) and len(row) == n for row in node):
                found.append(path)
            for k, child in enumerate(node):
                walk(child, f"{path}[{k}]")

    walk(value, "$")
    return found


def test_top_keys_old_spelling_is_taken_with_a_note(cli) -> None:  # noqa: ANN001
    """--top-k was the tiled path's keys kept (generate's --top-k samples): accepted, hidden,
    with one line on stderr."""
    new = cli("run", "one two three", "--impl", "tiled", "--top-keys", "2", "--json")
    old = cli("run", "one two three", "--impl", "tiled", "--top-k", "2", "--json")
    assert new.code == old.code == 0 and old.json() == new.json()
    assert new.json()["config"]["top_k"] == 2
    assert (new.err, old.err) == ("", "attncli: --top-k is now --top-keys (the old spelling "
                                  "goes in the next release)\n")
    assert "--top-k " not in cli("run", "--help").out


def test_tiled_json_holds_no_n_by_n_matrix(cli) -> None:  # noqa: ANN001
    res = cli("run", TEXT, "--impl", "tiled", "--variant", "multihead", "--num-heads", "2",
              "--json")
    assert res.code == 0 and res.err == ""
    doc = res.json()
    n = len(doc["tokens"])
    assert n == 321
    assert square_matrices(doc, n) == []
    assert list(doc) == ["kind", "variant", "config", "tokens", "weights", "context", "stats",
                         "summary", "window"]
    assert doc["config"]["impl"] == "tiled" and doc["config"]["top_k"] == 5
    assert doc["config"]["pool"] == "max"
    assert doc["window"] == {"rows": [0, 64], "cols": [0, 64]}
    assert [len(doc["weights"]), len(doc["weights"][0]), len(doc["weights"][0][0])] == [2, 64, 64]
    assert [len(doc["context"]), len(doc["context"][0])] == [n, 8]
    assert [len(doc["stats"]["lse"]), len(doc["stats"]["lse"][0])] == [2, n]
    assert len(doc["stats"]["top_k"]["index"][1][n - 1]) == 5
    assert set(doc["summary"][1]) == {"head", "entropy", "first", "prev", "self",
                                      "top_k_mass", "distance"}
    # The same run asked for the whole matrix has it.
    full = cli("run", TEXT, "--impl", "tiled", "--variant", "multihead", "--num-heads", "2",
               "--json", "--full").json()
    assert square_matrices(full, n) == ["$.weights[0]", "$.weights[1]"]


def test_full_equals_the_naive_weights(cli) -> None:  # noqa: ANN001
    naive = cli("run", SENTENCE, "--impl", "naive", "--show", "masked", "--json").json()
    tiled = cli("run", SENTENCE, "--impl", "tiled", "--full", "--json").json()
    assert naive["config"]["impl"] == "naive" and tiled["config"]["impl"] == "tiled"
    want = [[[None if m is None else w for w, m in zip(row, mrow, strict=True)]
             for row, mrow in zip(head, mhead, strict=True)]
            for head, mhead in zip(naive["weights"], naive["stages"]["masked"], strict=True)]
    assert tiled["window"] == {"rows": [0, 6], "cols": [0, 6]}
    for got_row, want_row in zip(tiled["weights"][0], want[0], strict=True):
        assert_near(got_row, want_row, equal_nan=True)  # None where masked, on both sides


BAD = [
    (("run", "x", "--impl", "flash"), "'flash' is not one of"),
    (("run", "x", "--top-keys", "-1"), "--top-keys"),
    (("run", "x", "--pool", "nope"), "'nope' is not one of"),
    (("run", "x", "--full"), "--full puts the whole weights matrix in the JSON: use it with "
     "--json or --save-json"),
    (("explain", "x", "--full"), "No such option: --full"),
    (("explain", "x", "--impl", "tiled"), "--impl tiled applies to `attncli run` only"),
    (("compare", "x", "--impl", "tiled"), "--impl tiled applies to `attncli run` only"),
    (("run", "x", "--model", "gpt2", "--impl", "tiled"), "--impl tiled does not apply to a "
     "GPT-2 checkpoint"),
    (("run", "x y", "--impl", "tiled", "--dropout", "0.1"), "use --impl naive to apply it"),
    (("run", "x y", "--impl", "tiled", "--show", "scores"), "--show picks stages of the naive"),
    (("run", "x y", "--impl", "tiled", "--rows", "5:9"), "--rows 5:9 is out of range"),
]


@pytest.mark.parametrize(("args", "message"), BAD)
def test_bad_input_one_line_exit_2(cli, args: tuple[str, ...], message: str) -> None:  # noqa: ANN001
    res = cli(*args)
    assert res.code == 2, res.err
    assert res.out == ""
    assert res.err.startswith("attncli: error: ") and res.err.count("\n") == 1
    assert message in res.err


def test_explain_refuses_what_auto_would_tile(cli) -> None:  # noqa: ANN001
    words = " ".join(["word"] * 530)
    res = cli("explain", words, "--variant", "multihead", "--num-heads", "12", "--d-out", "12")
    assert res.code == 2
    assert res.err == (
        "attncli: error: 530 tokens × 12 head(s) need about 283 MB as full N × N matrices, more "
        "than --impl auto allows (256 MiB); `attncli run` shows long inputs, or force this with "
        "--impl naive\n")


def test_terminal_view_fits_80_columns_without_colour(cli, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("COLUMNS", "80")
    res = cli("run", TEXT, "--impl", "tiled", "--variant", "multihead", "--num-heads", "2",
              "--head", "1", "--rows", "100:104", "--cols", "98:104", "--query", "150")
    assert res.code == 0 and res.err == ""
    lines = res.out.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "\x1b[" not in res.out
    for expected in ("multi-head attention · 321 tokens", "tiled path: context, log-sum-exp",
                     "Summary per head", "Attention weights, head 1 of 2", "0–", "█",
                     "Top 5 keys per query — head 1 of 2", "rows 100:104 × columns 98:104",
                     "What query 150"):
        assert expected in res.out, expected
    assert "head 0 of 2" not in res.out


def test_a_short_run_imports_nothing_of_the_tiled_path() -> None:
    import subprocess
    import sys

    code = ("import sys; from attncli.cli.main import execute; execute(sys.argv[1:]); "
            "print(sorted(m for m in sys.modules if m in ('attncli.long.run', "
            "'attncli.long.pooling', "
            "'attncli.render.long', 'attncli.cli.progress', 'rich.progress')))")
    proc = subprocess.run([sys.executable, "-c", code, "run", SENTENCE], capture_output=True,
                          text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr
    # The progress bar's module is light and always imported; its Rich bar only on a terminal.
    assert proc.stdout.strip().splitlines()[-1] == "['attncli.cli.progress']"
