"""A GGUF file copied with some metadata values replaced by any typed value, hostile ones included
(NaN, ±inf, 2**64 - 1, negative, strings, arrays, bools), for the hostile-count tests.

The copy is made from the raw bytes gguf.GGUFReader (llama.cpp's own reader, not attncli's) finds
for each metadata entry and tensor entry, so every entry that is not replaced is byte for byte
what the writer wrote, and the tensor data follow unchanged at the next aligned offset.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import gguf

T = gguf.GGUFValueType
SCALARS = {T.UINT8: "B", T.INT8: "b", T.UINT16: "H", T.INT16: "h", T.UINT32: "I", T.INT32: "i",
           T.FLOAT32: "f", T.BOOL: "?", T.UINT64: "Q", T.INT64: "q", T.FLOAT64: "d"}
Typed = tuple[gguf.GGUFValueType, Any]  # (type, value); an ARRAY's value is (item type, items)


def _string(text: str) -> bytes:
    data = text.encode("utf-8")
    return struct.pack("<Q", len(data)) + data


def encode(kind: gguf.GGUFValueType, value: Any) -> bytes:
    """A metadata value as GGUF stores it after its type id."""
    if kind == T.STRING:
        return _string(value)
    if kind == T.ARRAY:
        item, items = value
        body = b"".join(encode(item, v) for v in items)
        return struct.pack("<IQ", item, len(items)) + body
    return struct.pack("<" + SCALARS[kind], value)


def entry(key: str, kind: gguf.GGUFValueType, value: Any) -> bytes:
    """One whole metadata entry: key, type id, value."""
    return _string(key) + struct.pack("<I", kind) + encode(kind, value)


Parsed = tuple[dict[str, bytes], bytes, int, int, int]
KEEP = 16  # files whose parse is kept
_PARSED: dict[str, tuple[bytes, Parsed]] = {}  # path -> (its bytes before the data, parsed)


def _parsed(src: Path, raw: bytes) -> Parsed:
    """src's metadata entries (name -> raw bytes), its tensor entries' raw bytes and count, its
    alignment and data offset, as gguf's reader finds them in raw (src's bytes). The parse is
    kept while the bytes before the data are the same: the hostile-count tests copy one small
    file hundreds of times, and the reader's parse was most of each copy's CPU."""
    kept = _PARSED.get(str(src))
    if kept is not None and raw[:len(kept[0])] == kept[0]:
        return kept[1]
    reader = gguf.GGUFReader(src)
    kvs = {name: b"".join(p.tobytes() for p in f.parts) for name, f in reader.fields.items()
           if not name.startswith("GGUF.")}
    infos = [b"".join(p.tobytes() for p in t.field.parts) for t in reader.tensors]
    parsed = (kvs, b"".join(infos), len(infos), reader.alignment, reader.data_offset)
    _PARSED[str(src)] = (raw[:reader.data_offset], parsed)
    while len(_PARSED) > KEEP:
        del _PARSED[next(iter(_PARSED))]  # the oldest
    return parsed


def rewrite(src: Path, dst: Path, changes: dict[str, Typed | None]) -> None:
    """Copy src to dst, each key in changes set to its (type, value), or removed for None."""
    raw = src.read_bytes()
    fields, infos, count, align, offset = _parsed(src, raw)
    kvs = [kv for name, kv in fields.items() if name not in changes]
    kvs += [entry(key, *typed) for key, typed in changes.items() if typed is not None]
    head = b"GGUF" + struct.pack("<IQQ", 3, count, len(kvs)) + b"".join(kvs) + infos
    dst.write_bytes(head + b"\0" * (-len(head) % align) + raw[offset:])
