"""Buffers a GGUF source reads and dequantizes into, handed out again once nothing holds them.

A layer's weights are read and dequantized tensor by tensor, and each is dropped once its block
has used it. A fresh buffer for each costs more than the dequantizing itself: the kernel maps and
zeroes every page of it on first touch (an 8B's gate projection, 235 MB of float32: 0.09 s
dequantized into a new array, 0.033 s into one already touched). So a source keeps the buffers
it made and reuses one of the same size whose only holder is the recycler: any tensor, view or
array made from a buffer keeps a reference to it (numpy's base, torch.from_numpy's owner), so a
buffer still in use anywhere is never handed out. The buffers kept are bounded by cap bytes (one
layer's worth, the bound a model run promises), the least recently used idle ones dropped first.
"""

from __future__ import annotations

import math
import mmap
import os
import sys
import threading
from pathlib import Path

import numpy as np

from attncli.core.sizes import FLOAT_BYTES
from attncli.errors import AttnCliError
from attncli.models.sources.gguf.header import GgufHeader

SMALL = 1 << 20  # bytes: smaller buffers are made fresh (their pages cost nothing to speak of)
IDLE_REFS = 2  # sys.getrefcount of a buffer only the recycler's list holds


class Recycler:
    """Arrays of any shape and dtype, backed by kept byte buffers of up to cap bytes in all."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._kept: list[np.ndarray] = []  # flat uint8 buffers, the least recently used first
        self._lock = threading.Lock()  # browse's workers read tensors beside the app's thread

    def empty(self, shape: tuple[int, ...], dtype: np.dtype | type) -> np.ndarray:
        """An uninitialised array (shape, dtype): a kept buffer no one holds, else a new one."""
        kind = np.dtype(dtype)
        size = math.prod(shape) * kind.itemsize
        if size < SMALL or size > self.cap:
            return np.empty(shape, dtype=kind)
        with self._lock:
            buffer = self._take(size)
        return buffer.view(kind).reshape(shape)  # its base is the kept buffer: held while used

    def _idle(self, index: int) -> bool:
        # References now: the list's and this call's argument; a holder anywhere adds one.
        return sys.getrefcount(self._kept[index]) == IDLE_REFS

    def _take(self, size: int) -> np.ndarray:
        for index in range(len(self._kept)):
            if self._kept[index].nbytes == size and self._idle(index):
                buffer = self._kept.pop(index)
                self._kept.append(buffer)  # now the most recently used
                return buffer
        kept = sum(buffer.nbytes for buffer in self._kept)
        index = 0
        while index < len(self._kept) and kept + size > self.cap:  # idle ones go, oldest first
            if self._idle(index):
                kept -= self._kept.pop(index).nbytes
            else:
                index += 1
        buffer = np.empty(size, dtype=np.uint8)  # (size,) bytes
        if kept + size <= self.cap:
            self._kept.append(buffer)
        return buffer

    def kept_bytes(self) -> int:
        """Bytes of the buffers kept, in use or idle."""
        with self._lock:
            return sum(buffer.nbytes for buffer in self._kept)


def read_into(fd: int, buffer: np.ndarray, offset: int, path: Path, size: int) -> None:
    """Fill buffer (1-D uint8) with the file's bytes from offset, or one line: the file shrank
    since its header (of size bytes) was read, or could not be read."""
    view, done = buffer.data, 0  # (n,) bytes, written in place
    while done < len(view):
        try:
            got = os.preadv(fd, [view[done:]], offset + done)
        except OSError as err:
            raise AttnCliError(f"cannot read {path}: {err.strerror or err}") from None
        if got == 0:
            raise AttnCliError(f"{path} shrank to {offset + done:,} bytes since its header was "
                               f"read ({size:,})")
        done += got


def layer_bytes(header: GgufHeader) -> int:
    """The most bytes one block's tensors take, read and as float32: the recycler's bound."""
    per_block: dict[str, int] = {}
    for name, info in header.tensors.items():
        parts = name.split(".")
        if len(parts) > 2 and parts[0] == "blk":
            count = math.prod(info.shape)
            per_block[parts[1]] = per_block.get(parts[1], 0) + count * FLOAT_BYTES + info.nbytes
    return max(per_block.values(), default=0)


def populated(shape: tuple[int, ...]) -> np.ndarray:
    """A new uint8 array whose pages are made in one call (MAP_POPULATE), for bytes held for the
    run (a held model's stacks): touched a page at a time instead, numpy's large arrays ask for
    huge pages, and the first touch can wait while the kernel compacts memory for them (1 GB:
    0.13 to 11.7 s on the 2-core test machine, against 0.45 s populated). np.empty where the
    platform has no MAP_POPULATE."""
    size = math.prod(shape)
    flags = getattr(mmap, "MAP_POPULATE", None)
    if flags is None or size == 0:
        return np.empty(shape, dtype=np.uint8)
    pages = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | flags)
    return np.frombuffer(pages, dtype=np.uint8).reshape(shape)  # held while the array is
