"""The hidden-state cache on disk: the residual stream entering each layer of one text's pass
through one model, kept so that a later look runs only the attention it shows.

One file per (model, text, layer): a magic line, the header's length, a JSON header (the whole
key, the layer, the shape and the payload's sha256), zero padding to 64 bytes, then T × d_model
float32 exactly as the pass made them. A file is read only when it is a regular file whose
header names this key and layer and whose payload has the right size and checksum and holds
finite numbers only; nothing is ever unpickled. One of ours that fails (damaged, its header
nested past orjson's depth, NaN or infinity) is a miss and is removed. The checksum guards
against accidents (a truncated or flipped file), not against an edit that recomputes it.
Writes go to a temporary file in the same folder, fsync'd, then os.replace'd: a reader never
sees half a file, and a failed write (a full disk, a read-only folder) leaves none and costs one
note on stderr. The folder is kept under a total size, least recently used first out, and only
files that start with the magic line are ever removed.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import stat
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import torch
from torch import Tensor

from attncli.errors import AttnCliError, escaped
from attncli.models.stores.cachedir import xdg_base

MAGIC = b"attncli hidden states\n"
SUFFIX = ".hidden"
TEMP_PREFIX = ".part-"
ALIGN = 64  # the payload starts on a 64-byte boundary
MAX_HEADER = 2**20  # bytes: a key holds hashes and numbers, never the text itself
DEFAULT_CAP = 2 * 2**30  # bytes kept in the folder before the least recently used go
STALE_TEMP_S = 3600  # a temporary file this old was left by a writer that died
FOLDER_ENV = "ATTNCLI_HIDDEN_CACHE"  # the folder (default: $XDG_CACHE_HOME/attncli/hidden)
CAP_ENV = "ATTNCLI_HIDDEN_CACHE_MAX"  # its total size: bytes, or with K, M or G
OFF_ENV = "ATTNCLI_NO_CACHE"  # 1: neither read nor write the cache
_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}
_noted: list[str] = []  # the one note this process gave about a failed write


def cache_folder() -> Path | None:
    """Where hidden states are kept; None when ATTNCLI_NO_CACHE turns the cache off, or when
    the folder's ~ names no home folder (one note, as for a folder that cannot be written)."""
    if os.environ.get(OFF_ENV, "") not in ("", "0"):
        return None
    named = os.environ.get(FOLDER_ENV)
    base = xdg_base("XDG_CACHE_HOME") or "~/.cache"
    try:
        return Path(named).expanduser() if named else Path(base).expanduser() / "attncli/hidden"
    except RuntimeError:  # ~user of no such user, or ~ with no HOME and no password entry
        _note(named or base, "its home folder cannot be found")
        return None


def cache_cap() -> int:
    """The folder's size limit in bytes: ATTNCLI_HIDDEN_CACHE_MAX (e.g. 500M, 2G), else 2 GiB."""
    text = os.environ.get(CAP_ENV, "").strip().upper().removesuffix("B").removesuffix("I")
    if not text:
        return DEFAULT_CAP
    unit = text[-1] if text[-1] in _UNITS else ""
    number = text[:-1] if unit else text
    if not (number.isascii() and number.isdigit()):
        raise AttnCliError(f"{CAP_ENV} must be a size such as 500M or 2G (got "
                           f"{os.environ[CAP_ENV]!r})")
    return int(number) * _UNITS[unit]


def key_name(key: dict[str, Any]) -> str:
    """The file name stem of a key: a hash of its canonical JSON."""
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:40]


