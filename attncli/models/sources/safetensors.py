"""Safetensors weights: one file, or a folder's shards behind model.safetensors.index.json.

Memory-mapped (by the safetensors package: a file larger than an address-space limit cannot be
opened) and never unpickled; each tensor is read when it is asked for, as float32, and every
file read (config, tokenizer, index, shards) is checked unchanged after each tensor.

A tensor is read inside `activity.whole()`: torch's C code, which builds it from the file's
storage, calls back into Python (UntypedStorage.__getitem__), and a KeyboardInterrupt raised
there comes out as a ValueError ("could not determine the shape of object type ..."). The
command line holds a Ctrl-C until the read ends, so that it stops a generation cleanly.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from safetensors import SafetensorError, safe_open

from attncli.activity import whole
from attncli.core.inputs import parse_json, read_json_file
from attncli.errors import AttnCliError
from attncli.machine import read_limited
from attncli.models.checks.values import shown
from attncli.models.sources.identity import Opened, identity_of
from attncli.models.stores.locate import (
    convert_hint,
    file_in_dir,
    is_dir,
    is_file,
    is_pickle,
    read_config_file,
    refuse_special,
    utf8_name,
)

if TYPE_CHECKING:
    from torch import Tensor

INDEX = "model.safetensors.index.json"
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


def _sharded(index: Path, opened: Opened) -> dict[str, Path]:
    """Tensor name → shard file, every shard checked to be there."""
    _note(index, opened)
    directory = index.parent
    files = {name: directory / shard for name, shard in read_index(index).items()}
    for shard in sorted(set(files.values())):
        if not is_file(shard):
            raise AttnCliError(f"{index} names the shard {shard.name}, which is not in "
                               f"{directory}")
        _note(shard, opened)  # as it is now: a shard replaced before it is opened has changed
    return files


def _note(file: Path, opened: Opened) -> Path:
    """file, noted as it is before it is read (where it cannot be seen, its read says why)."""
    try:
        opened.record(file, identity_of(os.stat(file)))
    except (OSError, ValueError):
        pass
    return file


@contextmanager
def _opened(file: Path) -> Iterator[Any]:
    """safe_open with its errors (truncated, corrupt, a pickle) turned into one line."""
    try:
        with utf8_name(file) as name:
            handle = safe_open(name, framework="pt")
    except (SafetensorError, OSError) as exc:
        if is_pickle(file):
            raise AttnCliError(f"{file} is a pickle checkpoint, not safetensors; "
                               + convert_hint(file)) from None
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise AttnCliError(f"cannot read {file} as safetensors (truncated or corrupt?): "
                           f"{reason}") from None
    yield handle


class SafetensorsSource:
    """A safetensors checkpoint: config.json beside it, its tensors, its tokenizer.json."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.label = "tokenizer.json"
        self.vocabulary_inside = False  # a tokenizer.json beside it is optional
        self.config_name = "config.json"
        self._folder = path if is_dir(path) else path.parent
        self._files: dict[str, Path] | None = None
        self._handles: dict[Path, Any] = {}
        self._shapes: dict[str, tuple[int, ...]] | None = None
        self._file: Path | None = None
        self._seen = Opened()  # every file read, as it was before it was read

    @property
    def weights_file(self) -> Path:
        """The file errors name: model.safetensors, the shard index, or the one file given."""
        if self._file is None:
            self._file = file_in_dir(self.path) if is_dir(self.path) else self.path
        return self._file

    def config(self) -> dict[str, Any]:
        """config.json beside the weights, or {} when there is none."""
        file = self._folder / "config.json"
        refuse_special(file)
        return read_config_file(_note(file, self._seen)) if is_file(file) else {}

    def _where(self) -> dict[str, Path]:
        """Tensor name → the file holding it (headers read once)."""
        if self._files is None:
            file = self.weights_file
            if file.name.endswith(".safetensors.index.json"):
                self._files = _sharded(file, self._seen)
            else:
                self._files = dict.fromkeys(self._handle(file).keys(), file)
        return self._files

    def _handle(self, file: Path) -> Any:
        if file not in self._handles:
            with _opened(_note(file, self._seen)) as handle:
                self._handles[file] = handle
        return self._handles[file]

    def _slice(self, name: str) -> Any:
        files = self._where()
        if name not in files:
            raise AttnCliError(f"the checkpoint lacks the tensor {name}")
        return self._handle(files[name]).get_slice(name)

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """Every tensor's shape, from the headers only."""
        if self._shapes is None:
            self._shapes = {name: tuple(self._slice(name).get_shape()) for name in self._where()}
        return self._shapes

    def dtype_name(self, name: str) -> str:
        """The stored dtype (F32, BF16, ...), from the header only."""
        return str(self._slice(name).get_dtype())

    def tensor(self, name: str) -> Tensor:
        """One whole tensor, as float32."""
        with whole():  # a Ctrl-C lands after the read (see the top)
            tensor = self._slice(name)[:].float()
        self.unchanged()
        return tensor

    def unchanged(self) -> None:
        """One line where a file read was renamed over or rewritten since it was read."""
        self._seen.check()

    def rows(self, name: str, indices: Sequence[int]) -> Tensor:
        """Only the given rows of a 2-D tensor: an embedding lookup that skips the rest."""
        import torch

        table = self._slice(name)
        with whole():  # a Ctrl-C lands after the read (see the top)
            if isinstance(indices, range) and indices.step == 1 and len(indices):  # a block
                rows = table[indices.start:indices.stop].float()  # (len(indices), d)
            else:
                rows = torch.cat([table[i : i + 1] for i in indices]).float()  # (len(ind.), d)
        self.unchanged()
        return rows

    def tokenizer_json(self) -> str | None:
        """tokenizer.json beside the weights, read by the one JSON reader (its limits)."""
        file = self._folder / "tokenizer.json"
        refuse_special(file)
        if not is_file(file):
            return None
        try:
            with open(file, "rb") as stream:
                self._seen.record(file, identity_of(os.fstat(stream.fileno())))
                data = read_limited(stream, str(file))
        except OSError as err:
            raise AttnCliError(f"cannot read {file}: {err.strerror or err}") from None
        if not isinstance(parse_json(data, str(file)), dict):
            raise AttnCliError(f"{file} is not a JSON object")
        return data.decode("utf-8")


def open_safetensors(path: Path) -> SafetensorsSource:
    """A folder, a .safetensors file or a shard index, opened lazily."""
    return SafetensorsSource(path)
