"""Ollama's store: `ollama:NAME[:TAG]` names a manifest whose model layer is one GGUF blob.

The layout is Ollama's own (manifest/paths.go, types/model/name.go):
`$OLLAMA_MODELS/manifests/HOST/NAMESPACE/NAME/TAG` is a JSON manifest, and the layer with mediaType
`application/vnd.ollama.image.model` has digest `sha256:<hex>`, kept as `blobs/sha256-<hex>`.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from itertools import islice
from pathlib import Path
from typing import Any

from attncli.core.inputs import read_json_file
from attncli.core.tokens import visible
from attncli.errors import AttnCliError
from attncli.models.stores.paths import expanded

PREFIX = "ollama:"
DEFAULT_HOST = "registry.ollama.ai"
DEFAULT_NAMESPACE = "library"
DEFAULT_TAG = "latest"
MODEL_MEDIA = "application/vnd.ollama.image.model"
# Ollama's newer layout for its MLX engine: one safetensors blob per tensor, no GGUF file.
TENSOR_MEDIA = "application/vnd.ollama.image.tensor"
GGUF_MAGIC = b"GGUF"  # what a model layer's blob starts with
MANIFEST_LIMIT = 16 * 2**20  # a per-tensor manifest lists hundreds of layers; a GGUF one a few
MAX_MANIFESTS = 10_000  # manifests listed from one store
MAX_ENTRIES = 50_000  # folder entries looked at in one walk of manifests/
SHOWN = 8  # names listed in one error line

# Ollama's name parts: the first character a letter, digit or _, then at most 79 more.
_PARTS = {"host": re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:-]{0,349}"),
          "namespace": re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]{0,79}"),
          "name": re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,79}"),
          "tag": re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,79}")}
_DIGEST = re.compile(r"sha256[:-]([0-9a-fA-F]{64})")


def shown(text: str, limit: int = 120) -> str:
    """text as one safe line: control characters escaped, cut at limit characters."""
    return visible(text[:limit]) + ("…" if len(text) > limit else "")


def parse_ollama_name(model: str) -> tuple[str, str, str] | None:
    """(HOST/NAMESPACE, NAME, TAG) of `ollama:[[HOST/]NAMESPACE/]NAME[:TAG]`, None without
    the prefix; a malformed name is one line."""
    if not model.startswith(PREFIX):
        return None
    rest = model[len(PREFIX):]
    if not rest:
        raise AttnCliError("ollama: needs a model name, as in ollama:llama3.2 or "
                           "ollama:llama3.2:1b")
    if "://" in rest:  # Ollama accepts and ignores a scheme: https://host/ns/name
        rest = rest.split("://", 1)[1]
    tag = DEFAULT_TAG
    if rest.rfind(":") > rest.rfind("/"):  # a host may hold a port (host:5000/ns/name)
        rest, tag = rest.rsplit(":", 1)
    pieces = rest.split("/")
    if len(pieces) > 3:
        raise AttnCliError(f"{shown(model)} is not an Ollama name: at most HOST/NAMESPACE/NAME"
                           f"[:TAG] (got {len(pieces)} parts separated by /)")
    host, namespace = DEFAULT_HOST, DEFAULT_NAMESPACE
    if len(pieces) == 3:
        host, namespace, name = pieces
    elif len(pieces) == 2:
        namespace, name = pieces
    else:
        name = pieces[0]
    for kind, part in (("host", host), ("namespace", namespace), ("name", name), ("tag", tag)):
        if not _PARTS[kind].fullmatch(part):
            raise AttnCliError(
                f"{shown(model)} is not an Ollama name: its {kind} '{shown(part, 40)}' must "
                f"start with a letter, digit or _ and hold only letters, digits and "
                f"{'_ - . :' if kind == 'host' else '_ -' if kind == 'namespace' else '_ - .'}"
                f" (at most {350 if kind == 'host' else 80} characters)")
    return f"{host}/{namespace}", name, tag


def ollama_root() -> Path:
    """Ollama's store: $OLLAMA_MODELS (trimmed of spaces and quotes, as Ollama does), else
    ~/.ollama/models."""
    value = os.environ.get("OLLAMA_MODELS", "").strip().strip("\"'")
    if value:
        return expanded(value, "OLLAMA_MODELS")
    try:
        return Path.home() / ".ollama" / "models"
    except RuntimeError:  # no HOME and no password entry
        raise AttnCliError("cannot find the home folder for Ollama's store; set "
                           "OLLAMA_MODELS to it") from None


def short_name(repo: str, name: str, tag: str) -> str:
    """The name as `ollama list` shows it: the default host and namespace left out."""
    if repo == f"{DEFAULT_HOST}/{DEFAULT_NAMESPACE}":
        return f"{name}:{tag}"
    if repo.startswith(f"{DEFAULT_HOST}/"):
        return f"{repo.split('/', 1)[1]}/{name}:{tag}"
    return f"{repo}/{name}:{tag}"


def _store(root: Path) -> Path:
    """The store's real folder (symlinks resolved), or one line saying it is not there."""
    try:
        real = root.resolve(strict=True)
        is_dir = real.is_dir()
    except (OSError, RuntimeError, ValueError):
        real, is_dir = root, False
    if not is_dir:
        raise AttnCliError(f"Ollama's store {shown(str(root))} is not a folder here (set "
                           "OLLAMA_MODELS to the folder holding manifests/ and blobs/)")
    return real


