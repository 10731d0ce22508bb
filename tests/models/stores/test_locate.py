"""Finding --model's files: paths, directories and a fake local Hugging Face cache."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from attncli.errors import AttnCliError
from attncli.models.gpt2.family import resolve_checkpoint
from attncli.models.stores.locate import (
    file_in_dir,
    hub_cache_dir,
    locate_checkpoint,
    looks_like_hub_name,
    repo_folders,
    resolve_path,
)
from tests.gpt2_fixtures import write_tiny

CACHE_VARS = ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME")


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty hub cache that HF_HUB_CACHE points at, and a working directory without models;
    attncli's cache, Ollama's store and LM Studio's folder empty too."""
    for var in CACHE_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    for var, folder in (("ATTNCLI_MODEL_CACHE", "fetched"), ("OLLAMA_MODELS", "ollama"),
                        ("LMSTUDIO_MODELS", "lmstudio")):
        monkeypatch.setenv(var, str(tmp_path / folder))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "hub").mkdir()
    return tmp_path / "hub"


def _cache_model(cache: Path, folder: str, revision: str = "abc123", ref: bool = True) -> Path:
    """Lay a model out as huggingface_hub does: blobs, a snapshot of symlinks, refs/main."""
    repo = cache / folder
    blob = write_tiny(repo / "blobs" / f"blob-{revision}", n_layer=1, d=768, vocab=4,
                      positions=4)
    snapshot = repo / "snapshots" / revision
    snapshot.mkdir(parents=True)
    os.symlink(os.path.relpath(blob, snapshot), snapshot / "model.safetensors")
    if ref:
        (repo / "refs").mkdir(exist_ok=True)
        (repo / "refs" / "main").write_text(revision, encoding="utf-8")
    return snapshot


def _error(model: str) -> str:
    with pytest.raises(AttnCliError) as err:
        resolve_checkpoint(model)
    assert "\n" not in str(err.value)
    return str(err.value)


@pytest.mark.parametrize(("model", "expected"), [
    ("gpt2", True), ("gpt2-medium", True), ("openai-community/gpt2-xl", True),
    ("./gpt2", False), ("/models/gpt2", False), ("a/b/c", False), ("model.safetensors", False),
    ("pytorch_model.bin", False), ("~/gpt2", False), ("", False), ("model-Q4_K_M.gguf", False),
    ("org/model.gguf", False),
])  # fmt: skip
def test_looks_like_hub_name(model: str, expected: bool) -> None:
    assert looks_like_hub_name(model) is expected


@pytest.mark.parametrize(("name", "folders"), [
    ("gpt2", ["models--gpt2", "models--openai-community--gpt2"]),
    ("openai-community/gpt2", ["models--openai-community--gpt2", "models--gpt2"]),
    ("someone/tiny-gpt2", ["models--someone--tiny-gpt2"]),
])  # fmt: skip
def test_repo_folders(name: str, folders: list[str]) -> None:
    assert repo_folders(name) == folders


