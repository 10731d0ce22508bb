"""--rows/--cols windows, --show and --variants lists, and --query, parsed and checked."""

from __future__ import annotations

import pytest

from attncli.cli.requests import display_of
from attncli.core.display import (
    View,
    Window,
    parse_names,
    parse_stages,
    parse_window,
    parse_windows,
    resolve_query,
)
from attncli.core.inputs import InputVectors
from attncli.core.request import Extract, Request
from attncli.core.result import STAGES
from attncli.errors import AttnCliError
from attncli.long.path import run

LABELS = ["Your", " journey", " the", " the", "the", "x"]


@pytest.mark.parametrize(("text", "size", "expected"), [
    ("0:3", 6, (0, 3)), ("2:", 6, (2, 6)), (":4", 6, (0, 4)), (":", 6, (0, 6)),
    ("-2:", 6, (4, 6)), (":-1", 6, (0, 5)), ("3", 6, (3, 4)), ("-1", 6, (5, 6)),
    (" 1 : 5 ", 6, (1, 5)), ("0:6", 6, (0, 6)), ("-6:", 6, (0, 6)),
])
def test_windows_resolve_like_slices(text: str, size: int, expected: tuple[int, int]) -> None:
    assert parse_window(text, "--rows").resolve(size) == expected
    assert list(range(size))[slice(*expected)] == list(range(*expected))


@pytest.mark.parametrize(("text", "message"), [
    ("a:b", "is not a window"), ("1:2:3", "is not a window"), ("1.5:", "is not a window"),
    ("", "is empty"), ("  ", "is empty"), ("０:2", "is not a window"), ("1_0:", "is not a window"),
    ("²:3", "is not a window"), ("0:--3", "is not a window"),
])
def test_bad_window_syntax(text: str, message: str) -> None:
    with pytest.raises(AttnCliError, match=message):
        parse_window(text, "--cols")


@pytest.mark.parametrize(("text", "message"), [
    ("0:7", r"--rows 0:7 is out of range: this run has 6 tokens \(indices 0 to 5"),
    ("-7:", "out of range"), ("4:2", "selects nothing"), ("3:3", "selects nothing"),
    ("6", "out of range"),
])
def test_empty_or_out_of_range_windows(text: str, message: str) -> None:
    with pytest.raises(AttnCliError, match=message):
        parse_window(text, "--rows").resolve(6)


def test_a_window_of_layers_names_layers() -> None:
    with pytest.raises(AttnCliError, match=r"--layers 0:9 is out of range: this run has 4 layers"):
        parse_window("0:9", "--layers").resolve(4, "layers")
    assert parse_window("-1:", "--layers").resolve(4, "layers") == (3, 4)


def test_window_text_is_normalised() -> None:
    assert Window("--rows", None, 5).text() == ":5"
    assert Window("--rows", 2, None).text() == "2:"


def test_parse_names() -> None:
    assert parse_names("scores, weights,context", STAGES, "--show") == (
        "scores", "weights", "context")
    for text, message in [("nope", "unknown name 'nope'"), ("", "comma-separated list"),
                          ("scores,", "comma-separated list"), ("scores,scores", "more than once")]:
        with pytest.raises(AttnCliError, match=message):
            parse_names(text, STAGES, "--show")


@pytest.mark.parametrize(("spec", "index"), [
    ("0", 0), ("5", 5), ("journey", 1), (" journey", 1), ("Your", 0), ("x", 5),
])
def test_query_by_index_or_unique_label(spec: str, index: int) -> None:
    assert resolve_query(spec, LABELS) == index


@pytest.mark.parametrize(("spec", "message"), [
    ("6", r"--query 6 is out of range: this run has 6 tokens, numbered 0 to 5"),
    ("-1", "out of range"),
    ("the", r"--query 'the' matches 3 tokens: 2 ' the', 3 ' the', 4 'the'; give the index"),
    (" the", "matches 2 tokens"),
    ("step", r"matches no token; the tokens are: 0 'Your', 1 ' journey'"),
])
def test_bad_queries(spec: str, message: str) -> None:
    with pytest.raises(AttnCliError, match=message):
        resolve_query(spec, LABELS)


def test_resolve_against_a_result() -> None:
    vectors = InputVectors(labels=LABELS, vectors=[[float(i), 1.0] for i in range(6)])
    rows, cols = parse_windows("1:3", "-2:")
    stages = parse_stages("scores,weights", STAGES)
    result = run(Request(inputs=vectors, variant="qkv"),
                 Extract(stages=stages, rows=rows, cols=cols, query="journey"))
    display = display_of(result, 4, View.auto, rows, cols, stages)
    assert (display.rows, display.cols, result.query and result.query.index) == ((1, 3), (4, 6), 1)
    assert display.stages == ("scores", "weights") and list(result.stages) == list(stages or ())
    assert result.window == {"rows": [1, 3], "cols": [4, 6]}
    assert run(Request(inputs=vectors, variant="qkv")).window is None
    with pytest.raises(AttnCliError, match=r"--show masked: this qkv run has no masked stage; "
                                           "it has inputs, queries"):
        run(Request(inputs=vectors, variant="qkv"), Extract(stages=("masked",)))
    with pytest.raises(AttnCliError, match=r"dropped needs --dropout > 0"):
        run(Request(inputs=vectors, variant="qkv"), Extract(stages=("dropped",)))
