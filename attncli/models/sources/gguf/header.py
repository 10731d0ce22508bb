"""A GGUF file's header, metadata and tensor table, every count checked against the file's size.

gguf.GGUFReader (llama.cpp's reader) trusts the counts it reads: an array that claims 2**60
elements makes it loop and grow until memory runs out, and it builds a numpy view per string
(1.8 s for SmolLM2's 49,152-token vocabulary). This walk reads the same layout with struct, checks
each length before it allocates anything, and keeps gguf's own tables of types and block sizes.
"""

from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGML_QUANT_SIZES, GGUF_MAGIC, GGMLQuantizationType, GGUFValueType

from attncli.core.sizes import check_fits
from attncli.errors import AttnCliError

MAX_DIMS = 4  # GGML_MAX_DIMS
STRING_OBJECT_BYTES = 96  # a short Python str and its list slot, with room to spare
_SCALARS = {GGUFValueType.UINT8: "B", GGUFValueType.INT8: "b", GGUFValueType.UINT16: "H",
            GGUFValueType.INT16: "h", GGUFValueType.UINT32: "I", GGUFValueType.INT32: "i",
            GGUFValueType.FLOAT32: "f", GGUFValueType.BOOL: "?", GGUFValueType.UINT64: "Q",
            GGUFValueType.INT64: "q", GGUFValueType.FLOAT64: "d"}
_NUMPY = {GGUFValueType.UINT8: "<u1", GGUFValueType.INT8: "<i1", GGUFValueType.UINT16: "<u2",
          GGUFValueType.INT16: "<i2", GGUFValueType.UINT32: "<u4", GGUFValueType.INT32: "<i4",
          GGUFValueType.FLOAT32: "<f4", GGUFValueType.BOOL: "?", GGUFValueType.UINT64: "<u8",
          GGUFValueType.INT64: "<i8", GGUFValueType.FLOAT64: "<f8"}


@dataclass(frozen=True)
class TensorInfo:
    """One tensor as the file stores it: dims in ggml order (ne0 first), bytes [start, end)."""

    name: str
    dims: tuple[int, ...]
    qtype: GGMLQuantizationType
    start: int

    @property
    def shape(self) -> tuple[int, ...]:
        """numpy order (rows first): ne0 is the innermost, contiguous dimension."""
        return tuple(reversed(self.dims))

    @property
    def row_bytes(self) -> int:
        block, type_size = GGML_QUANT_SIZES[self.qtype]
        return self.dims[0] // block * type_size

    @property
    def nbytes(self) -> int:
        return self.row_bytes * int(np.prod(self.dims[1:], dtype=np.int64))


@dataclass(frozen=True)
class GgufHeader:
    """What a GGUF file says about itself, read without touching tensor data."""

    path: Path
    version: int
    size: int  # bytes
    metadata: dict[str, Any]  # scalars, str, list[str] or a numpy array per key
    tensors: dict[str, TensorInfo]


class _Cursor:
    """Reads forward through the file; every length is checked against what is left."""

    def __init__(self, data: mmap.mmap, path: Path) -> None:
        self.data, self.path, self.pos, self.size = data, path, 0, len(data)

    def fail(self, what: str) -> AttnCliError:
        return AttnCliError(f"{self.path} is not a readable GGUF file: {what}")

    def need(self, count: int, what: str) -> None:
        if count > self.size - self.pos:
            raise self.fail(f"{what} needs {count:,} bytes at offset {self.pos:,}, past the end "
                            f"of the file ({self.size:,} bytes; truncated?)")

    def scalar(self, code: str, what: str) -> Any:
        width = struct.calcsize("<" + code)
        self.need(width, what)
        (value,) = struct.unpack_from("<" + code, self.data, self.pos)
        self.pos += width
        return value

    def string(self, what: str) -> str:
        length = self.scalar("Q", what)
        self.need(length, what)
        raw = self.data[self.pos:self.pos + length]
        self.pos += length
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail(f"{what} is not UTF-8") from None

    def value_type(self, what: str) -> GGUFValueType:
        raw = self.scalar("I", what)
        try:
            return GGUFValueType(raw)
        except ValueError:
            raise self.fail(f"{what} has an unknown value type {raw}") from None

    def value(self, kind: GGUFValueType, what: str) -> Any:
        if kind == GGUFValueType.STRING:
            return self.string(what)
        if kind in _SCALARS:
            return self.scalar(_SCALARS[kind], what)
        item = self.value_type(what)
        count = self.scalar("Q", what)
        if item == GGUFValueType.ARRAY:
            raise self.fail(f"{what} is an array of arrays, which attncli does not read")
        if item == GGUFValueType.STRING:
            # each string is at least its 8-byte length: the count is checked before the list grows
            self.need(8 * count, f"{what} ({count:,} strings)")
            check_fits(STRING_OBJECT_BYTES * count, f"{self.path}: {what} holds {count:,} strings")
            return [self.string(what) for _ in range(count)]
        width = struct.calcsize("<" + _SCALARS[item])
        self.need(width * count, f"{what} ({count:,} values)")
        values = np.frombuffer(self.data, dtype=_NUMPY[item], count=count, offset=self.pos)
        self.pos += width * count
        return values.copy()


