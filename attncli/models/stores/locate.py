"""Where --model's files are: a path, or a name in the local Hugging Face cache (no downloads)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from attncli.core.inputs import read_json_file
from attncli.errors import AttnCliError
from attncli.models.stores.lmstudio import find_lmstudio
from attncli.models.stores.names import (
    LMSTUDIO_PREFIX,
    find_named,
    not_found,
    ollama_like,
    resolve_lmstudio,
)
from attncli.models.stores.ollama import parse_ollama_name, resolve_ollama
from attncli.models.stores.paths import expanded, is_dir, is_file, is_model_gguf, special_kind

# GPT-2's official repos moved to this organisation; the cache may hold either spelling.
HUB_ORG = "openai-community"
_HUB_NAME = re.compile(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?")
# ORG/REPO/FILE.gguf: one file of a "-GGUF" repo, as `attncli models` names it
_HUB_FILE = re.compile(r"([A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*)/([^/]+\.gguf)", re.IGNORECASE)
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")
_FILE_SUFFIXES = (".safetensors", ".json", ".gguf", *PICKLE_SUFFIXES)
# what a reader opens by name in a checkpoint folder
READ_IN_FOLDER = ("config.json", "tokenizer.json", "model.safetensors",
                  "model.safetensors.index.json")


def looks_like_hub_name(model: str) -> bool:
    """True for `gpt2`, `gpt2-medium` or `org/name`; false for anything shaped like a path."""
    return bool(_HUB_NAME.fullmatch(model)) and not model.lower().endswith(_FILE_SUFFIXES)


def hub_cache_dir() -> Path:
    """The hub cache folder, chosen the way huggingface_hub chooses it."""
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(var):
            return expanded(os.environ[var], var)
    if os.environ.get("HF_HOME"):
        return expanded(os.environ["HF_HOME"], "HF_HOME") / "hub"
    cache_home = os.environ.get("XDG_CACHE_HOME") or "~/.cache"
    return expanded(cache_home, "XDG_CACHE_HOME") / "huggingface" / "hub"


def hub_repo_id(name: str) -> str:
    """The canonical repo id of a name: bare `gpt2` lives at openai-community/gpt2."""
    return name if "/" in name else f"{HUB_ORG}/{name}"


def repo_folders(name: str) -> list[str]:
    """Cache folder names that may hold the model, best first."""
    org, _, base = hub_repo_id(name).rpartition("/")
    folders = [f"models--{org}--{base}"]
    if org == HUB_ORG:
        # Downloads made before the move are cached under the bare name.
        legacy = f"models--{base}"
        folders = [legacy, *folders] if "/" not in name else [*folders, legacy]
    return folders


def _revision(ref: Path) -> str | None:
    """The commit refs/main names: one plain name, else None (unreadable, not UTF-8, a path)."""
    try:
        with open(ref, "rb") as stream:
            data = stream.read(256)
        revision = data.decode("ascii").strip()
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return revision if re.fullmatch(r"[\w.-]{1,200}", revision) and revision not in (
        ".", "..") else None


def snapshot_of(repo_dir: Path) -> Path | None:
    """The snapshot refs/main points at, else the newest snapshot, else None."""
    snapshots = repo_dir / "snapshots"
    revision = _revision(repo_dir / "refs" / "main") if is_file(repo_dir / "refs" / "main") \
        else None
    if revision and is_dir(snapshots / revision):
        return snapshots / revision
    if not is_dir(snapshots):
        return None
    try:
        candidates = [(p.stat().st_mtime, p) for p in snapshots.iterdir() if is_dir(p)]
    except OSError:  # unreadable, or a snapshot removed while listed
        return None
    return max(candidates, key=lambda c: c[0], default=(0, None))[1]


def find_cached(name: str) -> Path:
    """The cached snapshot directory of a hub name, preferring one that holds safetensors."""
    cache = hub_cache_dir()
    tried = [cache / folder for folder in repo_folders(name)]
    found = [snap for snap in map(snapshot_of, tried) if snap is not None]
    for snap in found:
        if is_file(snap / "model.safetensors"):
            return snap
    if found:
        return found[0]  # the checkpoint loader explains what the snapshot lacks
    repo = hub_repo_id(name)
    raise AttnCliError(
        f"{name!r} is not a file or directory, and not in the local Hugging Face cache "
        f"(looked for {', '.join(str(p) for p in tried)}); attncli never downloads: fetch it "
        f"once with `hf download {repo} config.json model.safetensors`, or pass a directory "
        f"holding config.json and model.safetensors"
    )


def model_exists(path: Path, model: str) -> bool:
    """Whether --model's path is there; a path that cannot be looked at is one line."""
    try:
        path.stat()
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError as err:  # a name over 255 bytes, a loop of links, a folder not to be read
        raise AttnCliError(f"--model {model!r}: {err.strerror or err}") from None
    except ValueError as err:  # a NUL byte
        raise AttnCliError(f"--model {model!r}: {err}") from None
    return True


