"""`attncli models`: the models in the Hugging Face cache, Ollama's store, LM Studio's folder and
attncli's own cache, each from its headers alone (no tensor read, each distinct GGUF file's header
parsed once), and those attncli cannot read, each with the reason (read defensively: nothing there
stops the list). It walks the stores' folders above models/, which finds a model by its name."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

from attncli.activity import doing
from attncli.errors import AttnCliError
from attncli.models.stores.fetched import fetched_models, fetched_root
from attncli.models.stores.lmstudio import lmstudio_files, lmstudio_roots
from attncli.models.stores.locate import hub_cache_dir, read_config_file, snapshot_of
from attncli.models.stores.ollama import PREFIX, ollama_models, ollama_root
from attncli.models.stores.paths import is_dir, is_file, is_model_gguf
from attncli.render.jsonout import json_text

INDEX = "model.safetensors.index.json"
HF, OLLAMA, LMSTUDIO, FETCHED = "huggingface", "ollama", "lmstudio", "attncli"  # in the JSON
MAX_FILES = 200  # GGUF files listed from one hub repo


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


def _stored_as(folder: Path) -> str:
    """The dtype most of the checkpoint's matrices are stored as (F32, BF16, ...), from the
    safetensors headers only."""
    from attncli.models.sources.safetensors import SafetensorsSource

    source = SafetensorsSource(folder)
    kinds = Counter(source.dtype_name(name) for name, shape in source.shapes().items()
                    if len(shape) >= 2)
    return kinds.most_common(1)[0][0] if kinds else "none"


def _row(name: str, source: str, fmt: str | None, model: str, path: str | None) -> dict[str, Any]:
    """The fields every listed model has: what it is called, where it is kept, how to use it."""
    return {"name": json_text(name), "source": source, "format": fmt,
            "model": json_text(model), "path": None if path is None else json_text(path)}


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
    return {**_row(name, HF, "safetensors", name, str(folder)), "quantization": _stored_as(folder),
            "architecture": arch, "layers": layers, "heads": heads, "kv_heads": kv_heads,
            "size_bytes": size}


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


def _has_safetensors(folder: Path) -> bool:
    return is_file(folder / "model.safetensors") or is_file(folder / INDEX)


def _gguf_files(folder: Path) -> list[Path]:
    """The model GGUF files of a snapshot that has no safetensors (a "-GGUF" repo), by name."""
    try:
        files = sorted(p for p in folder.iterdir() if is_model_gguf(p.name) and is_file(p))
    except OSError:
        return []
    return files[:MAX_FILES]


class Headers:
    """What each GGUF file holds, its header parsed once however many entries name it (thousands
    of Ollama manifests may share a few blobs)."""

    def __init__(self) -> None:
        self.seen: dict[str, dict[str, Any]] = {}

    def describe(self, path: Path) -> dict[str, Any]:
        """describe_gguf(path), from the first description of the same real file."""
        from attncli.models.sources.gguf.describe import describe_gguf

        def check(config: dict[str, Any]) -> object:
            return _shape(config, path.parent)  # as --model checks it

        try:
            key = os.path.realpath(path)
        except (OSError, ValueError):
            return describe_gguf(path, check)
        if key not in self.seen:
            self.seen[key] = describe_gguf(path, check)
        return self.seen[key]


Listed = tuple[list[dict[str, Any]], list[dict[str, Any]], Headers]  # rows, unreadable, headers


def _hub(cache: Path, listed: Listed) -> None:
    """The hub cache's repos: a safetensors checkpoint is one row, a GGUF repo one per file."""
    rows, unreadable, _ = listed
    for repo_dir in _repo_dirs(cache) if is_dir(cache) else []:
        name = repo_dir.name.removeprefix("models--").replace("--", "/")
        snapshot = snapshot_of(repo_dir)
        safetensors = snapshot is not None and _has_safetensors(snapshot)
        ggufs = [] if snapshot is None or safetensors else _gguf_files(snapshot)
        for file in ggufs:
            _add_gguf(f"{name}/{file.name}", HF, str(file), file, listed)
        if ggufs:
            continue
        try:
            if snapshot is None:
                raise AttnCliError(_no_snapshot(repo_dir))
            rows.append(describe_folder(name, snapshot))
        except AttnCliError as err:
            where = snapshot if snapshot is not None else repo_dir
            fmt = "safetensors" if safetensors else None
            unreadable.append({**_row(name, HF, fmt, name, str(where)),
                               "reason": json_text(_reason(err, where))})


