"""Which reader opens a resolved --model path: the first entry whose test it passes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from attncli.errors import AttnCliError
from attncli.models.sources.base import WeightSource
from attncli.models.sources.safetensors import open_safetensors


def _is_gguf(path: Path) -> bool:
    return path.suffix.lower() == ".gguf"


def _is_safetensors(path: Path) -> bool:
    return not _is_gguf(path)  # a folder, a .safetensors file, or a shard index


# (does this reader take the path?, its opener); the first match wins.
FORMATS: list[tuple[Callable[[Path], bool], Callable[[Path], WeightSource]]] = [
    # (_is_gguf, open_gguf) from attncli.models.sources.gguf, when it lands.
    (_is_safetensors, open_safetensors),
]


def open_source(path: Path) -> WeightSource:
    """The weight source of a resolved path, read lazily."""
    for takes, opener in FORMATS:
        if takes(path):
            return opener(path)
    raise AttnCliError(f"{path}: attncli has no reader for this file format (it reads "
                       "safetensors)")