def resolve_path(model: str) -> Path:
    """The folder or file --model names: ollama:NAME[:TAG], lmstudio:NAME, a path, a snapshot
    in the hub cache, or a name in another store (stores/names.py: a pulled model, attncli's
    cache, LM Studio's folder, Ollama's store); a FIFO, device or socket there is refused before
    any read."""
    path = _resolved(model)
    refuse_special(path)
    if is_dir(path):
        for name in READ_IN_FOLDER:
            refuse_special(path / name)
    elif path.suffix.lower() in PICKLE_SUFFIXES:
        raise AttnCliError(f"refusing to load {path}: {convert_hint(path)}")
    return path


def refuse_special(path: Path) -> None:
    """One line where path is a FIFO, a device or a socket: attncli reads regular files only."""
    kind = special_kind(path)
    if kind is not None:
        raise AttnCliError(f"{path} is {kind}, not a regular file or folder, so attncli does "
                           "not open it")


def _resolved(model: str) -> Path:
    if not model:  # Path("") is the working folder
        raise AttnCliError("--model is empty: give a path, or a name `attncli models` lists")
    if parse_ollama_name(model) is not None:
        return resolve_ollama(model)  # ollama:NAME[:TAG], its GGUF blob
    if model.startswith(LMSTUDIO_PREFIX):
        return resolve_lmstudio(model)
    path = expanded(model, "--model")
    if model_exists(path, model):
        return path
    hub = looks_like_hub_name(model)
    try:
        snapshot = find_cached(model) if hub else None
    except AttnCliError:
        snapshot = None  # not in the hub cache: perhaps in another store
    if snapshot is not None:
        return _gguf_repo_file(snapshot, model)
    in_repo = _hub_gguf(model)
    if in_repo is not None:
        return in_repo
    # a name no other store's rules allow may still be LM Studio's (a space in a folder's name)
    found = find_named(model) if hub or ollama_like(model) else find_lmstudio(model)
    if found is not None:
        return found
    if not hub and not ollama_like(model):
        raise AttnCliError(f"no such file or directory: {model}")
    cache = hub_cache_dir()
    raise AttnCliError(not_found(model, cache, [cache / f for f in repo_folders(model)]
                                 if hub else []))


def _hub_gguf(model: str) -> Path | None:
    """ORG/REPO/FILE.gguf: that file of the repo's snapshot in the hub cache, None if not there."""
    match = _HUB_FILE.fullmatch(model)
    if match is None:
        return None
    repo, name = match.groups()
    snapshots = [snapshot_of(hub_cache_dir() / folder) for folder in repo_folders(repo)]
    return next((snap / name for snap in snapshots if snap is not None and
                 is_file(snap / name)), None)


