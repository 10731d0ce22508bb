"""Looking at a path that may be hostile: false, never an exception, where it cannot be seen."""

from __future__ import annotations

from pathlib import Path


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
