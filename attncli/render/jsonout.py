"""Fast strict JSON: dicts, lists, scalars and numpy arrays, written in pieces by orjson.

Strict as the standard library's allow_nan=False: an infinity anywhere, or a NaN outside a
numpy array, is a ValueError. Inside a float array NaN means masked and is written as null.
Floats of a float32 array print as the shortest text that reads back as the same float32; a
Python float prints as the shortest text that reads back as the same float64 (as repr does).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    import numpy as np

OPTIONS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS
NESTED = (list, tuple, dict, Iterator)
SCALARS = (str, int, bool, type(None))
BATCH_ITEMS = 2048  # flat dicts of a list written by one orjson call
CHUNK_CELLS = 2**16  # numbers per piece of a large array: about a megabyte of text


def json_pieces(data: Any) -> Iterator[bytes]:
    """data as strict UTF-8 JSON in pieces of at most about a megabyte, with a trailing newline.

    An iterator is written as a list, its items taken one at a time.
    """
    for piece in _pieces(data):
        yield _escape_c1(piece) if b"\xc2" in piece else piece
    yield b"\n"


C1 = [(bytes([0xC2, low]), b"\\u%04x" % low) for low in range(0x80, 0xA0)]


def _escape_c1(piece: bytes) -> bytes:
    """piece with each C1 control (U+0080-U+009F, such as the CSI U+009B) as a \\u escape.

    orjson writes them raw, and a terminal may act on one (a file name in `models --json`). In
    UTF-8 the bytes C2 80-9F are these characters and nothing else, and outside strings JSON
    is ASCII, so the escape is the same JSON string.
    """
    for raw, escaped in C1:
        piece = piece.replace(raw, escaped)
    return piece


def dumps(data: Any) -> bytes:
    """data as one strict UTF-8 JSON document with a trailing newline."""
    return b"".join(json_pieces(data))


def _pieces(value: Any) -> Iterator[bytes]:
    if isinstance(value, dict):
        if _flat(value):
            yield _dumps(value)
            return
        opening = b"{"
        for key, item in value.items():
            yield opening + _dumps(str(key)) + b":"
            yield from _pieces(item)
            opening = b","
        yield b"{}" if opening == b"{" else b"}"
    elif _is_array(value):
        import numpy as np

        if value.dtype.kind == "f" and np.isinf(value).any():
            raise ValueError("Out of range float values are not JSON compliant: infinity")
        yield from _array(value)
    elif isinstance(value, (list, tuple)) and value and (
            isinstance(value[0], NESTED) or _is_array(value[0])) or (
            not isinstance(value, (list, tuple, str, bytes)) and isinstance(value, Iterator)):
        yield from _items(value)
    else:
        _check_finite(value)
        yield _dumps(value)


def _dumps(value: Any) -> bytes:
    """orjson.dumps; a str holding a file name's undecodable bytes (Python's surrogate escapes,
    which orjson refuses) is written with each such byte as \\xNN, as `models` writes names."""
    try:
        return orjson.dumps(value, option=OPTIONS)
    except TypeError as err:
        if "surrogates" not in str(err):
            raise
        return orjson.dumps(_decodable(value), option=OPTIONS)


def json_text(text: str) -> str:
    """text that strict UTF-8 JSON can hold: a file name's undecodable bytes as \\xNN."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        try:
            raw = text.encode("utf-8", "surrogateescape")  # the bytes the name really has
        except UnicodeEncodeError:  # a surrogate that stands for no byte
            raw = text.encode("utf-8", "backslashreplace")
        return raw.decode("utf-8", "backslashreplace")


def _decodable(value: Any) -> Any:
    """value with every str made valid UTF-8 (json_text)."""
    if isinstance(value, str):
        return json_text(value)
    if isinstance(value, dict):
        return {_decodable(key): _decodable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_decodable(item) for item in value]
    return value


def _is_array(value: Any) -> bool:
    """Whether value is a numpy array; none can be while numpy is not imported (`tokens`)."""
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(value, numpy.ndarray)


def _flat(value: dict[Any, Any]) -> bool:
    """Whether a dict holds scalars only (checked finite), so orjson may write it at once."""
    for item in value.values():
        kind = type(item)
        if kind is float:
            _check_finite(item)
        elif kind not in SCALARS:
            return False
    return True


def _items(items: Any) -> Iterator[bytes]:
    """A list (or an iterator's items) as a JSON list; runs of flat dicts go out together."""
    opening, batch = b"[", []
    for item in items:
        if type(item) is dict and _flat(item):
            batch.append(item)
            if len(batch) >= BATCH_ITEMS:
                yield opening + _dumps(batch)[1:-1]
                opening, batch = b",", []
            continue
        if batch:
            yield opening + _dumps(batch)[1:-1]
            opening, batch = b",", []
        yield opening
        yield from _pieces(item)
        opening = b","
    if batch:
        yield opening + _dumps(batch)[1:-1]
        opening = b","
    yield b"[]" if opening == b"[" else b"]"


def _array(a: np.ndarray) -> Iterator[bytes]:
    """A numpy array as nested lists, NaN as null, in pieces of about CHUNK_CELLS numbers."""
    import numpy as np

    if a.ndim < 2 or a.size <= CHUNK_CELLS:
        yield orjson.dumps(np.ascontiguousarray(a), option=OPTIONS)
        return
    row_cells = a[0].size
    if row_cells > CHUNK_CELLS:  # one item along the first axis is a piece of its own, or more
        yield b"["
        for k in range(a.shape[0]):
            if k:
                yield b","
            yield from _array(a[k])
        yield b"]"
        return
    step = max(CHUNK_CELLS // max(row_cells, 1), 1)
    for start in range(0, a.shape[0], step):
        text = orjson.dumps(np.ascontiguousarray(a[start:start + step]), option=OPTIONS)
        # Each block is "[r0,r1,...]": keep its rows, and put the brackets around them all.
        yield (b"[" if start == 0 else b",") + text[1:-1]
    yield b"]"


def _check_finite(value: Any) -> None:
    """Raise ValueError for an infinity or NaN in a scalar or a flat list of scalars."""
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"Out of range float values are not JSON compliant: {value!r}")
    elif isinstance(value, (list, tuple)) and value:
        import numpy as np

        try:
            numbers = np.array(value, dtype=np.float64)  # None becomes NaN
        except (TypeError, ValueError):
            for item in value:
                _check_finite(item)
            return
        if np.isinf(numbers).any() or np.isnan(numbers).sum() != value.count(None):
            raise ValueError("Out of range float values are not JSON compliant")
