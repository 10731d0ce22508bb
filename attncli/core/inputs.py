"""Where the text comes from (TEXT, stdin, --file) and --inputs JSON vectors, validated."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from attncli.core.sizes import (
    INPUTS_BLOWUP,
    check_fits,
    finite,
    json_limit,
    read_limited,
    read_path_limited,
)
from attncli.core.tokens import visible
from attncli.errors import AttnCliError


@dataclass(frozen=True)
class InputVectors:
    """Vectors given directly with --inputs, with optional token labels."""

    labels: list[str]
    vectors: list[list[float]]


def _decode(data: bytes, source: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise AttnCliError(
            f"{source} is not valid UTF-8 (byte 0x{data[err.start]:02x} at offset {err.start})"
        ) from None


def _read_path(path: Path, what: str, stdin: BinaryIO | None = None) -> bytes:
    """The file's bytes; the path '-' is standard input, as for cat (a file named - is ./-)."""
    if str(path) == "-":
        return read_limited(stdin if stdin is not None else sys.stdin.buffer, "standard input")
    try:
        return read_path_limited(path, what)
    except FileNotFoundError:
        raise AttnCliError(f"{what} {str(path)!r} does not exist") from None
    except IsADirectoryError:
        raise AttnCliError(f"{what} {str(path)!r} is a directory, not a file") from None
    except OSError as err:
        raise AttnCliError(f"cannot read {what} {str(path)!r}: {err.strerror}") from None


def read_text(text: str | None, file: Path | None, stdin: BinaryIO | None = None) -> str:
    """The input text from TEXT, '-' (stdin), --file, or piped stdin when TEXT is absent."""
    stream = stdin if stdin is not None else sys.stdin.buffer
    if text is not None and file is not None:
        raise AttnCliError("give TEXT or --file, not both")
    if file is not None:
        source = "standard input" if str(file) == "-" else f"--file {str(file)!r}"
        result = _decode(_read_path(file, "--file", stream), source)
    elif text == "-" or (text is None and not _is_tty(stream)):
        result = _decode(read_limited(stream, "standard input"), "standard input")
    elif text is None:
        raise AttnCliError("no input text (usage: attncli COMMAND TEXT, or '-' to read standard "
                           "input, or --file PATH)")
    else:
        result = text
    if text is None or text == "-":
        # Piped and file text usually ends with one newline that is not part of the text.
        result = result.removesuffix("\n").removesuffix("\r")
    if not result.strip():
        raise AttnCliError("the input text is empty (or only whitespace)")
    return result


def _is_tty(stream: BinaryIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _vector(row: object, index: int) -> list[float]:
    if not isinstance(row, list) or not row:
        raise AttnCliError(f"--inputs vector {index} is not a non-empty list of numbers")
    out = []
    for value in row:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise AttnCliError(f"--inputs vector {index} holds a non-number: {json.dumps(value)}")
        if not finite(value):
            shown = str(value) if len(str(value)) < 24 else f"{str(value)[:12]}..."
            kind = ("a non-finite number" if str(value) in ("inf", "-inf")
                    else "a number float32 cannot hold")
            raise AttnCliError(f"--inputs vector {index} holds {kind} ({shown})")
        out.append(float(value))
    return out


def _reject_constant(name: str) -> float:
    raise AttnCliError(f"--inputs holds {name}, which is not a finite number")


def load_inputs(path: Path, stdin: BinaryIO | None = None) -> InputVectors:
    """Vectors from a JSON file ('-': standard input): a list of N equal-length lists, or
    {"tokens", "vectors"}."""
    raw = _decode(_read_path(path, "--inputs", stdin), f"--inputs {str(path)!r}")
    check_fits(INPUTS_BLOWUP * len(raw), f"--inputs {str(path)!r} ({len(raw):,} bytes) needs "
               "its numbers as Python floats")
    try:
        doc = json.loads(raw, parse_constant=_reject_constant)
    except json.JSONDecodeError as err:
        raise AttnCliError(
            f"--inputs {str(path)!r} is not valid JSON ({err.msg} at line {err.lineno})"
        ) from None
    except (ValueError, RecursionError) as err:  # a 5,000-digit integer; nesting 3,000 deep
        raise AttnCliError(f"--inputs {str(path)!r} cannot be read: {json_limit(err)}") from None
    labels = None
    if isinstance(doc, dict):
        if "vectors" not in doc:
            raise AttnCliError('--inputs object needs a "vectors" list (and optional "tokens")')
        labels, doc = doc.get("tokens"), doc["vectors"]
    if not isinstance(doc, list) or not doc:
        raise AttnCliError("--inputs holds no vectors: expected a non-empty list of number lists")
    vectors = [_vector(row, i) for i, row in enumerate(doc)]
    widths = {len(v) for v in vectors}
    if len(widths) != 1:
        raise AttnCliError(f"--inputs vectors have different lengths ({sorted(widths)}); "
                           "all must be equally long")
    if labels is None:
        labels = [f"x{i + 1}" for i in range(len(vectors))]
    if (not isinstance(labels, list) or len(labels) != len(vectors)
            or not all(isinstance(t, str) for t in labels)):
        raise AttnCliError(f'--inputs "tokens" must be a list of {len(vectors)} strings, '
                           "one per vector")
    return InputVectors(labels=[visible(t) if t.strip() else "␣" for t in labels],
                        vectors=vectors)