@dataclass
class HiddenCache:
    """One model and one text's streams in the cache folder, each (tokens, width) float32, or
    (lead, tokens, width) where lead is given (each layer's attention weights: heads, T, T)."""

    folder: Path
    cap: int
    key: dict[str, Any]
    tokens: int
    width: int
    reserve: int = 0  # bytes this text's streams may take: made room for at the first store
    lead: int | None = None  # a leading dimension: (lead, tokens, width) per file
    name: str = field(init=False)
    _room_made: bool = field(init=False, default=False)
    _written: list[Path] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        self.name = key_name(self.key)

    @property
    def shape(self) -> list[int]:
        """Each file's tensor shape."""
        return [self.tokens, self.width] if self.lead is None else [self.lead, self.tokens,
                                                                    self.width]

    def path(self, layer: int) -> Path:
        """The file of the stream entering layer (layer n_layer: the last block's output)."""
        return self.folder / f"{self.name}-{layer}{SUFFIX}"

    def _header(self, layer: int, digest: str) -> bytes:
        header = json.dumps({"key": self.key, "layer": layer, "shape": self.shape,
                             "dtype": "float32", "sha256": digest}, sort_keys=True).encode()
        start = len(MAGIC) + 8 + len(header)
        return MAGIC + len(header).to_bytes(8, "little") + header + bytes(-start % ALIGN)

    def load(self, layer: int) -> Tensor | None:
        """The stream entering layer, when a whole, matching, finite file holds it; else None
        (one of ours that is damaged or holds NaN or infinity is removed)."""
        path = self.path(layer)
        opened = _open_regular(str(path))
        if opened is None:
            return None
        fd, info = opened
        try:
            with os.fdopen(fd, "rb") as file:
                return self._read(file, info, layer)
        except _Damaged:
            _remove(str(path), info)
        except (OSError, ValueError, TypeError, KeyError, UnicodeDecodeError):
            pass
        return None

    def _read(self, file: Any, info: os.stat_result, layer: int) -> Tensor | None:
        lead = file.read(len(MAGIC) + 8)
        if len(lead) != len(MAGIC) + 8 or lead[:len(MAGIC)] != MAGIC:
            return None  # not ours
        size = int.from_bytes(lead[len(MAGIC):], "little")
        if size > MAX_HEADER:
            raise _Damaged
        try:  # orjson: strict JSON, nesting bounded (a deep header is an error, not a recursion)
            header = orjson.loads(file.read(size))
        except orjson.JSONDecodeError:
            raise _Damaged from None
        expected = {"key": self.key, "layer": layer, "shape": self.shape, "dtype": "float32"}
        if not isinstance(header, dict) or any(header.get(k) != v for k, v in expected.items()):
            return None  # another key's: a store replaces it
        start = len(MAGIC) + 8 + size
        start += -start % ALIGN
        payload = math.prod(self.shape) * 4
        if info.st_size != start + payload:
            raise _Damaged
        file.seek(start)
        stream = torch.empty(self.shape, dtype=torch.float32)  # (T, d_model) or (heads, T, T)
        view = stream.numpy().data.cast("B")
        if file.readinto(view) != payload or hashlib.sha256(view).hexdigest() != header["sha256"]:
            raise _Damaged
        if not torch.isfinite(stream).all():  # a pass never keeps one: written by another hand
            raise _Damaged
        try:
            os.utime(file.fileno())  # used now: the last to be evicted
        except OSError:
            pass
        return stream

    def store(self, layer: int, stream: Tensor) -> None:
        """Keep the stream entering layer; a failed write leaves no file and one note."""
        data = stream.detach().to("cpu", torch.float32).contiguous()  # (T, d_model) or (h, T, T)
        if list(data.shape) != self.shape:
            raise ValueError(f"a cache entry of shape {list(data.shape)}, not {self.shape}")
        if not torch.isfinite(data).all():  # overflowed: the command says so; nothing to keep
            return
        view = data.numpy().data.cast("B")
        lead = self._header(layer, hashlib.sha256(view).hexdigest())
        try:
            self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd, temp = tempfile.mkstemp(dir=self.folder, prefix=TEMP_PREFIX, suffix=SUFFIX)
            try:
                with os.fdopen(fd, "wb") as file:
                    file.write(lead)
                    file.write(view)
                    file.flush()
                    os.fsync(file.fileno())
                os.replace(temp, self.path(layer))
                self._written.append(self.path(layer))
            except BaseException:
                Path(temp).unlink(missing_ok=True)
                raise
        except OSError as err:
            _note(self.folder, err.strerror or type(err).__name__)
            return
        if not self._room_made:  # one scan of the folder a pass, not one a layer
            self._room_made = True
            evict(self.folder, max(0, self.cap - self.reserve))

    def forget(self) -> None:
        """Remove every file this object wrote (its pass read a file that changed)."""
        for path in self._written:
            path.unlink(missing_ok=True)
        self._written.clear()


class _Damaged(Exception):
    """One of the cache's own files that cannot be used: removed, as a miss."""


def _note(folder: Path | str, reason: str) -> None:
    """One line on stderr, once a process: the cache was not written, the result stands."""
    if _noted:
        return
    _noted.append(str(folder))
    print(f"attncli: note: hidden states not cached in {escaped(str(folder))} ({reason}); "
          "results are unaffected", file=sys.stderr)


def _ours(path: str) -> os.stat_result | None:
    """The file's status where it is a regular file (never through a link) that starts with
    the cache's magic line, read with one bounded read; None for anything else."""
    opened = _open_regular(path)
    if opened is None:
        return None
    fd, info = opened
    try:
        return info if os.pread(fd, len(MAGIC), 0) == MAGIC else None
    except OSError:
        return None
    finally:
        os.close(fd)


def _open_regular(path: str) -> tuple[int, os.stat_result] | None:
    """A descriptor open on path and its status, where path is a regular file: a link is never
    followed, and a folder, a FIFO (never waited on) or a device is never read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    info = os.fstat(fd)  # of a descriptor just opened: it does not fail
    if stat.S_ISREG(info.st_mode):
        return fd, info
    os.close(fd)
    return None


def evict(folder: Path, cap: int) -> None:
    """Remove the least recently used entries until the folder's entries fit in cap bytes;
    only this cache's own files (those that start with its magic line, among them temporary
    files a dead writer left) are touched."""
    now = time.time()
    named: list[tuple[str, int]] = []
    try:
        with os.scandir(folder) as listing:
            for entry in listing:
                if entry.name.endswith(SUFFIX) and entry.is_file(follow_symlinks=False):
                    named.append((entry.path, entry.stat(follow_symlinks=False).st_size))
    except OSError:
        return
    stale = {path for path, _ in named if os.path.basename(path).startswith(TEMP_PREFIX)}
    if sum(size for _, size in named) <= cap and not stale:
        return  # nothing to remove: no file need be opened
    entries: list[tuple[int, str, os.stat_result]] = []
    for path, _ in named:
        info = _ours(path)
        if info is None:
            continue
        if path in stale:
            if now - info.st_mtime > STALE_TEMP_S:
                _remove(path, info)
            continue
        entries.append((info.st_mtime_ns, path, info))
    total = sum(info.st_size for _, _, info in entries)
    for _, path, info in sorted(entries, key=lambda e: e[:2]):
        if total <= cap:
            break
        _remove(path, info)
        total -= info.st_size


def _remove(path: str, info: os.stat_result) -> None:
    """Unlink path where it is still the file info describes (not one a writer put there since)."""
    try:
        now = os.stat(path, follow_symlinks=False)
        if (now.st_dev, now.st_ino) == (info.st_dev, info.st_ino):
            os.unlink(path)
    except OSError:
        pass
