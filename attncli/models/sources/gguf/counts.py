"""A GGUF file's `{arch}.*` counts checked before anything is built from them: each one a whole
number in range, then compared with the tensors the file actually holds.

A count is metadata anyone can write: a block_count of 2**64 would otherwise become a per-layer
name table, a layer-type list and a loop over layers that never end. llama.cpp refuses a count
stored with the wrong type (llama-model-loader's get_key checks it); so does this, and the
tensor table, whose size the header has already checked against the file's, bounds the rest.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from attncli.errors import AttnCliError
from attncli.models.sources.gguf.header import GgufHeader

# key suffix -> the least value llama.cpp's loader accepts for it
COUNTS = {"block_count": 1, "embedding_length": 1, "feed_forward_length": 1,
          "attention.head_count": 1, "attention.head_count_kv": 1, "context_length": 1,
          "attention.key_length": 1, "attention.value_length": 1, "rope.dimension_count": 1,
          "attention.sliding_window": 0, "rope.scaling.original_context_length": 1}
_LAYER = re.compile(r"blk\.(0|[1-9]\d{0,8})\.")  # at most 9 digits: never a huge int()
_QUERY_ROWS = ("blk.0.attn_q.weight", "blk.0.attn_qkv.weight")  # (rows, d) as ne1 = rows
_HEAD_COUNTS = ("attention.head_count", "attention.head_count_kv", "attention.key_length",
                "attention.value_length", "rope.dimension_count")


def shown(value: Any) -> str:
    """A metadata value as an error line shows it: short, whatever it holds."""
    if isinstance(value, list | np.ndarray):
        return f"an array of {len(value):,} values"
    if isinstance(value, str):
        return f"the string {value[:40]!r}" + ("..." if len(value) > 40 else "")
    if isinstance(value, bool):
        return f"the boolean {value}"
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return f"{value:,}" if isinstance(value, int) else repr(value)


def _fail(header: GgufHeader, key: str, value: Any, why: str) -> AttnCliError:
    return AttnCliError(f"{header.path}: metadata {key} is {shown(value)}, {why}")


def check_counts(header: GgufHeader, arch: str) -> None:
    """Every count a whole number in range, and as the tensor table says; else one line."""
    meta = header.metadata
    parts, part = meta.get("split.count"), meta.get("split.no")
    if isinstance(parts, int) and not isinstance(parts, bool) and parts > 1:  # gguf-split's
        at = f"part {part + 1} of " if isinstance(part, int) and 0 <= part < parts else "one of "
        raise AttnCliError(f"{header.path} is {at}a GGUF split into {parts:,} files; attncli "
                           "reads a model kept in one file: join them once with `llama-gguf-"
                           "split --merge FIRST-PART.gguf MODEL.gguf`")
    for suffix, least in COUNTS.items():
        key = f"{arch}.{suffix}"
        value = meta.get(key)
        if value is None:
            continue
        if isinstance(value, list | np.ndarray):
            raise _fail(header, key, value, "one per layer; attncli reads models whose layers "
                                            "all have the same sizes (one whole number)")
        if isinstance(value, bool) or not isinstance(value, int):
            raise _fail(header, key, value, f"not a whole number of at least {least}")
        if value < least:
            raise _fail(header, key, value, f"less than {least}")
    _check_layers(header, arch)
    _check_widths(header, arch)


def _check_layers(header: GgufHeader, arch: str) -> None:
    """block_count is the number of layers blk.0 .. blk.N-1 the file holds tensors for."""
    key = f"{arch}.block_count"
    claimed = header.metadata.get(key)
    held = {int(m.group(1)) for name in header.tensors if (m := _LAYER.match(name))}
    if not isinstance(claimed, int):
        return  # absent: build_config names it
    if claimed != len(held) or (held and max(held) != claimed - 1):
        last = f"blk.0 .. blk.{max(held)}" if held else "none"
        raise _fail(header, key, claimed, f"but the file holds tensors for {len(held):,} "
                                          f"layers ({last})")


def _check_widths(header: GgufHeader, arch: str) -> None:
    """embedding_length, feed_forward_length and head counts against the tensors' shapes."""
    meta, tensors = header.metadata, header.tensors
    embedding = tensors.get("token_embd.weight")
    if embedding is None:
        raise AttnCliError(f"{header.path}: a {arch} GGUF without a token_embd.weight tensor")
    width = meta.get(f"{arch}.embedding_length")
    if isinstance(width, int) and width != embedding.dims[0]:
        raise _fail(header, f"{arch}.embedding_length", width, "but token_embd.weight is "
                    f"{embedding.dims[0]:,} wide")
    down = tensors.get("blk.0.ffn_down.weight")
    ffn = meta.get(f"{arch}.feed_forward_length")
    if isinstance(ffn, int) and down is not None and ffn != down.dims[0]:
        raise _fail(header, f"{arch}.feed_forward_length", ffn, "but blk.0.ffn_down.weight "
                    f"takes {down.dims[0]:,} inputs")
    query = next((tensors[n] for n in _QUERY_ROWS if n in tensors), None)
    if query is None:
        return
    rows = query.shape[0]  # every head has at least one row here
    for suffix in _HEAD_COUNTS:
        count = meta.get(f"{arch}.{suffix}")
        if isinstance(count, int) and count > rows:
            raise _fail(header, f"{arch}.{suffix}", count, f"more than the {rows:,} rows of "
                        f"{query.name}")