def _add_gguf(name: str, source: str, model: str, path: Path, listed: Listed) -> None:
    """A GGUF file's row from its header, or its unreadable entry with the reason."""
    rows, unreadable, headers = listed
    doing(f"reading the header of {name}")
    described = headers.describe(path)
    row = {**_row(name, source, "gguf", model, str(path)),
           "quantization": described["quantization"], "architecture": described["architecture"],
           "layers": described["layers"], "heads": described["heads"],
           "kv_heads": described["kv_heads"], "size_bytes": described["size"]}
    if described["readable"]:
        rows.append(row)
    else:
        unreadable.append({**row, "reason": json_text(str(described["reason"])[:300])})


def _stores(listed: Listed) -> None:
    """Ollama's manifests and LM Studio's files: each a GGUF, or an entry saying why not."""
    unreadable = listed[1]
    for entry in [*ollama_models(), *lmstudio_files()]:
        source = entry["source"]
        model = f"{PREFIX}{entry['name']}" if source == OLLAMA else entry["name"]
        if entry["error"] is not None or entry["path"] is None:
            unreadable.append({**_row(entry["name"], source, "gguf", model, entry["path"]),
                               "reason": json_text(str(entry["error"])[:300])})
        else:
            _add_gguf(entry["name"], source, model, Path(entry["path"]), listed)


def _fetched(listed: Listed) -> None:
    """attncli's own cache: its GGUF files and its Hugging Face folders."""
    rows, unreadable, _ = listed
    for entry in fetched_models():
        name, model, path = entry["name"], entry["model"], Path(entry["path"])
        if entry["kind"] == "gguf":
            _add_gguf(name, FETCHED, model, path, listed)
            continue
        try:
            rows.append({**describe_folder(name, path), "source": FETCHED,
                         "model": json_text(model)})
        except AttnCliError as err:
            unreadable.append({**_row(name, FETCHED, None, model, str(path)),
                               "reason": json_text(_reason(err, path))})


def _where(cache: Path) -> dict[str, Any]:
    """The folders looked in, for the title and the JSON."""
    try:
        ollama: str | None = json_text(str(ollama_root()))
    except AttnCliError:
        ollama = None
    try:
        lmstudio = [json_text(str(root)) for root in lmstudio_roots()]
    except AttnCliError:
        lmstudio = []
    try:
        fetched: str | None = json_text(str(fetched_root()))
    except AttnCliError:
        fetched = None
    return {HF: json_text(str(cache)), OLLAMA: ollama, LMSTUDIO: lmstudio, FETCHED: fetched}


def cached_models(cache: Path | None = None) -> dict[str, Any]:
    """Every model in the hub cache, Ollama's store, LM Studio's folder and attncli's own cache
    that attncli can read, and those it cannot, with the reason."""
    cache = cache or hub_cache_dir()
    rows: list[dict[str, Any]] = []
    unreadable: list[dict[str, Any]] = []
    listed = (rows, unreadable, Headers())
    doing("listing the Hugging Face cache")
    _hub(cache, listed)
    doing("listing Ollama's store and LM Studio's folder")
    _stores(listed)
    doing("listing attncli's cache")
    _fetched(listed)
    return {"kind": "models", "cache": json_text(str(cache)), "stores": _where(cache),
            "models": rows, "unreadable": unreadable}
