"""`attncli models`: the checkpoints in the local Hugging Face cache that attncli can read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from attncli.models.llama_config import FAMILIES
from attncli.models.locate import hub_cache_dir, snapshot_of

INDEX = "model.safetensors.index.json"


def _weight_files(folder: Path) -> list[Path]:
    """The safetensors files of a snapshot: model.safetensors, or the shards of the index."""
    if (folder / "model.safetensors").is_file():
        return [folder / "model.safetensors"]
    if (folder / INDEX).is_file():
        try:
            weight_map = json.loads((folder / INDEX).read_text(encoding="utf-8"))["weight_map"]
            return sorted({folder / str(shard) for shard in weight_map.values()})
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return []
    return []


def describe_folder(name: str, folder: Path) -> dict[str, Any] | None:
    """One readable checkpoint's row, or None when attncli cannot read the folder."""
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    files = _weight_files(folder)
    if not isinstance(config, dict) or not files or not all(f.is_file() for f in files):
        return None
    arch = config.get("model_type", "gpt2")
    if arch == "gpt2":
        layers, heads = config.get("n_layer", 12), config.get("n_head", 12)
        kv_heads = heads
    elif arch in FAMILIES:
        layers, heads = config.get("num_hidden_layers"), config.get("num_attention_heads")
        kv_heads = config.get("num_key_value_heads", heads)
    else:
        return None
    size = sum(f.stat().st_size for f in files)  # stat follows the cache's symlinks to blobs
    return {"name": name, "architecture": arch, "layers": layers, "heads": heads,
            "kv_heads": kv_heads, "size_bytes": size, "path": str(folder)}


def cached_models(cache: Path | None = None) -> dict[str, Any]:
    """Every model in the hub cache that attncli can read, by name."""
    cache = cache or hub_cache_dir()
    rows = []
    if cache.is_dir():
        for repo_dir in sorted(cache.glob("models--*")):
            name = repo_dir.name.removeprefix("models--").replace("--", "/")
            snapshot = snapshot_of(repo_dir)
            row = describe_folder(name, snapshot) if snapshot is not None else None
            if row is not None:
                rows.append(row)
    return {"cache": str(cache), "models": rows}
