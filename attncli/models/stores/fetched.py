"""attncli's own cache: the models `attncli pull` (and scripts/fetch_model.py) fetched (SmolLM2's
GGUF file, and Hugging Face folders of config.json and model.safetensors), listed and found by
name; a pulled model's --model is its short name (smollm2).

A file or folder named with a leading dot (the fetch's `.fetch-*` temporary folders) or ending in
`.part` is never a model; FIFOs, devices and symlink loops are passed over without being opened.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import time
from collections import Counter
from itertools import islice
from pathlib import Path
from typing import Any

from attncli.errors import AttnCliError
from attncli.models.stores.cachedir import ENV, model_cache_dir
from attncli.models.stores.ollama import shown
from attncli.models.stores.paths import exists, expanded, is_file, is_model_gguf
from attncli.models.stores.pull import PULLABLE, Pullable

SOURCE = "attncli"
MAX_ENTRIES = 10_000  # entries looked at in the cache folder
SHOWN = 8  # candidates named in one error line
# A pull's temporary folder: .fetch-PID-... (its process's id), .fetch-... before it had one.
FETCHING = re.compile(r"\.fetch-(?:(\d+)-)?.+")
STALE_S = 3600  # untouched this long, with its process gone (a day, without a process id)


def missing(model: Pullable, cache: Path) -> list[str]:
    """The pinned files the cache's copy of model lacks (looked at, not hashed): [] where it is
    whole, or where nothing of it is there."""
    where = cache / model.target
    if not os.path.lexists(where):
        return []
    if not model.files:
        return [] if os.path.isfile(where) else [model.target]
    return [name for name in model.files if not os.path.isfile(where / name)]


def whole(model: Pullable, cache: Path) -> bool:
    """Whether cache holds model with every pinned file (looked at, not hashed)."""
    return exists(cache / model.target) and not missing(model, cache)


def fetched_root() -> Path:
    """attncli's model cache folder ($ATTNCLI_MODEL_CACHE, else $XDG_CACHE_HOME/attncli/models,
    else ~/.cache/attncli/models)."""
    value = os.environ.get(ENV)
    if value:
        return expanded(value, ENV)  # ~user of no such user is one line naming the variable
    try:
        return model_cache_dir()
    except RuntimeError:  # no HOME and no password entry
        raise AttnCliError("cannot find the home folder for attncli's model cache; set "
                           "ATTNCLI_MODEL_CACHE to it") from None


def _is_partial(name: str) -> bool:
    return name.startswith(".") or name.lower().endswith(".part")


def _kind(path: Path) -> str | None:
    """"gguf" for a model GGUF file, "folder" for a checkpoint folder, None for anything else
    (looked at with stat alone, so a FIFO is never opened and a symlink loop is one OSError)."""
    try:
        mode = path.stat().st_mode
    except (OSError, ValueError):
        return None
    if stat.S_ISREG(mode) and is_model_gguf(path.name):
        return "gguf"
    if stat.S_ISDIR(mode) and (is_file(path / "config.json") or
                               is_file(path / "model.safetensors")):
        return "folder"
    return None


def _name(path: Path, kind: str) -> str:
    return path.name[:-len(".gguf")] if kind == "gguf" else path.name


def fetched_models() -> list[dict[str, Any]]:
    """Each model in attncli's cache, by name: a GGUF file's stem, or a folder's name, with its
    kind ("gguf" or "folder"), path, and what --model takes for it (the name, or the path where
    two share the name); nothing where the folder is absent or unreadable."""
    try:
        root = fetched_root()
        with os.scandir(root) as scan:
            names = sorted(entry.name for entry in islice(scan, MAX_ENTRIES))
    except (AttnCliError, OSError, ValueError):
        return []
    kinds = [(root / name, None if _is_partial(name) else _kind(root / name)) for name in names]
    found = [{"name": _name(path, kind), "source": SOURCE, "kind": kind, "path": str(path)}
             for path, kind in kinds if kind is not None]
    shared = Counter(entry["name"] for entry in found)
    short = {model.target: name for name, model in PULLABLE.items()}
    return [{**entry, "model": short.get(Path(entry["path"]).name) or (
        entry["name"] if shared[entry["name"]] == 1 else entry["path"])} for entry in found]


def find_fetched(name: str) -> Path | None:
    """The file or folder name means in attncli's cache (a GGUF's stem or file name, a folder's
    name), None if none; a name two entries share is one line naming them."""
    if not name or "/" in name or os.sep in name or "\0" in name or _is_partial(name):
        return None
    found = [entry for entry in fetched_models()
             if name in (entry["name"], Path(entry["path"]).name)]
    if len(found) > 1:
        listed = ", ".join(shown(Path(entry["path"]).name) for entry in found[:SHOWN])
        raise AttnCliError(f"{shown(name)} names {len(found)} models in attncli's cache "
                           f"({listed}); pass the path of the one to use")
    return Path(found[0]["path"]) if found else None


def _alive(pid: int) -> bool:
    """Whether process pid runs (another user's too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True  # someone else's, or not a pid this system can ask about: left alone
    return True


def sweep_stale(cache: Path) -> int:
    """Remove the temporary folders a pull that was killed left in cache (a SIGKILL gives it no
    chance to): each .fetch-PID-* folder whose process is gone and that nobody touched for an
    hour (one named before pulls put their id in it: a day). Returns the bytes freed."""
    freed, now = 0, time.time()
    try:
        entries = list(islice(os.scandir(cache), MAX_ENTRIES))
    except OSError:
        return 0
    for entry in entries:
        found = FETCHING.fullmatch(entry.name)
        try:
            if found is None or not entry.is_dir(follow_symlinks=False):
                continue
            age = now - entry.stat(follow_symlinks=False).st_mtime
            pid = found.group(1)
            if age < (STALE_S if pid else 24 * STALE_S) or (pid and _alive(int(pid))):
                continue
            size = sum(f.lstat().st_size for f in Path(entry.path).rglob("*")
                       if f.is_file() and not f.is_symlink())  # what rmtree frees
            shutil.rmtree(entry.path)
            freed += size
        except OSError:
            continue  # in use, or not ours to remove: the next pull tries again
    return freed
