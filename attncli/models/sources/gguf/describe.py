"""What a GGUF file holds, from its header alone (no tensor data read), for `attncli models`."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gguf import LlamaFileType

from attncli.errors import AttnCliError
from attncli.models.sources.base import config_of
from attncli.models.sources.gguf.header import GgufHeader, read_header
from attncli.models.sources.gguf.source import GgufSource, can_dequantize
from attncli.models.sources.gguf.tokenizer import tokenizer_json


def quantization(header: GgufHeader) -> str:
    """The type most of the file's matrices are stored as, else general.file_type's name."""
    kinds = Counter(t.qtype.name for t in header.tensors.values() if len(t.dims) >= 2)
    if kinds:
        return kinds.most_common(1)[0][0]
    try:
        return LlamaFileType(header.metadata.get("general.file_type", -1)).name
    except ValueError:
        return "unknown"


Check = Callable[[dict[str, Any]], object]  # a family's checks of a config, from above


def _problem(header: GgufHeader, check: Check | None) -> str | None:
    """Why attncli cannot read this file, or None; check: the family's checks of its config
    (what --model refuses before any weight is read)."""
    try:
        source = GgufSource(header)
        if check is not None:
            with config_of(source):
                check(source.config())
        unreadable = sorted({t.qtype.name for t in header.tensors.values()
                             if not can_dequantize(t.qtype)})
        if unreadable:
            return f"tensors stored as {', '.join(unreadable)}, which the gguf package cannot " \
                   "dequantize"
        if tokenizer_json(header) is None:
            return "it has no tokenizer.ggml.model (no vocabulary to tokenise with)"
    except AttnCliError as err:
        return str(err)
    return None


def describe_gguf(path: Path, check: Check | None = None) -> dict[str, Any]:
    """Architecture, layers, heads, kv heads, quantization, size and readability of a GGUF file
    (check: the family's checks of its config); a file whose header cannot be read is described
    as unreadable, with the reason."""
    try:
        header = read_header(path)
    except AttnCliError as err:
        return {"path": str(path), "format": "gguf", "architecture": None, "layers": None,
                "heads": None, "kv_heads": None, "quantization": None,
                "size": _size(path), "readable": False, "reason": str(err)}
    meta = header.metadata
    arch = meta.get("general.architecture")
    arch = arch if isinstance(arch, str) else None
    heads = _count(meta.get(f"{arch}.attention.head_count"))
    reason = _problem(header, check)
    return {"path": str(path), "format": "gguf", "architecture": arch,
            "layers": _count(meta.get(f"{arch}.block_count")), "heads": heads,
            "kv_heads": _count(meta.get(f"{arch}.attention.head_count_kv", heads)),
            "quantization": quantization(header), "size": header.size,
            "readable": reason is None, "reason": reason}


def _count(value: object) -> int | None:
    """A count as JSON can hold it (some architectures give one per layer: None then)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None
