"""A GGUF file's header, metadata and tensor table, every count checked against the file's size.

gguf.GGUFReader (llama.cpp's reader) trusts the counts it reads: an array that claims 2**60
elements makes it loop and grow until memory runs out, and it builds a numpy view per string
(1.8 s for SmolLM2's 49,152-token vocabulary). This walk reads the same layout with struct, checks
each length before it allocates anything, and keeps gguf's own tables of types and block sizes.
It reads the file with bounded reads (a window of at least CHUNK bytes), never a mapping of the
whole file: under an address-space limit smaller than the file, a valid model's header still
reads.
"""

from __future__ import annotations

import os
import stat
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGML_QUANT_SIZES, GGUF_MAGIC, GGMLQuantizationType, GGUFValueType

from attncli.errors import AttnCliError
from attncli.machine import check_fits
from attncli.models.sources.identity import Identity, identity_of

MAX_DIMS = 4  # GGML_MAX_DIMS
CHUNK = 1 << 20  # bytes read at a time: a header of many small values costs few reads
_LENGTH = struct.Struct("<Q")  # a string's length
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
    identity: Identity  # the file as it was read: tensors are read from this version only


class _Cursor:
    """Reads forward through the file; every length is checked against what is left, and the
    bytes are read in bounded windows: window holds the file's bytes [base, base + len)."""

    def __init__(self, fd: int, path: Path, size: int) -> None:
        self.fd, self.path, self.pos, self.size = fd, path, 0, size
        self.base, self.window = 0, b""

    def fail(self, what: str) -> AttnCliError:
        return AttnCliError(f"{self.path} is not a readable GGUF file: {what}")

    def need(self, count: int, what: str) -> None:
        if count > self.size - self.pos:
            raise self.fail(f"{what} needs {count:,} bytes at offset {self.pos:,}, past the end "
                            f"of the file ({self.size:,} bytes; truncated?)")

    def span(self, count: int) -> int:
        """Where the next count bytes (count already checked by need) start in window, which is
        read on as needed; the cursor moves past them."""
        offset = self.pos - self.base
        if offset + count > len(self.window):  # read on: what is left of the window, and more
            check_fits(count, f"{self.path}: a GGUF header value of {count:,} bytes")
            self._refill(offset, max(count, CHUNK))
            if len(self.window) < count:
                raise self.fail(f"it ends at offset {self.pos + len(self.window):,}, before "
                                f"the {self.size:,} bytes it held when opened (truncated?)")
            offset = 0
        self.pos += count
        return offset

    def _refill(self, offset: int, wanted: int) -> None:
        """The window from pos on: what is left of it, and up to wanted bytes in all."""
        parts = [self.window[offset:]]
        got = len(parts[0])
        while got < wanted and self.pos + got < self.size:
            more = os.pread(self.fd, min(wanted - got, self.size - self.pos - got), self.pos + got)
            if not more:
                break  # the file shrank since it was measured
            parts.append(more)
            got += len(more)
        self.base, self.window = self.pos, b"".join(parts)

    def scalar(self, code: str, what: str) -> Any:
        width = struct.calcsize("<" + code)
        self.need(width, what)
        start = self.span(width)  # before window is read: span may read on
        return struct.unpack_from("<" + code, self.window, start)[0]

    def string(self, what: str) -> str:
        length = self.scalar("Q", what)
        self.need(length, what)
        start = self.span(length)
        try:
            return self.window[start:start + length].decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail(f"{what} is not UTF-8") from None

    def strings(self, count: int, what: str) -> list[str]:
        """count strings: those whole in the window in one tight loop (a vocabulary holds
        100,000s), each across its end read on by string()."""
        out: list[str] = []
        while len(out) < count:
            window, at = self.window, self.pos - self.base
            try:
                while len(out) < count and at + 8 <= len(window):
                    end = at + 8 + _LENGTH.unpack_from(window, at)[0]
                    if end > len(window):
                        break
                    out.append(window[at + 8:end].decode("utf-8"))
                    at = end
            except UnicodeDecodeError:
                raise self.fail(f"{what} is not UTF-8") from None
            self.pos = self.base + at
            if len(out) < count:
                out.append(self.string(what))
        return out

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
            return self.strings(count, what)
        width = struct.calcsize("<" + _SCALARS[item])
        self.need(width * count, f"{what} ({count:,} values)")
        start = self.span(width * count)
        return np.frombuffer(self.window, dtype=_NUMPY[item], count=count, offset=start).copy()


def read_header(path: Path) -> GgufHeader:
    """The file's metadata and tensor table, or one AttnCliError line naming the file."""
    header, fd = open_header(path)
    os.close(fd)
    return header


def open_header(path: Path) -> tuple[GgufHeader, int]:
    """The file's header, and the descriptor it was read through, left open for the tensors:
    one version of the file, whatever happens to the path after; or one line naming it."""
    special = AttnCliError(f"{path} is not a regular file, so not a GGUF file")
    try:
        if path.exists() and not path.is_file():  # a FIFO, a socket, a device or a folder
            raise special
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # nor waits on a FIFO put there since
    except OSError as err:
        raise AttnCliError(f"cannot read {path}: {err.strerror or err}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise special
        if info.st_size < 24:
            raise AttnCliError(f"{path} is not a GGUF file: it holds {info.st_size} bytes, "
                               "fewer than a GGUF header")
        return _parse(_Cursor(fd, path, info.st_size), identity_of(info)), fd
    except BaseException as err:
        os.close(fd)
        if isinstance(err, OSError):
            raise AttnCliError(f"cannot read {path}: {err.strerror or err}") from None
        raise


def _parse(cur: _Cursor, identity: Identity) -> GgufHeader:
    magic = cur.scalar("I", "the magic number")
    if magic != GGUF_MAGIC:
        start = bytes(cur.window[:4])
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
    return GgufHeader(cur.path, version, cur.size, metadata, tensors, identity)


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
