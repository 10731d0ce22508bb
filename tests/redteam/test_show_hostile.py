"""`attncli show` of hostile files: labels that would drive a terminal, lone surrogates, real
documents with parts dropped, retyped, resized or made huge. Exit 0, or exit 2 with one line."""

from __future__ import annotations

import json
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import SENTENCE
from tests.redteam.test_redteam import shell
from tests.redteam.test_redteam_properties import PROPERTY, check_outcome, run_cli

LABELS = ["\x1b[31mred", "\x07bel\x9b2J", "[bold]x[/bold]\nnl", "\ud800lone"]
HOSTILE = json.dumps({"tokens": LABELS, "weights": [[1, 0, 0, 0], [0.5, 0.5, 0, 0],
                                                    [0.3, 0.3, 0.4, 0], [0.25] * 4]})


def test_labels_reach_no_terminal_raw(tmp_path: Path) -> None:
    (tmp_path / "h.json").write_text(HOSTILE, encoding="ascii")  # \ud800 stays escaped
    for view in ("table", "heatmap"):
        proc = shell(f"attncli show h.json --query 3 --view {view}", tmp_path)
        assert proc.returncode == 0, proc.stderr
        for raw in (b"\x1b", b"\x07", b"\xc2\x9b", b"\xed\xa0\x80"):
            assert raw not in proc.stdout
    out = shell("attncli show h.json --draw table", tmp_path).stdout.decode()
    assert "\\x1b[31mred" in out and "\\x07bel\\x9b2J" in out and "\\ud800lone" in out
    assert "[bold]x[/bold]" in out  # markup shown as text


def test_labels_escaped_in_json_page_svg_and_text(tmp_path: Path) -> None:
    (tmp_path / "h.json").write_text(HOSTILE, encoding="ascii")
    proc = shell("attncli show h.json --json", tmp_path)
    assert proc.returncode == 0, proc.stderr
    texts = [t["text"] for t in json.loads(proc.stdout)["tokens"]]
    assert texts == ["\\x1b[31mred", "\\x07bel\\x9b2J", "[bold]x[/bold]\\nnl", "\\ud800lone"]
    for name in ("p.html", "p.svg", "p.txt"):
        proc = shell(f"attncli show h.json --save {name}", tmp_path)
        assert proc.returncode == 0, proc.stderr
        saved = (tmp_path / name).read_bytes()
        assert b"\x1b" not in saved and b"\x07" not in saved and b"\xc2\x9b" not in saved
        assert b"ud800lone" in saved


def json_docs(runs: list[tuple[str, ...]]) -> list[Any]:
    """The --json documents of attncli runs (each must succeed), to mutate."""
    docs = []
    for args in runs:
        code, out, err = run_cli(*args, "--json")
        assert code == 0, err
        docs.append(json.loads(out))
    return docs


@cache
def docs() -> list[Any]:
    """The real documents to mutate, made on first use: at import they would be made by every
    worker that collects this module, whether or not it runs these tests."""
    return json_docs([("run", SENTENCE, "--variant", "multihead", "--query", "2", "--show",
                       "scores,weights"),
                      ("run", SENTENCE, "--impl", "tiled", "--rows", "1:4"),
                      ("compare", SENTENCE, "--variants", "causal,qkv"),
                      ("heads", SENTENCE, "--model", "samples/toy-gpt2"),
                      ("explain", SENTENCE, "--model", "samples/toy-gpt2")])


ODD = st.one_of(st.none(), st.booleans(), st.just(""), st.just("\x1b[2J"), st.just([]),
                st.just({}), st.just([[[]]]), st.just(-1), st.just(2**62), st.just(-2**62),
                st.just(1e308), st.just(-1e308), st.just(0.5), st.just([0] * 7),
                st.just({"a": [1, "x"]}), st.just(["\ud800"]))


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a document, as a path of keys and indices (lists: their first items)."""
    found = [prefix]
    if isinstance(doc, dict):
        for key, value in doc.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(doc, list):
        for i, value in enumerate(doc[:2]):
            found += _paths(value, (*prefix, i))
    return found


def _mutate(doc: Any, path: tuple[Any, ...], how: str, value: Any) -> Any:
    """A copy of doc with the part at path dropped, replaced, lengthened or shortened."""
    doc = json.loads(json.dumps(doc))
    if not path:
        return value
    parent = doc
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    if how == "drop":
        del parent[last]
    elif how == "grow" and isinstance(parent[last], list):
        parent[last] = parent[last] + parent[last][:1]
    elif how == "shrink" and isinstance(parent[last], list):
        parent[last] = parent[last][:-1]
    else:
        parent[last] = value
    return doc


@PROPERTY
@given(st.data())
def test_mutated_documents_exit_0_or_2_in_one_line(data: st.DataObject) -> None:
    doc = data.draw(st.sampled_from(docs()))
    for _ in range(data.draw(st.integers(1, 3))):
        places = _paths(doc)
        path = data.draw(st.sampled_from(places))
        how = data.draw(st.sampled_from(["drop", "set", "grow", "shrink"]))
        doc = _mutate(doc, path, how, data.draw(ODD))
    args = data.draw(st.sampled_from([(), ("--json",), ("--draw", "heatmap"), ("--head", "1"),
                                      ("--query", "1"), ("--show", "scores")]))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "m.json"
        path.write_text(json.dumps(doc), encoding="ascii")
        code, out, err = run_cli("show", str(path), *args)
        check_outcome(code, out, err, "--json" in args)
        if code == 0:
            page = Path(folder) / "m.html"
            code, out, err = run_cli("show", str(path), "--save", str(page))
            check_outcome(code, out, err, False)


@pytest.mark.parametrize("claim", [
    {"config": {"num_tokens": 10**15}},
    {"config": {"heads": 2**40}},
    {"window": {"rows": [0, 10**12], "cols": [0, 6]}},
    {"window": {"rows": [-3, 2], "cols": [0, 6]}},
    {"summary": [{"head": 0}] * 100000},
], ids=["tokens", "heads", "window", "negative", "summary"])
def test_huge_claims_are_refused_before_work(tmp_path: Path, claim: dict[str, Any]) -> None:
    doc = json.loads(json.dumps(docs()[1]))  # the tiled run
    for key, value in claim.items():
        doc[key] = {**doc[key], **value} if isinstance(value, dict) else value
    (tmp_path / "big.json").write_text(json.dumps(doc), encoding="ascii")
    proc = shell("attncli show big.json", tmp_path)  # under RLIMIT_AS, in a child
    assert proc.returncode == 2 and proc.stdout == b"", proc.stderr
    assert proc.stderr.count(b"\n") == 1 and b"Traceback" not in proc.stderr


def test_a_huge_bare_matrix_is_refused_before_its_copies(tmp_path: Path) -> None:
    size = 2400  # 5.8M cells: 23 MB of JSON, its copies past the child's 3 GiB address space
    row = "[" + ",".join(["0"] * size) + "]"
    (tmp_path / "big.json").write_text("[" + ",".join([row] * size) + "]", encoding="ascii")
    proc = shell("attncli show big.json --json", tmp_path)
    assert proc.returncode in (0, 2) and b"Traceback" not in proc.stderr, proc.stderr
    if proc.returncode == 2:
        assert proc.stderr.count(b"\n") == 1
