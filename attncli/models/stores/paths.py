"""Looking at a path that may be hostile: false, never an exception, where it cannot be seen."""

from __future__ import annotations

import os
import stat
from pathlib import Path

_SPECIAL = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
            (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def is_file(path: Path) -> bool:
    """path.is_file(), false too where the path cannot be looked at (too long, unreadable)."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def is_dir(path: Path) -> bool:
    """path.is_dir(), false too where the path cannot be looked at (too long, unreadable)."""
    try:
        return path.is_dir()
    except (OSError, ValueError):
        return False


def is_model_gguf(name: str) -> bool:
    """A GGUF file name that holds a model: a vision projector (mmproj) does not."""
    lower = name.lower()
    return lower.endswith(".gguf") and "mmproj" not in lower


def special_kind(path: Path) -> str | None:
    """What path is (links followed) where it is a FIFO, a device or a socket, which an open()
    could wait on forever or read without end; None for a file, a folder or what cannot be seen."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    return next((kind for test, kind in _SPECIAL if test(mode)), None)
