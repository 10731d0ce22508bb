"""What attncli reads from outside: the text (TEXT, stdin, --file), --inputs JSON vectors, and
the one JSON reader every JSON document goes through (--inputs, `show`, a checkpoint's
config.json, shard index and tokenizer.json, the folders `models` lists), with one set of limits.

Valid but hostile JSON ends in one line naming the source: more bytes than attncli reads, more
than memory allows as Python objects, nesting past JSON_DEPTH, a number too large for a float (an
integer of thousands of digits), or NaN or Infinity (not JSON). Escaped lone surrogates are kept,
to be shown escaped.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
from dataclasses import dataclass
from typing import Any, BinaryIO

import orjson

from attncli.core.sizes import finite
from attncli.core.tokens import visible
from attncli.errors import AttnCliError
from attncli.machine import READ_LIMIT, check_fits, read_limited

JSON_DEPTH = 1024  # lists and objects nested within each other (orjson's own limit)
# JSON as Python objects: "0," (2 bytes) becomes an int or float (24-28) and a list slot (8).
JSON_BLOWUP = 16
_CONSTANT = re.compile(r"-?(?:NaN|Infinity)")


def _reason(err: orjson.JSONDecodeError, text: str) -> str:
    """What is wrong with the document, in words, with where."""
    where = f"line {err.lineno} column {err.colno}"
    msg = err.msg
    constant = _CONSTANT.match(text, max(err.pos - 1, 0)) or _CONSTANT.match(text, err.pos)
    if constant:
        return f"holds {constant.group()} at {where}, which is not a finite number (strict JSON " \
            "does not allow it)"
    if "depth limit" in msg:
        return f"cannot be read: its lists or objects are nested more than {JSON_DEPTH:,} deep"
    if "infinity when parsed as double" in msg:
        return f"holds a non-finite number (too large for a float) at {where}"
    if "surrogate" in msg:
        return f"cannot be read: a string holds a lone surrogate ({msg}) at {where}"
    return f"is not valid JSON ({msg} at {where})"


def parse_json(data: bytes | str, source: str, limit: int = READ_LIMIT) -> Any:
    """The document in data (UTF-8 bytes or text), or one AttnCliError line naming source."""
    size = len(data)
    if size > limit:
        raise AttnCliError(f"{source} holds {size:,} bytes of JSON, more than the "
                           f"{limit // 2**20} MiB attncli reads")
    check_fits(JSON_BLOWUP * size, f"{source} ({size:,} bytes) needs its values as Python objects")
    if isinstance(data, str):
        try:
            raw = data.encode("utf-8")
        except UnicodeEncodeError as err:
            raise AttnCliError(f"{source} cannot be read: it holds a lone surrogate at character "
                               f"{err.start}") from None
    else:
        raw = data
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as err:
        if "surrogate" in err.msg:
            return _with_surrogates(raw, source)
        text = raw.decode("utf-8", errors="replace")
        raise AttnCliError(f"{source} {_reason(err, text)}") from None


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise _TooLarge(text)
    return value


def _integer(text: str) -> int | float:
    """As orjson reads integers: exact within 64 bits, a float beyond (refused past a float)."""
    if len(text.lstrip("-")) <= 19:
        return int(text)
    return _finite(text)


class _TooLarge(ValueError):
    pass


def _constant(name: str) -> float:
    raise _TooLarge(name)


def _with_surrogates(raw: bytes, source: str) -> Any:
    """A document whose strings hold escaped lone surrogates (\\ud800), which orjson refuses
    and Python's reader keeps; read with the same limits, so labels can be shown escaped."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise AttnCliError(f"{source} is not valid UTF-8 (byte 0x{raw[err.start]:02x} at offset "
                           f"{err.start})") from None
    try:
        return json.loads(text, parse_int=_integer, parse_float=_finite,
                          parse_constant=_constant)
    except json.JSONDecodeError as err:
        raise AttnCliError(f"{source} is not valid JSON ({err.msg} at line {err.lineno} column "
                           f"{err.colno})") from None
    except _TooLarge as err:
        what = str(err)
        if what.lstrip("-") in ("NaN", "Infinity"):
            raise AttnCliError(f"{source} holds {what}, which is not a finite number (strict "
                               "JSON does not allow it)") from None
        raise AttnCliError(f"{source} holds a non-finite number (too large for a float: "
                           f"{what[:12]}...)") from None
    except RecursionError:
        raise AttnCliError(f"{source} cannot be read: its lists or objects are nested too "
                           "deeply") from None


