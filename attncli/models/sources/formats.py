"""Which reader opens a resolved --model path: the first entry whose test it passes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from attncli.errors import AttnCliError
from attncli.models.sources.base import WeightSource
from attncli.models.sources.safetensors import open_safetensors


def is_gguf(path: Path) -> bool:
    """A .gguf file, or a file that starts with GGUF's magic (Ollama's blobs have no suffix)."""
    if path.suffix.lower() == ".gguf":
        return True
    try:
        if not path.is_file():  # a folder, or a FIFO that open() would wait on
            return False
        with open(path, "rb") as stream:
            return stream.read(4) == b"GGUF"
    except OSError:
        return False


def _open_gguf(path: Path) -> WeightSource:
    from attncli.models.sources.gguf import open_gguf  # imported only for a .gguf file

    return open_gguf(path)


def _is_safetensors(path: Path) -> bool:
    return True  # the last entry: a folder, a .safetensors file or a shard index (GGUF is tried
    # first, so its test, which opens the file, runs once)


# (does this reader take the path?, its opener); the first match wins.
FORMATS: list[tuple[Callable[[Path], bool], Callable[[Path], WeightSource]]] = [
    (is_gguf, _open_gguf),
    (_is_safetensors, open_safetensors),
]


def open_source(path: Path) -> WeightSource:
    """The weight source of a resolved path, read lazily."""
    for takes, opener in FORMATS:
        if takes(path):
            return opener(path)
    raise AttnCliError(f"{path}: attncli has no reader for this file format (it reads "
                       "safetensors and GGUF)")
