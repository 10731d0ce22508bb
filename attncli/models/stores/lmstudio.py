"""LM Studio's folder: GGUF files kept as PUBLISHER/MODEL/FILE.gguf under ~/.lmstudio/models."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from attncli.errors import AttnCliError
from attncli.models.stores.ollama import shown as _shown
from attncli.models.stores.paths import expanded, is_dir, is_model_gguf

MAX_ENTRIES = 20_000  # folder entries looked at in one walk of one root
SHOWN = 8  # candidates named in one error line
# A split GGUF's later parts: the model is named by its first part.
_LATER_PART = re.compile(r".*-(?!0+1-)\d{5}-of-\d{5}\.gguf", re.IGNORECASE)


def lmstudio_roots() -> list[Path]:
    """LM Studio's model folders: $LMSTUDIO_MODELS, else ~/.lmstudio/models and the older
    ~/.cache/lm-studio/models, those that exist (the first when neither does)."""
    value = os.environ.get("LMSTUDIO_MODELS", "").strip()
    if value:
        return [expanded(value, "LMSTUDIO_MODELS")]
    try:
        home = Path.home()
    except RuntimeError:  # no HOME and no password entry
        raise AttnCliError("cannot find the home folder for LM Studio's models; set "
                           "LMSTUDIO_MODELS to it") from None
    roots = [home / ".lmstudio" / "models", home / ".cache" / "lm-studio" / "models"]
    present = [root for root in roots if is_dir(root)]
    return present or roots[:1]


def lmstudio_root() -> Path:
    """LM Studio's model folder: $LMSTUDIO_MODELS, else ~/.lmstudio/models (or the older one)."""
    return lmstudio_roots()[0]


def _real(path: Path) -> Path | None:
    try:
        return path.resolve(strict=True)
    except (OSError, RuntimeError, ValueError):  # gone, a symlink loop, a path too long
        return None


def _entries(folder: Path, budget: list[int]) -> list[os.DirEntry[str]]:
    """folder's visible entries by name, charged to budget; an unreadable folder has none."""
    try:
        with os.scandir(folder) as scan:
            entries = []
            for entry in scan:
                if budget[0] <= 0:
                    break
                budget[0] -= 1
                if not entry.name.startswith("."):
                    entries.append(entry)
    except OSError:
        return []
    return sorted(entries, key=lambda e: e.name)


def _inside_dirs(folder: Path, root: Path, budget: list[int]) -> Iterator[tuple[str, Path]]:
    """(name, real path) of folder's subfolders whose real path stays inside root."""
    for entry in _entries(folder, budget):
        real = _real(Path(entry.path))
        if real is not None and real.is_relative_to(root) and is_dir(real):
            yield entry.name, real


def _file_entry(root: Path, name: str, path: Path) -> dict[str, Any] | None:
    """One file's record, an error record if it links outside root, None if not a file."""
    # the name as --model takes it: shown escaped where it is shown (models, error lines)
    entry: dict[str, Any] = {"name": name, "source": "lmstudio", "path": None,
                             "size": None, "error": None}
    real = _real(path)
    if real is None:
        return None
    if not real.is_relative_to(root):
        entry["error"] = (f"LM Studio's {_shown(name)} links outside its folder "
                          f"{_shown(str(root))} (to {_shown(str(real))}); attncli reads only "
                          "files inside it")
        return entry
    try:
        info = real.stat()
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    entry.update(path=str(real), size=info.st_size)
    return entry


def _walk(root: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """(PUBLISHER/MODEL/FILE.gguf, its record) for root's files; deeper folders are not walked."""
    real_root = _real(root)
    if real_root is None or not is_dir(real_root):
        return
    budget = [MAX_ENTRIES]
    for publisher, pub_dir in _inside_dirs(real_root, real_root, budget):
        for model, model_dir in _inside_dirs(pub_dir, real_root, budget):
            for file in _entries(model_dir, budget):
                if is_model_gguf(file.name):
                    name = f"{publisher}/{model}/{file.name}"
                    record = _file_entry(real_root, name, Path(file.path))
                    if record is not None:
                        yield name, record


def _all_files() -> list[tuple[str, dict[str, Any]]]:
    try:
        roots = lmstudio_roots()
    except AttnCliError:
        return []
    return [found for root in roots for found in _walk(root)]


def lmstudio_files() -> list[dict[str, Any]]:
    """Every model GGUF in LM Studio's folders: name PUBLISHER/MODEL/FILE.gguf, path, size."""
    return [record for _, record in _all_files()]


def _matches(name: str, found: str) -> bool:
    """Whether name means the file found: P/M/F.gguf itself, M/F.gguf or F.gguf."""
    parts = name.split("/")
    return found.split("/")[-len(parts):] == parts


def _candidates(name: str, files: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """The records name matches: a file (P/M/F.gguf, M/F.gguf, F.gguf) or a P/M folder's."""
    parts = name.split("/")
    if len(parts) > 3 or "" in parts:
        return []
    if parts[-1].lower().endswith(".gguf"):
        return [record for found, record in files if _matches(name, found)]
    if len(parts) != 2:
        return []
    inside = [(found, record) for found, record in files if found.rsplit("/", 1)[0] == name]
    first_parts = [record for found, record in inside if not _LATER_PART.fullmatch(found)]
    return first_parts or [record for _, record in inside]


def find_lmstudio(name: str) -> Path | None:
    """The GGUF file name means in LM Studio's folders, None if none; an ambiguous name is one
    line listing the candidates."""
    found = _candidates(name, _all_files())
    if not found:
        return None
    if len(found) > 1:
        listed = ", ".join(_shown(r["name"]) for r in found[:SHOWN])
        more = f" and {len(found) - SHOWN} more" if len(found) > SHOWN else ""
        raise AttnCliError(f"{_shown(name)} matches {len(found)} files in LM Studio's folder "
                           f"({listed}{more}); name one as PUBLISHER/MODEL/FILE.gguf")
    if found[0]["error"]:
        raise AttnCliError(found[0]["error"])
    return Path(found[0]["path"])