def read_json_file(path: str | os.PathLike[str], source: str, limit: int = READ_LIMIT) -> Any:
    """The JSON document in the file at path (bounded read), or one line naming source."""
    try:
        with open(path, "rb") as stream:
            data = read_limited(stream, source, limit)
    except FileNotFoundError:
        raise AttnCliError(f"{source} does not exist") from None
    except IsADirectoryError:
        raise AttnCliError(f"{source} is a directory, not a file") from None
    except OSError as err:
        raise AttnCliError(f"cannot read {source}: {err.strerror or err}") from None
    return parse_json(data, source, limit)


@dataclass(frozen=True)
class InputVectors:
    """Vectors given directly with --inputs, with optional token labels."""

    labels: list[str]
    vectors: list[list[float]]


def _decode(data: bytes, source: str) -> str:
    """A file's or stream's text: UTF-8, a leading byte-order mark (which Windows editors write)
    left out, as it is no part of the text; else one line naming the first byte that is not."""
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as err:
        raise AttnCliError(
            f"{source} is not valid UTF-8 (byte 0x{data[err.start]:02x} at offset {err.start})"
        ) from None


def utf8_text(text: str, source: str) -> str:
    """text, or one line naming its first character that is not text: a byte that is not UTF-8
    (as Python keeps it from the command line, U+DC80..U+DCFF) or a lone surrogate from a JSON
    escape, which no tokenizer encodes."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        code = ord(text[err.start])
        what = (f"byte 0x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF
                else f"a lone surrogate \\u{code:04x}")
        raise AttnCliError(f"{source} is not valid UTF-8 ({what} at character {err.start})"
                           ) from None
    return text


def is_stdin(path: str | os.PathLike[str]) -> bool:
    """Whether path means standard input: the string '-' as typed (a file named - is ./-)."""
    return isinstance(path, str) and path == "-"


def _read_path(path: str | os.PathLike[str], what: str, stdin: BinaryIO | None = None) -> bytes:
    """The file's bytes; the path '-' is standard input, as for cat (a file named - is ./-)."""
    if is_stdin(path):
        return read_limited(stdin if stdin is not None else sys.stdin.buffer, "standard input")
    shown = os.fspath(path)  # as typed: Path("./-") would print as '-'
    try:
        with open(shown, "rb") as stream:
            return read_limited(stream, f"{what} {shown!r}")
    except FileNotFoundError:
        raise AttnCliError(f"{what} {shown!r} does not exist") from None
    except IsADirectoryError:
        raise AttnCliError(f"{what} {shown!r} is a directory, not a file") from None
    except OSError as err:
        raise AttnCliError(f"cannot read {what} {shown!r}: {err.strerror}") from None
    except ValueError:  # a NUL, which no path holds (only the API can pass one)
        raise AttnCliError(f"{what} {shown!r} holds a NUL byte, which no file name can") from None


def read_text(text: str | None, file: str | os.PathLike[str] | None,
              stdin: BinaryIO | None = None) -> str:
    """The input text from TEXT, '-' (stdin), --file, or piped stdin when TEXT is absent."""
    stream = stdin if stdin is not None else sys.stdin.buffer
    if text is not None and file is not None:
        raise AttnCliError("give TEXT or --file, not both")
    if file is not None:
        source = "standard input" if is_stdin(file) else f"--file {os.fspath(file)!r}"
        result = _decode(_read_path(file, "--file", stream), source)
    elif text == "-" or (text is None and not _is_tty(stream)):
        result = _decode(read_limited(stream, "standard input"), "standard input")
    elif text is None:
        raise AttnCliError("no input text (usage: attncli COMMAND TEXT, or '-' to read standard "
                           "input, or --file PATH)")
    else:
        result = utf8_text(text, "TEXT")
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


def load_inputs(path: str | os.PathLike[str], stdin: BinaryIO | None = None) -> InputVectors:
    """Vectors from a JSON file ('-': standard input): a list of N equal-length lists, or
    {"tokens", "vectors"}."""
    raw = _read_path(path, "--inputs", stdin)
    _decode(raw, f"--inputs {os.fspath(path)!r}")  # names the first byte that is not UTF-8
    doc = parse_json(raw, f"--inputs {os.fspath(path)!r}")
    labels = None
    if isinstance(doc, dict):
        if "vectors" not in doc:
            raise AttnCliError('--inputs object needs a "vectors" list (and optional "tokens")')
        labels, doc = doc.get("tokens"), doc["vectors"]
    return input_vectors(doc, labels)


def input_vectors(doc: object, labels: object = None) -> InputVectors:
    """N equal-length lists of finite numbers (and N token labels, or x1..xN) as vectors."""
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
