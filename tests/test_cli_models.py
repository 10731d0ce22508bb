"""`attncli models`: what the local Hugging Face cache holds that --model can read."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.llama_fixtures import save_family


@pytest.fixture()
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A hub cache with a Llama (GQA), a GPT-2, a pickle-only repo and a dataset."""
    root = tmp_path / "hub"
    llama = root / "models--Org--tiny-llama" / "snapshots" / "abc"
    save_family(llama, "llama", seed=1)
    (root / "models--Org--tiny-llama" / "refs").mkdir()
    (root / "models--Org--tiny-llama" / "refs" / "main").write_text("abc")
    shutil.copytree(ROOT / "samples" / "toy-gpt2", root / "models--gpt2" / "snapshots" / "d")
    pickle = root / "models--Org--old" / "snapshots" / "e"
    pickle.mkdir(parents=True)
    (pickle / "config.json").write_text('{"model_type": "gpt2"}')
    (pickle / "pytorch_model.bin").write_bytes(b"PK")
    (root / "datasets--Org--data").mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(root))
    return root


def test_models_json_lists_what_attncli_can_read(cli, cache: Path) -> None:
    llama = cache / "models--Org--tiny-llama" / "snapshots" / "abc"
    gpt2 = cache / "models--gpt2" / "snapshots" / "d"
    assert cli("models", "--json").json() == {"cache": str(cache), "models": [
        {"name": "Org/tiny-llama", "architecture": "llama", "layers": 3, "heads": 4,
         "kv_heads": 2, "size_bytes": (llama / "model.safetensors").stat().st_size,
         "path": str(llama)},
        {"name": "gpt2", "architecture": "gpt2", "layers": 3, "heads": 4, "kv_heads": 4,
         "size_bytes": (gpt2 / "model.safetensors").stat().st_size, "path": str(gpt2)},
    ], "unreadable": [
        {"name": "Org/old", "path": str(cache / "models--Org--old" / "snapshots" / "e"),
         "reason": "no model.safetensors (nor a shard index)"},
    ]}


def test_models_table(cli, cache: Path) -> None:
    got = cli("models")
    assert got.code == 0
    rows = [line.split() for line in got.out.splitlines()]
    assert ["Org/tiny-llama", "llama", "3", "×", "4", "(2)", "0.2", "MB"] in rows
    assert ["gpt2", "gpt2", "3", "×", "4", "6.8", "MB"] in rows
    assert "1 folder(s) attncli cannot read:" in got.out
    assert "  Org/old: no model.safetensors (nor a shard index)" in got.out.splitlines()


def test_a_listed_name_runs(cli, cache: Path) -> None:
    doc = cli("run", "hello", "--model", "Org/tiny-llama", "--json").json()
    assert doc["model"]["architecture"] == "llama"


def test_an_empty_cache_says_how_to_fetch_one(cli, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "none"))
    assert "hf download" in cli("models").out
    assert cli("models", "--json").json() == {"cache": str(tmp_path / "none"), "models": [],
                                              "unreadable": []}


def test_a_c1_control_in_a_folder_name_is_escaped_in_the_json(cli, cache: Path) -> None:
    # the CSI U+009B, which orjson wrote raw: a terminal could act on a cache folder's name
    (cache / "models--Org--tiny-llama").rename(cache / "models--Org--na\u009bme")
    got = cli("models", "--json")
    assert got.code == 0
    assert "\u009b" not in got.out and "na\\u009bme" in got.out
    assert got.json()["models"][0]["name"] == "Org/na\u009bme"
    assert "\u009b" not in cli("models").out
