"""`attncli models`: the checkpoints in the local Hugging Face cache that attncli can read, and
the folders it cannot, each with the reason (read defensively: nothing there stops the list)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from attncli.errors import AttnCliError
from attncli.models.stores.locate import (
    hub_cache_dir,
    is_dir,
    is_file,
    read_config_file,
    snapshot_of,
)

INDEX = "model.safetensors.index.json"


def json_text(text: str) -> str:
    """text that strict UTF-8 JSON can hold: a file name's undecodable bytes as \\xNN."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        try:
            raw = text.encode("utf-8", "surrogateescape")  # the bytes the name really has
        except UnicodeEncodeError:
            raw = text.encode("utf-8", "backslashreplace")
        return raw.decode("utf-8", "backslashreplace")


def _weight_files(folder: Path) -> list[Path]:
    """The safetensors files of a snapshot: model.safetensors, or the shards of the index."""
    from attncli.models.sources.safetensors import read_index

    if is_file(folder / "model.safetensors"):
        return [folder / "model.safetensors"]
    if is_file(folder / INDEX):
        files = sorted({folder / shard for shard in read_index(folder / INDEX).values()})
        missing = [f.name for f in files if not is_file(f)]
        if missing:
            raise AttnCliError(f"the shard index names {len(missing)} missing shard(s): "
                               f"{', '.join(missing[:3])}")
        return files
    raise AttnCliError("no model.safetensors (nor a shard index)")


def _shape(config: dict[str, Any], folder: Path) -> tuple[str, int, int, int]:
    """architecture, layers, heads and kv heads, from a config checked as --model checks it."""
    from attncli.models.family import DEFAULT, REGISTRY, family_named

    arch = config.get("model_type", DEFAULT)
    if not isinstance(arch, str) or arch not in REGISTRY:
        raise AttnCliError(f"model_type {str(arch)[:40]!r} is not one attncli reads "
                           f"({', '.join(REGISTRY)})")
    return arch, *family_named(arch).shape(config, folder)


def describe_folder(name: str, folder: Path) -> dict[str, Any]:
    """One readable checkpoint's row; an AttnCliError says why attncli cannot read the folder."""
    if not is_file(folder / "config.json"):
        raise AttnCliError("no config.json")
    config = read_config_file(folder / "config.json")
    arch, layers, heads, kv_heads = _shape(config, folder)
    files = _weight_files(folder)
    try:
        size = sum(f.stat().st_size for f in files)  # stat follows the cache's links to blobs
    except OSError as err:
        raise AttnCliError(f"cannot read the size of its weights: {err.strerror}") from None
    return {"name": json_text(name), "architecture": arch, "layers": layers, "heads": heads,
            "kv_heads": kv_heads, "size_bytes": size, "path": json_text(str(folder))}


def _reason(err: AttnCliError, folder: Path) -> str:
    """The error's line, without the folder's own path where it repeats it."""
    return str(err).replace(f"{folder}/", "").replace(str(folder), "the snapshot")[:300]


def _no_snapshot(repo_dir: Path) -> str:
    """Why a repo folder gives no snapshot: it cannot be read, or it names none."""
    for folder in (repo_dir, repo_dir / "snapshots"):
        if is_dir(folder) and not os.access(folder, os.R_OK | os.X_OK):
            return f"cannot read {folder.name}/: permission denied"
    return "no snapshot folder (refs/main and snapshots/ name none)"


def _repo_dirs(cache: Path) -> list[Path]:
    try:
        return sorted(p for p in cache.iterdir() if p.name.startswith("models--"))
    except OSError as err:
        raise AttnCliError(f"cannot list the hub cache {cache}: {err.strerror or err}") from None


def cached_models(cache: Path | None = None) -> dict[str, Any]:
    """Every model in the hub cache that attncli can read, by name, and those it cannot."""
    cache = cache or hub_cache_dir()
    rows, unreadable = [], []
    for repo_dir in _repo_dirs(cache) if is_dir(cache) else []:
        name = repo_dir.name.removeprefix("models--").replace("--", "/")
        snapshot = snapshot_of(repo_dir)
        try:
            if snapshot is None:
                raise AttnCliError(_no_snapshot(repo_dir))
            rows.append(describe_folder(name, snapshot))
        except AttnCliError as err:
            where = snapshot if snapshot is not None else repo_dir
            unreadable.append({"name": json_text(name), "path": json_text(str(where)),
                               "reason": json_text(_reason(err, where))})
    return {"cache": json_text(str(cache)), "models": rows, "unreadable": unreadable}