def _inside(store: Path, path: Path, what: str) -> Path:
    """path with symlinks resolved, refused unless it is a regular file inside the store."""
    try:
        real = path.resolve(strict=True)
        mode = real.stat().st_mode
    except FileNotFoundError:
        raise AttnCliError(f"{what} does not exist ({shown(str(path))})") from None
    except (OSError, RuntimeError, ValueError) as err:  # a symlink loop, a path too long
        reason = ("a loop of symbolic links" if isinstance(err, RuntimeError) else
                  getattr(err, "strerror", None) or type(err).__name__)
        raise AttnCliError(f"cannot look at {what} ({shown(str(path))}): {reason}") from None
    if not real.is_relative_to(store):
        raise AttnCliError(f"{what} points outside Ollama's store {shown(str(store))} (to "
                           f"{shown(str(real))}); attncli reads only files inside it")
    if not stat.S_ISREG(mode):  # a FIFO would block the read, a device never end
        raise AttnCliError(f"{what} is not a regular file ({shown(str(path))})")
    return real


def _media_types(layers: list[Any]) -> str:
    kinds = sorted({str(layer.get("mediaType")) for layer in layers if isinstance(layer, dict)})
    return ", ".join(shown(k, 60) for k in kinds[:SHOWN]) + (", …" if len(kinds) > SHOWN else "")


def _model_layer(manifest: Any, label: str) -> tuple[str, int | None]:
    """The GGUF model layer's hex digest and size, refusing a manifest that does not have one."""
    if not isinstance(manifest, dict):
        raise AttnCliError(f"Ollama's manifest for {label} is not a JSON object")
    layers = manifest.get("layers")
    if not isinstance(layers, list) or not layers:
        raise AttnCliError(f"Ollama's manifest for {label} lists no layers")
    bad = [i for i, layer in enumerate(layers) if not isinstance(layer, dict)]
    if bad:
        raise AttnCliError(f"Ollama's manifest for {label}: layer {bad[0]} is not a JSON object")
    models = [layer for layer in layers if layer.get("mediaType") == MODEL_MEDIA]
    tensors = sum(layer.get("mediaType") == TENSOR_MEDIA for layer in layers)
    if not models and tensors:
        raise AttnCliError(
            f"{label} is stored in Ollama's per-tensor layout ({tensors} layers of "
            f"{TENSOR_MEDIA}, for its MLX engine), not as one GGUF file; attncli reads Ollama "
            "models kept as a single GGUF layer")
    if not models:
        raise AttnCliError(f"Ollama's manifest for {label} has no model layer (mediaType "
                           f"{MODEL_MEDIA}); its layers are {_media_types(layers)}")
    if len(models) > 1:
        raise AttnCliError(f"Ollama's manifest for {label} has {len(models)} model layers; "
                           "attncli reads a model kept as one GGUF layer")
    digest, size = models[0].get("digest"), models[0].get("size")
    match = _DIGEST.fullmatch(digest) if isinstance(digest, str) else None
    if match is None:
        raise AttnCliError(f"Ollama's manifest for {label}: the model layer's digest "
                           f"'{shown(str(digest), 80)}' is not sha256:<64 hex digits>")
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 0):
        raise AttnCliError(f"Ollama's manifest for {label}: the model layer's size "
                           f"'{shown(str(size), 40)}' is not a whole number of bytes")
    return match.group(1), size


