"""LM Studio's folder, built here as LM Studio lays it out: PUBLISHER/MODEL/FILE.gguf."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from attncli.errors import AttnCliError
from attncli.models.stores.lmstudio import (
    MAX_ENTRIES,
    find_lmstudio,
    lmstudio_files,
    lmstudio_root,
    lmstudio_roots,
)

GGUF = b"GGUF" + bytes(range(28))


def _put(root: Path, name: str, data: bytes = GGUF) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


@pytest.fixture
def models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "lmstudio-models"
    root.mkdir()
    monkeypatch.setenv("LMSTUDIO_MODELS", str(root))
    return root


def _refusal(name: str) -> str:
    with pytest.raises(AttnCliError) as caught:
        find_lmstudio(name)
    message = str(caught.value)
    assert "\n" not in message and "\x1b" not in message and message
    return message


def test_roots_follow_the_variable_then_both_home_folders(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LMSTUDIO_MODELS", str(tmp_path / "mine"))
    assert lmstudio_root() == tmp_path / "mine"
    monkeypatch.delenv("LMSTUDIO_MODELS")
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    assert lmstudio_roots() == [home / ".lmstudio" / "models"]
    (home / ".cache" / "lm-studio" / "models").mkdir(parents=True)
    assert lmstudio_roots() == [home / ".cache" / "lm-studio" / "models"]
    (home / ".lmstudio" / "models").mkdir(parents=True)
    assert lmstudio_roots() == [home / ".lmstudio" / "models",
                                home / ".cache" / "lm-studio" / "models"]
    assert lmstudio_root() == home / ".lmstudio" / "models"


def test_both_home_folders_are_listed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LMSTUDIO_MODELS", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    new = _put(tmp_path / ".lmstudio" / "models", "pub/new/new.gguf")
    old = _put(tmp_path / ".cache" / "lm-studio" / "models", "pub/old/old.gguf")
    assert [f["path"] for f in lmstudio_files()] == [str(new), str(old)]


def test_files_are_listed_with_name_path_and_size(models: Path) -> None:
    one = _put(models, "lmstudio-community/SmolLM2-135M-GGUF/SmolLM2-135M-Q4_K_M.gguf")
    two = _put(models, "bartowski/Qwen3-0.6B-GGUF/Qwen3-0.6B-Q8_0.gguf", GGUF * 3)
    _put(models, "bartowski/Qwen3-0.6B-GGUF/README.md", b"# readme")
    _put(models, "bartowski/Qwen3-0.6B-GGUF/mmproj-Qwen3-F16.gguf")
    _put(models, "bartowski/gemma-3-4b-GGUF/gemma-3-4b-it-mmproj-f16.gguf")
    _put(models, "toplevel.gguf")
    _put(models, "pub/flat.gguf")
    _put(models, "pub/model/deeper/too-deep.gguf")
    _put(models, ".internal/x/hidden.gguf")
    assert lmstudio_files() == [
        {"name": "bartowski/Qwen3-0.6B-GGUF/Qwen3-0.6B-Q8_0.gguf", "source": "lmstudio",
         "path": str(two), "size": len(GGUF) * 3, "error": None},
        {"name": "lmstudio-community/SmolLM2-135M-GGUF/SmolLM2-135M-Q4_K_M.gguf",
         "source": "lmstudio", "path": str(one), "size": len(GGUF), "error": None}]


def test_no_folder_lists_nothing_and_finds_nothing(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LMSTUDIO_MODELS", str(tmp_path / "absent"))
    assert lmstudio_files() == []
    assert find_lmstudio("pub/model") is None
    (tmp_path / "a-file").write_bytes(b"x")
    monkeypatch.setenv("LMSTUDIO_MODELS", str(tmp_path / "a-file"))
    assert lmstudio_files() == []


def test_names_find_a_file_by_folder_path_or_file_name(models: Path) -> None:
    smol = _put(models, "lmstudio-community/SmolLM2-135M-GGUF/SmolLM2-135M-Q4_K_M.gguf")
    _put(models, "lmstudio-community/SmolLM2-135M-GGUF/mmproj-SmolLM2.gguf")
    q8 = _put(models, "bartowski/Qwen3-0.6B-GGUF/Qwen3-0.6B-Q8_0.gguf")
    q4 = _put(models, "bartowski/Qwen3-0.6B-GGUF/Qwen3-0.6B-Q4_0.gguf")
    assert find_lmstudio("lmstudio-community/SmolLM2-135M-GGUF") == smol
    assert find_lmstudio("lmstudio-community/SmolLM2-135M-GGUF/SmolLM2-135M-Q4_K_M.gguf") == smol
    assert find_lmstudio("SmolLM2-135M-Q4_K_M.gguf") == smol
    assert find_lmstudio("SmolLM2-135M-GGUF/SmolLM2-135M-Q4_K_M.gguf") == smol
    assert find_lmstudio("bartowski/Qwen3-0.6B-GGUF/Qwen3-0.6B-Q8_0.gguf") == q8
    assert find_lmstudio("Qwen3-0.6B-Q4_0.gguf") == q4


@pytest.mark.parametrize("name", [
    "gpt2", "openai-community/gpt2", "nobody/nothing", "SmolLM2", "SmolLM2-135M-Q4_K_M",
    "mmproj-SmolLM2.gguf", "lmstudio-community/SmolLM2-135M-GGUF/mmproj-SmolLM2.gguf",
    "../lmstudio-models/lmstudio-community/SmolLM2-135M-GGUF/SmolLM2-135M-Q4_K_M.gguf",
    "x/lmstudio-community/SmolLM2-135M-GGUF/SmolLM2-135M-Q4_K_M.gguf",
    "lmstudio-community//SmolLM2-135M-Q4_K_M.gguf", "/SmolLM2-135M-Q4_K_M.gguf", "", "/",
    "lmstudio-community", "smollm2-135m-q4_k_m.gguf",
])
def test_other_names_find_nothing(models: Path, name: str) -> None:
    _put(models, "lmstudio-community/SmolLM2-135M-GGUF/SmolLM2-135M-Q4_K_M.gguf")
    _put(models, "lmstudio-community/SmolLM2-135M-GGUF/mmproj-SmolLM2.gguf")
    assert find_lmstudio(name) is None


def test_ambiguity_lists_the_candidates_on_one_line(models: Path) -> None:
    _put(models, "bartowski/Qwen3-0.6B-GGUF/Qwen3-0.6B-Q8_0.gguf")
    _put(models, "bartowski/Qwen3-0.6B-GGUF/Qwen3-0.6B-Q4_0.gguf")
    _put(models, "unsloth/Qwen3-0.6B-GGUF/Qwen3-0.6B-Q8_0.gguf")
    message = _refusal("bartowski/Qwen3-0.6B-GGUF")
    assert ("matches 2 files in LM Studio's folder (bartowski/Qwen3-0.6B-GGUF/Qwen3-0.6B-Q4_0.gguf,"
            " bartowski/Qwen3-0.6B-GGUF/Qwen3-0.6B-Q8_0.gguf)") in message
    assert "PUBLISHER/MODEL/FILE.gguf" in message
    assert "matches 2 files" in _refusal("Qwen3-0.6B-Q8_0.gguf")
    assert "matches 2 files" in _refusal("Qwen3-0.6B-GGUF/Qwen3-0.6B-Q8_0.gguf")
    assert find_lmstudio("unsloth/Qwen3-0.6B-GGUF/Qwen3-0.6B-Q8_0.gguf") is not None


def test_many_candidates_are_cut_to_eight_and_counted(models: Path) -> None:
    for i in range(20):
        _put(models, f"pub/many/m-Q{i:02d}.gguf")
    message = _refusal("pub/many")
    assert "matches 20 files" in message and message.count("pub/many/") == 8
    assert "and 12 more" in message


def test_a_split_model_is_named_by_its_first_part(models: Path) -> None:
    first = _put(models, "pub/big/big-Q4_K_M-00001-of-00003.gguf")
    _put(models, "pub/big/big-Q4_K_M-00002-of-00003.gguf")
    _put(models, "pub/big/big-Q4_K_M-00003-of-00003.gguf")
    assert find_lmstudio("pub/big") == first
    assert len(lmstudio_files()) == 3


def test_symlinks_out_of_the_folder_are_never_followed(models: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    _put(outside, "pub/model/secret.gguf")
    (models / "linked-publisher").symlink_to(outside / "pub")
    (models / "pub").mkdir()
    (models / "pub" / "linked-model").symlink_to(outside / "pub" / "model")
    (models / "pub" / "real").mkdir()
    (models / "pub" / "real" / "linked.gguf").symlink_to(outside / "pub" / "model" / "secret.gguf")
    listed = lmstudio_files()
    assert [f["name"] for f in listed] == ["pub/real/linked.gguf"]
    assert listed[0]["path"] is None and "links outside its folder" in listed[0]["error"]
    assert "links outside its folder" in _refusal("pub/real/linked.gguf")
    assert "links outside its folder" in _refusal("pub/real")
    assert find_lmstudio("secret.gguf") is None


def test_symlinks_inside_the_folder_and_a_symlinked_root_are_followed(
        models: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = _put(models, "pub/model/real.gguf")
    (models / "pub" / "alias").symlink_to(models / "pub" / "model")
    (tmp_path / "root-link").symlink_to(models)
    monkeypatch.setenv("LMSTUDIO_MODELS", str(tmp_path / "root-link"))
    assert [f["name"] for f in lmstudio_files()] == ["pub/alias/real.gguf", "pub/model/real.gguf"]
    assert find_lmstudio("pub/model") == real.resolve()


def test_loops_fifos_and_odd_names_never_hang_or_raise(models: Path) -> None:
    folder = models / "pub" / "model"
    folder.mkdir(parents=True)
    (folder / "loop.gguf").symlink_to(folder / "loop.gguf")
    (folder / "dangling.gguf").symlink_to(folder / "absent")
    os.mkfifo(folder / "fifo.gguf")
    (folder / "dir.gguf").mkdir()
    (models / "pub" / "self").symlink_to(models / "pub")  # a folder loop: depth stays bounded
    odd = _put(models, "pub/model/odd\x1b[31m name.gguf")
    # the name itself, which --model takes back (escaped only where it is shown)
    assert lmstudio_files() == [{"name": "pub/model/odd\x1b[31m name.gguf", "source": "lmstudio",
                                 "path": str(odd), "size": len(GGUF), "error": None}]
    assert find_lmstudio("pub/model") == odd
    assert find_lmstudio("pub/model/odd\x1b[31m name.gguf") == odd


def test_the_walk_is_bounded(models: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("attncli.models.stores.lmstudio.MAX_ENTRIES", 5)
    for i in range(10):
        _put(models, f"pub/model/f{i}.gguf")
    assert 0 < len(lmstudio_files()) < 5 < MAX_ENTRIES


def test_an_unreadable_folder_is_skipped(models: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kept = _put(models, "pub/model/kept.gguf")
    _put(models, "locked/model/hidden.gguf")
    _put(models, "pub/locked/hidden.gguf")
    scandir = os.scandir

    def refusing(path: str | os.PathLike[str]) -> object:
        if Path(path).name == "locked":  # as a folder of mode 000 does for a user who is not root
            raise PermissionError(13, "Permission denied", str(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", refusing)
    assert [f["path"] for f in lmstudio_files()] == [str(kept)]
    assert find_lmstudio("hidden.gguf") is None


def test_names_no_other_store_allows_are_found_too(models: Path) -> None:
    """A space in a folder's name (LM Studio keeps what the user named): not a hub or Ollama
    name, so --model said 'no such file or directory' without looking in LM Studio's folder."""
    from attncli.models.stores.locate import resolve_path

    spaced = _put(models, "My Models/tiny model/tiny Q8.gguf")
    assert resolve_path("My Models/tiny model/tiny Q8.gguf") == spaced
    assert resolve_path("My Models/tiny model") == spaced
    assert resolve_path("tiny Q8.gguf") == spaced