def test_hub_cache_dir_follows_huggingface_hub(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in CACHE_VARS:
        monkeypatch.delenv(var, raising=False)
    assert hub_cache_dir() == Path.home() / ".cache" / "huggingface" / "hub"
    monkeypatch.setenv("XDG_CACHE_HOME", "/xdg")
    assert hub_cache_dir() == Path("/xdg/huggingface/hub")
    monkeypatch.setenv("HF_HOME", "/hf-home")
    assert hub_cache_dir() == Path("/hf-home/hub")
    monkeypatch.setenv("HF_HUB_CACHE", "/hub-cache")
    assert hub_cache_dir() == Path("/hub-cache")


@pytest.mark.parametrize("folder", ["models--gpt2", "models--openai-community--gpt2"])
@pytest.mark.parametrize("name", ["gpt2", "openai-community/gpt2"])
def test_name_found_in_either_cache_folder(cache: Path, folder: str, name: str) -> None:
    snapshot = _cache_model(cache, folder)
    ckpt = resolve_checkpoint(name)
    assert ckpt.path == snapshot / "model.safetensors"
    assert (ckpt.n_embd, ckpt.n_head, ckpt.source) == (768, 12, name)


def test_refs_main_picks_the_snapshot(cache: Path) -> None:
    _cache_model(cache, "models--gpt2", revision="old", ref=False)
    current = _cache_model(cache, "models--gpt2", revision="new")
    assert locate_checkpoint("gpt2") == (current / "model.safetensors", None)


def test_without_refs_the_newest_snapshot(cache: Path) -> None:
    old = _cache_model(cache, "models--gpt2", revision="old", ref=False)
    new = _cache_model(cache, "models--gpt2", revision="new", ref=False)
    os.utime(old, (1, 1))
    assert locate_checkpoint("gpt2")[0] == new / "model.safetensors"


def test_name_not_in_cache(cache: Path) -> None:
    assert _error("gpt2-medium") == (
        f"'gpt2-medium' is not a file or directory, and not in the local Hugging Face cache "
        f"(looked for {cache / 'models--gpt2-medium'}, "
        f"{cache / 'models--openai-community--gpt2-medium'}) nor in attncli's, LM Studio's or "
        f"Ollama's store; attncli never downloads: fetch it "
        f"once with `hf download openai-community/gpt2-medium config.json model.safetensors`, "
        f"or pass a directory holding config.json and model.safetensors")


def test_cached_snapshot_with_only_a_pickle(cache: Path) -> None:
    snapshot = _cache_model(cache, "models--gpt2")
    (snapshot / "model.safetensors").rename(snapshot / "pytorch_model.bin")
    assert _error("gpt2").startswith(f"{snapshot} has no .safetensors file, only "
                                     f"pytorch_model.bin; pickle files can run code")


def test_missing_path(cache: Path) -> None:
    assert _error("./nowhere/model.safetensors") == (
        "no such file or directory: ./nowhere/model.safetensors")


def test_empty_directory(tmp_path: Path) -> None:
    assert _error(str(tmp_path)) == (
        f"directory {tmp_path} is empty; expected config.json and model.safetensors")


def test_directory_without_safetensors(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}", encoding="utf-8")
    (tmp_path / "notes.txt").write_text("", encoding="utf-8")
    assert _error(str(tmp_path)) == (
        f"directory {tmp_path} has no .safetensors file (found config.json, notes.txt)")


def test_directory_with_one_differently_named_file(tmp_path: Path) -> None:
    file = write_tiny(tmp_path / "weights.safetensors", d=768, vocab=4, positions=4)
    assert locate_checkpoint(str(tmp_path)) == (file, None)


def test_directory_with_several_files(tmp_path: Path) -> None:
    write_tiny(tmp_path / "a.safetensors")
    shutil.copy(tmp_path / "a.safetensors", tmp_path / "b.safetensors")
    assert _error(str(tmp_path)) == (
        f"{tmp_path} holds several .safetensors files (a.safetensors, b.safetensors); "
        "pass the one to use")


def test_sharded_directory_is_read_through_its_index(tmp_path: Path) -> None:
    (tmp_path / "model.safetensors.index.json").write_text("{}", encoding="utf-8")
    assert file_in_dir(tmp_path) == tmp_path / "model.safetensors.index.json"


def _gguf_repo(cache: Path, files: tuple[str, ...], revision: str = "f00d") -> Path:
    """A "-GGUF" repo as huggingface_hub lays it out: each file a link to its blob."""
    repo = cache / "models--Org--tiny-GGUF"
    snapshot = repo / "snapshots" / revision
    snapshot.mkdir(parents=True)
    (repo / "blobs").mkdir()
    for name in files:
        (repo / "blobs" / name).write_bytes(b"GGUF" + name.encode())
        os.symlink(os.path.relpath(repo / "blobs" / name, snapshot), snapshot / name)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(revision, encoding="utf-8")
    return snapshot


def test_a_gguf_repo_is_found_by_the_names_models_lists(cache: Path) -> None:
    """`attncli models` names each file of a "-GGUF" repo ORG/REPO/FILE.gguf and says --model
    takes the name; the name was 'not a file or directory', and ORG/REPO 'no .safetensors'."""
    snapshot = _gguf_repo(cache, ("tiny-Q8_0.gguf", "mmproj-tiny-f16.gguf"))
    assert resolve_path("Org/tiny-GGUF/tiny-Q8_0.gguf") == snapshot / "tiny-Q8_0.gguf"
    assert resolve_path("Org/tiny-GGUF") == snapshot / "tiny-Q8_0.gguf"  # its one model file
    (snapshot / "tiny-Q4_K_M.gguf").symlink_to(snapshot / "tiny-Q8_0.gguf")
    with pytest.raises(AttnCliError) as err:
        resolve_path("Org/tiny-GGUF")
    assert str(err.value) == ("Org/tiny-GGUF holds 2 GGUF files (tiny-Q4_K_M.gguf, "
                              "tiny-Q8_0.gguf); name one as Org/tiny-GGUF/FILE.gguf")
    assert "not a file or directory" in _error("Org/tiny-GGUF/tiny-Q2_K.gguf")


def test_a_repo_with_safetensors_and_gguf_files_is_the_checkpoint(cache: Path) -> None:
    snapshot = _cache_model(cache, "models--Org--both")
    (snapshot / "both-Q8_0.gguf").write_bytes(b"GGUF")
    assert resolve_path("Org/both") == snapshot


def test_a_gguf_file_that_is_not_there_is_not_looked_for_in_the_hub_cache(cache: Path) -> None:
    """'typo.gguf' (or a link to a file gone) was looked for as a Hub repository named
    typo.gguf, models--typo.gguf, and the line said to `hf download` it."""
    (cache.parent / "gone.gguf").symlink_to(cache.parent / "nowhere.gguf")
    for name in ("typo.gguf", "gone.gguf"):
        message = _error(name)
        assert "Hugging Face cache" not in message and "hf download" not in message, message
