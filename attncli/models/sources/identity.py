"""The files a weight source read, as they were when it opened them, checked again after each
read: a file renamed over or rewritten while attncli reads it is one line, never numbers from
neither file, and never a hidden-state cache entry filed under the new one.

A file is known by (device, inode, size, mtime in ns): a rename over it changes the inode, a
rewrite in place the size or the mtime. A file deleted while it is read is no change: what was
opened is still read, and the hidden-state cache, which keys by the files there now, keeps
nothing for a path that is gone.
"""

from __future__ import annotations

import os
from pathlib import Path

from attncli.errors import AttnCliError

Identity = tuple[int, int, int, int]  # (st_dev, st_ino, st_size, st_mtime_ns)


def identity_of(info: os.stat_result) -> Identity:
    """What tells one version of a file from another."""
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns


class FileChanged(AttnCliError):
    """A file changed while it was read: what a pass kept of it is removed."""


def changed(path: Path) -> FileChanged:
    """The one line for a file that changed while it was read."""
    return FileChanged(f"{path} changed while it was read: nothing was cached; run again")


class Opened:
    """Each file a source read, as it was when opened (by path, and by descriptor if kept)."""

    def __init__(self) -> None:
        self._files: dict[Path, tuple[Identity, int | None]] = {}

    def record(self, path: Path, identity: Identity, fd: int | None = None) -> None:
        """Note path as it was before its bytes were read (fd: the descriptor they are read
        from); a file noted before as another version has changed."""
        was = self._files.get(path)
        if was is not None and was[0] != identity:
            raise changed(path)
        if fd is None and was is not None:
            fd = was[1]  # the descriptor noted before
        self._files[path] = (identity, fd)

    def check(self) -> None:
        """One line naming the first file that is no longer as it was when opened."""
        for path, (was, fd) in tuple(self._files.items()):  # browse's workers read too
            try:
                if fd is not None and identity_of(os.fstat(fd)) != was:
                    raise changed(path)  # rewritten in place
                now = identity_of(os.stat(path))
            except FileNotFoundError:
                continue  # deleted: the bytes opened are still the ones read
            except OSError:
                raise changed(path) from None
            if now != was:
                raise changed(path)