def _gguf_repo_file(snapshot: Path, model: str) -> Path:
    """A snapshot, or the one model GGUF of a repo that holds GGUF files and no safetensors (a
    "-GGUF" repo); several are one line naming them."""
    try:
        names = sorted(p.name for p in snapshot.iterdir())
    except OSError:
        return snapshot  # the checkpoint loader says what it cannot read
    ggufs = [n for n in names if is_model_gguf(n) and is_file(snapshot / n)]
    if not ggufs or any(n.endswith((".safetensors", ".safetensors.index.json")) for n in names):
        return snapshot
    if len(ggufs) == 1:
        return snapshot / ggufs[0]
    listed = ", ".join(ggufs[:5]) + (", ..." if len(ggufs) > 5 else "")
    raise AttnCliError(f"{model} holds {len(ggufs)} GGUF files ({listed}); name one as "
                       f"{model}/FILE.gguf")


def locate_checkpoint(model: str) -> tuple[Path, Path | None]:
    """The safetensors file a hub name or path points at, and the config.json beside it, if any."""
    path = resolve_path(model)
    file = file_in_dir(path) if is_dir(path) else path
    config_file = file.parent / "config.json"
    return file, config_file if is_file(config_file) else None


def file_in_dir(directory: Path) -> Path:
    """model.safetensors, or the directory's only .safetensors file."""
    if is_file(directory / "model.safetensors"):
        return directory / "model.safetensors"
    if is_file(directory / "model.safetensors.index.json"):
        return directory / "model.safetensors.index.json"  # sharded: read through the index
    try:
        entries = sorted(p.name for p in directory.iterdir())
    except OSError as err:
        raise AttnCliError(f"cannot list {directory}: {err.strerror or err}") from None
    found = [n for n in entries if n.endswith(".safetensors")]
    broken = [n for n in found if not is_file(directory / n)]
    for name in broken:
        refuse_special(directory / name)
    if broken:
        raise AttnCliError(f"{broken[0]} in {directory} is not a readable file (a link to a "
                           "blob that is not there? an interrupted download)")
    if len(found) == 1:
        return directory / found[0]
    if found:
        listed = ", ".join(found[:5]) + (", ..." if len(found) > 5 else "")
        raise AttnCliError(f"{directory} holds several .safetensors files ({listed}); "
                           f"pass the one to use")
    pickles = [n for n in entries if n.lower().endswith(PICKLE_SUFFIXES)]
    if pickles:
        raise AttnCliError(f"{directory} has no .safetensors file, only {', '.join(pickles[:5])}"
                           "; " + convert_hint(directory / pickles[0]))
    if not entries:
        raise AttnCliError(f"directory {directory} is empty; expected config.json and "
                           f"model.safetensors")
    shown = ", ".join(entries[:5]) + (", ..." if len(entries) > 5 else "")
    raise AttnCliError(f"directory {directory} has no .safetensors file (found {shown})")


def convert_hint(path: Path) -> str:
    """Why a pickle checkpoint is refused, and the one command that converts it."""
    return (
        "pickle files can run code when loaded, so attncli reads safetensors only; convert it "
        "once with `python -c \"import torch, safetensors.torch as s; "
        f"d = torch.load('{path}', weights_only=True); "
        "s.save_file({k: v.contiguous().clone() for k, v in d.items()}, 'model.safetensors')\"`"
    )


@contextmanager
def utf8_name(file: Path) -> Iterator[str]:
    """A UTF-8 name for file, which safetensors requires: /proc/self/fd/N when its path is not."""
    try:
        str(file).encode("utf-8")
    except UnicodeEncodeError:  # a directory named in another encoding, kept as surrogates
        fd = os.open(file, os.O_RDONLY)
        try:
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    yield str(file)


def is_pickle(file: Path) -> bool:
    """True for torch.save's zip format or a bare pickle, whatever the file is called (only a
    regular file is opened to look)."""
    if not is_file(file):
        return False
    try:
        with open(file, "rb") as raw:
            magic = raw.read(2)
    except OSError:
        return False
    return magic in (b"PK", b"\x80\x02", b"\x80\x03", b"\x80\x04", b"\x80\x05")


def read_config_file(file: Path) -> dict[str, Any]:
    """A checkpoint's config.json as a dict, read by the one JSON reader (its limits and all);
    unreadable or not an object is one line."""
    config = read_json_file(file, str(file))
    if not isinstance(config, dict):
        raise AttnCliError(f"{file} is not a JSON object")
    return config
