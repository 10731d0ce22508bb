"""A Hugging Face model folder's safetensors, one file or sharded, read lazily as float32."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from torch import Tensor

from attncli.core.inputs import read_json_file
from attncli.errors import AttnCliError
from attncli.models.checks.values import shown
from attncli.models.locate import is_file, utf8_name

INDEX = "model.safetensors.index.json"
FLOAT_DTYPES = ("F16", "BF16", "F32", "F64")
_PLAIN_NAME = re.compile(r"(?!\.\.?$)[^/\\\x00]{1,255}")  # no folder, no . or ..


def read_index(index: Path) -> dict[str, str]:
    """The shard index's weight_map (tensor name → shard file name), read by the one JSON
    reader and checked: every shard a plain file name in the index's own folder."""
    doc = read_json_file(index, f"the shard index {index}")
    weight_map = doc.get("weight_map") if isinstance(doc, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise AttnCliError(f"the shard index {index} has no weight_map object of tensor names "
                           "and shard files")
    for name, shard in weight_map.items():
        if not isinstance(shard, str) or not _PLAIN_NAME.fullmatch(shard):
            raise AttnCliError(f"the shard index {index} names {shown(shard)} for the tensor "
                               f"{shown(name)}: expected a file name beside the index")
    return weight_map


def weight_files(directory: Path) -> dict[str, Path]:
    """Tensor name → the file holding it, from model.safetensors or the shard index."""
    index = directory / INDEX
    if not is_file(directory / "model.safetensors") and is_file(index):
        files = {name: directory / shard for name, shard in read_index(index).items()}
        for shard in sorted(set(files.values())):
            if not is_file(shard):
                raise AttnCliError(f"{index} names the shard {shard.name}, which is not in "
                                   f"{directory}")
        return files
    single = directory / "model.safetensors"
    if not is_file(single):
        raise AttnCliError(f"{directory} has neither model.safetensors nor {INDEX}")
    with _open(single) as handle:
        return dict.fromkeys(handle.keys(), single)


@contextmanager
def _open(file: Path) -> Iterator[Any]:
    """safe_open with its errors turned into ours (memory-mapped, never unpickled)."""
    try:
        with utf8_name(file) as name:
            handle = safe_open(name, framework="pt")
    except (SafetensorError, OSError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise AttnCliError(f"cannot read {file} as safetensors (truncated or corrupt?): "
                           f"{reason}") from None
    with handle:
        yield handle


class ShardSet:
    """Open shards behind safe_open's own interface: keys, get_slice and get_tensor."""

    def __init__(self, files: dict[str, Path], handles: dict[Path, Any]) -> None:
        self._files = files
        self._handles = handles

    def keys(self) -> list[str]:
        """Every tensor name, in every shard."""
        return list(self._files)

    def get_slice(self, key: str) -> Any:
        """A lazy view of one tensor, from the shard that holds it."""
        if key not in self._files:
            raise AttnCliError(f"the checkpoint lacks the tensor {key}")
        return self._handles[self._files[key]].get_slice(key)

    def get_tensor(self, key: str) -> Tensor:
        """One whole tensor, in its stored dtype."""
        return self.get_slice(key)[:]


@contextmanager
def open_shard_set(directory: Path) -> Iterator[ShardSet]:
    """Open every shard of a model folder (model.safetensors or the index's) for lazy reads."""
    files = weight_files(directory)
    with ExitStack() as stack:
        handles = {file: stack.enter_context(_open(file)) for file in sorted(set(files.values()))}
        yield ShardSet(files, handles)


class ShardedWeights:
    """Open shards: each lookup reads one tensor from disk and computes in float32."""

    def __init__(self, shards: ShardSet, prefix: str) -> None:
        self._shards = shards
        self._names = set(shards.keys())
        self._prefix = prefix

    def __contains__(self, name: str) -> bool:
        return self._prefix + name in self._names

    def _slice(self, name: str) -> Any:
        return self._shards.get_slice(self._prefix + name)

    def __getitem__(self, name: str) -> Tensor:
        return self._slice(name)[:].float()

    def shape(self, name: str) -> tuple[int, ...]:
        """The tensor's shape, read from the header only."""
        return tuple(self._slice(name).get_shape())

    def dtype(self, name: str) -> str:
        """The tensor's stored dtype name (F32, BF16, ...), read from the header only."""
        return str(self._slice(name).get_dtype())

    def rows(self, name: str, indices: Sequence[int]) -> Tensor:
        """Only the given rows of a 2-D tensor: an embedding lookup that skips the rest."""
        table = self._slice(name)
        return torch.cat([table[i : i + 1] for i in indices]).float()  # (len(indices), d)


@contextmanager
def open_sharded(directory: Path, prefix: str = "") -> Iterator[ShardedWeights]:
    """Open every shard of a model folder for lazy float32 reads of prefix + name."""
    with open_shard_set(directory) as shards:
        yield ShardedWeights(shards, prefix)


def check_tensors(expected: dict[str, tuple[int, ...]], shape: Callable[[str], tuple[int, ...]],
                  dtype: Callable[[str], str], has: Callable[[str], bool], prefix: str,
                  where: object, model: str) -> None:
    """Every tensor a run reads is present, float, and shaped as the config says: one line
    naming the first that is not (model: what needs them, e.g. "3-layer GPT-2")."""
    missing = [prefix + name for name in expected if not has(name)]
    if missing:
        listed = ", ".join(missing[:4]) + (", ..." if len(missing) > 4 else "")
        raise AttnCliError(f"{where} lacks {len(missing)} tensor(s) a {model} needs: {listed}")
    for name, want in expected.items():
        if shape(name) != want:
            raise AttnCliError(f"tensor {prefix}{name} in {where} has shape {shape(name)}, "
                               f"expected {want}")
        if dtype(name) not in FLOAT_DTYPES:
            raise AttnCliError(f"tensor {prefix}{name} in {where} has dtype {dtype(name)}, "
                               f"expected one of {', '.join(FLOAT_DTYPES)}")
