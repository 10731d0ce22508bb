"""Text sources and --inputs JSON validation."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from attncli.core.inputs import load_inputs, read_text
from attncli.errors import AttnCliError


class FakeTTY(io.BytesIO):
    def isatty(self) -> bool:
        return True


def test_text_stdin_and_file(tmp_path: Path) -> None:
    assert read_text("hello", None) == "hello"
    assert read_text("-", None, io.BytesIO("猫吃鱼\n".encode())) == "猫吃鱼"
    assert read_text(None, None, io.BytesIO(b"piped\r\n")) == "piped"
    path = tmp_path / "t.txt"
    path.write_bytes(b"a file\n\n")
    assert read_text(None, path) == "a file\n"
    # --file - reads standard input, as cat does; a file named - is ./- (a Path names a file)
    assert read_text(None, "-", io.BytesIO(b"from stdin\n")) == "from stdin"
    (tmp_path / "-").write_text("dash file")
    assert read_text(None, tmp_path / "-") == "dash file"
    # a byte-order mark (Notepad's UTF-8) is no part of the text: it was its first token
    path.write_bytes("\ufeffthe cat\r\n".encode())
    assert read_text(None, path) == "the cat"
    assert read_text("-", None, io.BytesIO("\ufeff猫".encode())) == "猫"
    assert read_text("\ufeffas typed", None) == "\ufeffas typed"  # TEXT is kept as given
    assert read_text(None, Path(tmp_path, "./-"), io.BytesIO(b"from stdin\n")) == "dash file"


def test_inputs_from_stdin() -> None:
    vectors = load_inputs("-", io.BytesIO(b"[[1, 2], [3, 4]]"))
    assert vectors.vectors == [[1.0, 2.0], [3.0, 4.0]]
    with pytest.raises(AttnCliError, match="not valid JSON"):
        load_inputs("-", io.BytesIO(b"[[1, 2"))


@pytest.mark.parametrize(("text", "stdin", "message"), [
    ("   ", None, "empty"),
    ("-", io.BytesIO(b"\n"), "empty"),
    ("-", io.BytesIO(b"ok \xff"), r"not valid UTF-8 \(byte 0xff at offset 3\)"),
    # the command line's byte that is not UTF-8, as Python keeps it (surrogateescape)
    (b"ok \xff".decode("utf-8", "surrogateescape"), None,
     r"^TEXT is not valid UTF-8 \(byte 0xff at character 3\)$"),
    ("ok \ud800", None, r"^TEXT is not valid UTF-8 \(a lone surrogate \\ud800 at character 3\)$"),
    (None, FakeTTY(b""), "no input text"),
])
def test_bad_text(text: str | None, stdin: io.BytesIO | None, message: str) -> None:
    with pytest.raises(AttnCliError, match=message):
        read_text(text, None, stdin)


def test_bad_file(tmp_path: Path) -> None:
    with pytest.raises(AttnCliError, match="does not exist"):
        read_text(None, tmp_path / "missing.txt")
    with pytest.raises(AttnCliError, match="is a directory"):
        read_text(None, tmp_path)
    with pytest.raises(AttnCliError, match="not both"):
        read_text("x", tmp_path / "a")


def _write(tmp_path: Path, content: str) -> Path:
    path = tmp_path / "in.json"
    path.write_text(content)
    return path


def test_inputs_forms(tmp_path: Path) -> None:
    plain = load_inputs(_write(tmp_path, "[[1, 2], [3, 4.5]]"))
    assert plain.vectors == [[1.0, 2.0], [3.0, 4.5]] and plain.labels == ["x1", "x2"]
    named = load_inputs(_write(tmp_path, json.dumps({"tokens": ["a", "b"],
                                                     "vectors": [[1], [2]]})))
    assert named.labels == ["a", "b"] and named.vectors == [[1.0], [2.0]]


@pytest.mark.parametrize(("content", "message"), [
    ("{not json", "is not valid JSON"),
    ("[]", "holds no vectors"),
    ("[[1, 2], [3]]", r"different lengths \(\[1, 2\]\)"),
    ('[[1, "a"]]', 'non-number: "a"'),
    ("[[1, true]]", "non-number: true"),
    ("[[1, NaN]]", "NaN"),
    ("[[1, Infinity]]", "Infinity"),
    ("[[1e999]]", "non-finite"),
    ("[[]]", "not a non-empty list"),
    ("[1, 2]", "vector 0 is not a non-empty list"),
    ('{"tokens": ["a"]}', 'needs a "vectors" list'),
    ('{"tokens": ["a"], "vectors": [[1], [2]]}', "list of 2 strings"),
    ('"text"', "holds no vectors"),
])
def test_bad_inputs(tmp_path: Path, content: str, message: str) -> None:
    with pytest.raises(AttnCliError, match=message):
        load_inputs(_write(tmp_path, content))


def test_inputs_missing_and_not_utf8(tmp_path: Path) -> None:
    with pytest.raises(AttnCliError, match="does not exist"):
        load_inputs(tmp_path / "none.json")
    path = tmp_path / "bin.json"
    path.write_bytes(b"\xff[]")
    with pytest.raises(AttnCliError, match="not valid UTF-8"):
        load_inputs(path)