def read_header(path: Path) -> GgufHeader:
    """The file's metadata and tensor table, or one AttnCliError line naming the file."""
    try:
        if path.exists() and not path.is_file():  # a FIFO or device: open() could wait forever
            raise AttnCliError(f"{path} is not a regular file, so not a GGUF file")
        with open(path, "rb") as stream:
            size = os.fstat(stream.fileno()).st_size
            if size < 24:
                raise AttnCliError(f"{path} is not a GGUF file: it holds {size} bytes, fewer than "
                                   "a GGUF header")
            with mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ) as data:
                return _parse(_Cursor(data, path))
    except OSError as err:
        raise AttnCliError(f"cannot read {path}: {err.strerror or err}") from None


def _parse(cur: _Cursor) -> GgufHeader:
    magic = cur.scalar("I", "the magic number")
    if magic != GGUF_MAGIC:
        start = bytes(cur.data[:4])
        raise AttnCliError(f"{cur.path} is not a GGUF file (it starts with {start!r}, not b'GGUF')")
    version = cur.scalar("I", "the version")
    if version & 0xFFFF == 0:
        raise cur.fail("it is a big-endian GGUF; attncli reads little-endian files")
    if version not in (2, 3):
        raise cur.fail(f"GGUF version {version}; attncli reads versions 2 and 3")
    tensor_count = cur.scalar("Q", "the tensor count")
    kv_count = cur.scalar("Q", "the metadata count")
    # a key is at least 8 + 4 + 1 bytes, a tensor entry 8 + 4 + 4 + 8
    cur.need(13 * kv_count + 24 * tensor_count, f"{kv_count:,} metadata keys and "
             f"{tensor_count:,} tensors")
    metadata: dict[str, Any] = {}
    for index in range(kv_count):
        key = cur.string(f"metadata key {index}")
        if key in metadata:
            raise cur.fail(f"metadata key {key!r} appears twice")
        metadata[key] = cur.value(cur.value_type(key), key)
    raw = [_tensor_entry(cur, index) for index in range(tensor_count)]
    alignment = metadata.get("general.alignment", 32)
    if not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
        raise cur.fail(f"general.alignment is {alignment!r}, not a power of two")
    data_start = -(-cur.pos // alignment) * alignment
    tensors: dict[str, TensorInfo] = {}
    for name, dims, qtype, offset in raw:
        if name in tensors:
            raise cur.fail(f"tensor {name!r} appears twice")
        info = TensorInfo(name, dims, qtype, data_start + offset)
        end = info.start + info.nbytes
        if offset % alignment or end > cur.size:
            raise cur.fail(f"tensor {name!r} claims bytes {info.start:,}..{end:,} (offset "
                           f"{offset:,}), past the end of the file ({cur.size:,} bytes) or "
                           f"off its {alignment}-byte alignment")
        tensors[name] = info
    return GgufHeader(cur.path, version, cur.size, metadata, tensors)


def _tensor_entry(cur: _Cursor, index: int) -> tuple[str, tuple[int, ...], GGMLQuantizationType,
                                                      int]:
    name = cur.string(f"tensor {index}'s name")
    n_dims = cur.scalar("I", f"tensor {name!r}'s rank")
    if not 1 <= n_dims <= MAX_DIMS:
        raise cur.fail(f"tensor {name!r} has {n_dims} dimensions (GGUF allows 1 to {MAX_DIMS})")
    dims = tuple(cur.scalar("Q", f"tensor {name!r}'s shape") for _ in range(n_dims))
    raw_type = cur.scalar("I", f"tensor {name!r}'s type")
    offset = cur.scalar("Q", f"tensor {name!r}'s offset")
    try:
        qtype = GGMLQuantizationType(raw_type)
    except ValueError:
        raise cur.fail(f"tensor {name!r} has type id {raw_type}, which the gguf package does not "
                       "know") from None
    if qtype not in GGML_QUANT_SIZES:
        raise cur.fail(f"tensor {name!r} has type {qtype.name}, which has no known block size")
    block = GGML_QUANT_SIZES[qtype][0]
    if min(dims) < 1 or dims[0] % block:
        raise cur.fail(f"tensor {name!r} has shape {list(dims)}: its rows must be whole "
                       f"{qtype.name} blocks of {block}")
    if float(np.prod(dims, dtype=np.float64)) > cur.size * 64:
        raise cur.fail(f"tensor {name!r} claims shape {list(dims)}, more elements than the file "
                       "could hold")
    return name, dims, qtype, offset
