"""What this install has, for `attncli doctor`: its C extensions (each found by the .pyi stub
that ships beside it, so one added later is listed too), torch's build and the devices it sees,
and the folders attncli reads and writes."""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import os
import platform
import sys
from itertools import islice
from pathlib import Path
from typing import Any

from attncli.errors import AttnCliError
from attncli.models.stores.fetched import fetched_root, whole
from attncli.models.stores.lmstudio import lmstudio_roots
from attncli.models.stores.locate import hub_cache_dir
from attncli.models.stores.ollama import ollama_root
from attncli.models.stores.paths import folder_state, is_dir
from attncli.models.stores.pull import PULLABLE
from attncli.version import __version__

PACKAGE = Path(__file__).resolve().parents[2]  # attncli/
SWITCH = "ATTNCLI_FUSED"  # 0: every C extension is left unused (the fallbacks run)
# What a build without them costs, from bench/no_compiler.py (docs/install.md has the table).
WITHOUT = ("without them the same results come from torch's and numpy's operations, slower: "
           "heads on SmolLM2 {heads}, generate {generate}, a tiled run of 8,192 tokens {tiled} "
           "the CPU time (bench/no_compiler.py)")
MEASURED = {"heads": "1.2×", "generate": "1.3×", "tiled": "1.3×"}
MAX_ENTRIES = 20_000  # files counted in one cache folder


def extension_names() -> list[str]:
    """attncli's C extensions: each module with a .pyi stub, a C source or a built library."""
    endings = (".pyi", ".c", *importlib.machinery.EXTENSION_SUFFIXES)  # the longest .so first
    found = set()
    for path in PACKAGE.rglob("_*"):
        stem = next((path.name[:-len(e)] for e in endings if path.name.endswith(e)), None)
        if stem and not stem.startswith("__") and path.is_file():
            found.add(".".join((*path.relative_to(PACKAGE.parent).parent.parts, stem)))
    return sorted(found)


def extensions() -> list[dict[str, Any]]:
    """Each C extension: built and loaded, not built, or built but failing to load."""
    rows = []
    off = os.environ.get(SWITCH, "1") == "0"
    for name in extension_names():
        row: dict[str, Any] = {"module": name, "built": False, "loads": False, "error": None,
                               "path": None}
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin and spec.origin.endswith(
                tuple(importlib.machinery.EXTENSION_SUFFIXES)):
            row.update(built=True, path=spec.origin)
            try:
                importlib.import_module(name)
                row["loads"] = True
            except ImportError as err:
                row["error"] = str(err)[:200]
        row["used"] = row["loads"] and not off
        rows.append(row)
    return rows


def torch_build() -> dict[str, Any]:
    """torch's version and build (CPU, CUDA, ROCm), the vector code it picked, its threads, and
    the devices it sees."""
    import torch

    cuda = torch.cuda.is_available()
    mps = getattr(torch.backends, "mps", None)
    return {"version": torch.__version__, "cuda": torch.version.cuda,
            "hip": getattr(torch.version, "hip", None),
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "threads": torch.get_num_threads(),
            "cuda_devices": [torch.cuda.get_device_name(i)
                             for i in range(torch.cuda.device_count())] if cuda else [],
            "mps": bool(mps is not None and mps.is_available())}


def _size(folder: Path) -> tuple[int, int] | None:
    """The files and bytes under folder (the first MAX_ENTRIES files), None if it is absent."""
    if not is_dir(folder):
        return None
    files = size = 0
    for root, _, names in islice(os.walk(folder), MAX_ENTRIES):
        for name in names:
            try:
                size += os.lstat(os.path.join(root, name)).st_size
                files += 1
            except OSError:
                continue
    return files, size


def _folder(name: str, where: Any, measure: bool = False) -> dict[str, Any]:
    try:
        path = where()
    except AttnCliError as err:
        return {"name": name, "path": None, "exists": False, "error": str(err)}
    counted = _size(path) if measure else None
    there, error = folder_state(path)
    return {"name": name, "path": str(path), "exists": there, "error": error,
            **({"files": counted[0], "bytes": counted[1]} if counted else {})}


def folders() -> list[dict[str, Any]]:
    """The folders attncli reads and writes, whether each is there, and the caches' sizes."""
    from attncli.models.hidden.store import cache_folder

    hidden = cache_folder()
    rows = [_folder("attncli's models (attncli pull)", fetched_root, measure=True),
            {**_folder("hidden-state cache", lambda h=hidden: h),
             **dict(zip(("files", "bytes"), _size(hidden) or (0, 0), strict=True))}
            if hidden is not None else
            {"name": "hidden-state cache", "path": None, "exists": False,
             "error": "off (ATTNCLI_NO_CACHE)"},
            _folder("Hugging Face cache", hub_cache_dir),
            _folder("Ollama's store", ollama_root)]
    rows += [_folder("LM Studio's folder", lambda r=root: r) for root in _lmstudio()]
    return rows


def _lmstudio() -> list[Path]:
    try:
        return lmstudio_roots()
    except AttnCliError:
        return []


def pulled() -> dict[str, bool]:
    """Each pullable model: whether its file or folder is in attncli's cache (not hashed)."""
    try:
        cache = fetched_root()
    except AttnCliError:
        return dict.fromkeys(PULLABLE, False)
    return {name: whole(model, cache) for name, model in PULLABLE.items()}


def install() -> dict[str, Any]:
    """Everything doctor reports, as one JSON-ready document."""
    return {"kind": "doctor", "attncli": {"version": __version__, "path": str(PACKAGE)},
            "python": {"version": platform.python_version(), "executable": sys.executable,
                       "platform": platform.platform()},
            "extensions": extensions(), "switch": {SWITCH: os.environ.get(SWITCH)},
            "without_extensions": WITHOUT.format(**MEASURED),
            "torch": torch_build(), "folders": folders(), "pulled": pulled()}