def _blob(store: Path, manifest_path: Path, label: str) -> tuple[Path, int]:
    """The GGUF blob a manifest file names, checked against the store, and its size."""
    real = _inside(store, manifest_path, f"Ollama's manifest for {label}")
    manifest = read_json_file(real, f"Ollama's manifest for {label}", MANIFEST_LIMIT)
    digest, size = _model_layer(manifest, label)
    path = store / "blobs" / f"sha256-{digest}"
    if not os.path.lexists(path):
        raise AttnCliError(f"{label}'s model blob sha256-{digest[:12]}… is not in "
                           f"{shown(str(store / 'blobs'))} (an interrupted pull? run "
                           f"`ollama pull {label}`; attncli never downloads)")
    blob = _inside(store, path, f"{label}'s model blob")
    found = blob.stat().st_size
    if size is not None and found != size:
        raise AttnCliError(f"{label}'s model blob holds {found:,} bytes but its manifest says "
                           f"{size:,} (a damaged or partial blob? run `ollama pull {label}`)")
    try:
        with open(blob, "rb") as stream:  # a regular file (_inside): the read cannot wait
            start = stream.read(4)
    except OSError as err:  # a blob of mode 000
        raise AttnCliError(f"cannot read {label}'s model blob sha256-{digest[:12]}… in "
                           f"{shown(str(store / 'blobs'))}: {err.strerror or err}") from None
    if start != GGUF_MAGIC:  # else --model would try it as a safetensors checkpoint
        raise AttnCliError(f"{label}'s model blob sha256-{digest[:12]}… is not a GGUF file (it "
                           f"starts with {start!r}, not {GGUF_MAGIC!r}; a damaged blob? run "
                           f"`ollama pull {label}`)")
    return blob, found


def _tags(store: Path, repo: str, name: str) -> list[str]:
    """The tags the store holds for repo/name, for a hint (bounded, never raises)."""
    try:
        with os.scandir(store / "manifests" / repo / name) as entries:
            return sorted(e.name for _, e in zip(range(200), entries, strict=False))
    except OSError:
        return []


def resolve_ollama(model: str) -> Path:
    """The GGUF blob of `ollama:NAME[:TAG]` in Ollama's store (no downloads), or one line."""
    parsed = parse_ollama_name(model)
    if parsed is None:
        raise AttnCliError(f"{shown(model)} is not an Ollama name (those start with {PREFIX})")
    repo, name, tag = parsed
    label = short_name(repo, name, tag)
    store = _store(ollama_root())
    manifest = store / "manifests" / repo / name / tag
    if not os.path.lexists(manifest):
        tags = _tags(store, repo, name)
        known = (f" (it holds {name} with tags {', '.join(shown(t, 40) for t in tags[:SHOWN])}"
                 f"{', …' if len(tags) > SHOWN else ''})" if tags else "")
        raise AttnCliError(f"Ollama's store {shown(str(store))} has no model {label}{known}; "
                           f"`ollama pull {label}` fetches it (attncli never downloads)")
    return _blob(store, manifest, label)[0]


def _manifest_files(store: Path) -> Iterator[tuple[tuple[str, ...], Path]]:
    """(HOST, NAMESPACE, NAME, TAG) and path of each file four levels under manifests/; folders
    that lead out of the store are not walked, and the walk looks at MAX_ENTRIES entries at most."""
    budget = [MAX_ENTRIES]

    def level(folder: Path, parts: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], Path]]:
        try:
            with os.scandir(folder) as scan:
                entries = sorted(islice(scan, max(budget[0], 0)), key=lambda e: e.name)
        except OSError:
            return
        budget[0] -= len(entries)
        for entry in entries:
            here = (*parts, entry.name)
            if len(here) == 4:
                if not _is_dir(entry):
                    yield here, Path(entry.path)
            elif _is_dir(entry) and _stays_in(store, Path(entry.path)):
                yield from level(Path(entry.path), here)
    yield from level(store / "manifests", ())


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def _stays_in(store: Path, folder: Path) -> bool:
    try:
        return folder.resolve(strict=True).is_relative_to(store)
    except (OSError, RuntimeError, ValueError):
        return False


def ollama_models() -> list[dict[str, Any]]:
    """Every manifest in Ollama's store: name, blob path and size, or why it cannot be read."""
    try:
        store = _store(ollama_root())
    except AttnCliError:
        return []  # no store here: nothing to list
    found: list[dict[str, Any]] = []
    for parts, path in _manifest_files(store):
        if len(found) == MAX_MANIFESTS:
            found.append({"name": shown(str(store / "manifests")), "source": "ollama",
                          "path": None, "size": None,
                          "error": f"more than {MAX_MANIFESTS:,} manifests; listed the first"})
            break
        label = shown(short_name(f"{parts[0]}/{parts[1]}", parts[2], parts[3]))
        entry: dict[str, Any] = {"name": label, "source": "ollama", "path": None, "size": None,
                                 "error": None}
        try:
            if not all(_PARTS[k].fullmatch(p) for k, p in zip(_PARTS, parts, strict=True)):
                raise AttnCliError(f"{label} is not a valid Ollama name")
            blob, size = _blob(store, path, label)
            entry.update(path=str(blob), size=size)
        except AttnCliError as err:
            entry["error"] = str(err)
        except (OSError, RuntimeError, ValueError) as err:  # a store changing under the walk
            entry["error"] = f"cannot read Ollama's manifest for {label}: {type(err).__name__}"
        found.append(entry)
    return found
