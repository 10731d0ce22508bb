"""attncli's own cache (scripts/fetch_model.py's folder) as a store: where it is, what `models`
lists from it (GGUF files and Hugging Face folders, never partial fetches), and the names --model
takes for them; the expected rows come from gguf's and safetensors' own readers."""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

import gguf
import pytest

from attncli.errors import AttnCliError
from attncli.models.stores.cachedir import model_cache_dir
from attncli.models.stores.fetched import MAX_ENTRIES, fetched_models, find_fetched
from tests.cli.test_cli_models import _gguf_row, _stored_as
from tests.conftest import ROOT
from tests.gguf_fixtures import write_model
from tests.redteam.test_redteam_configs import run_process

TOY = ROOT / "samples" / "toy-gpt2"


def _script_cache_dir() -> Path:
    """scripts/fetch_model.py's cache_dir(), loaded as make test runs it (not as a package)."""
    spec = importlib.util.spec_from_file_location("fetch_model_script",
                                                  ROOT / "scripts" / "fetch_model.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return Path(module.cache_dir())


@pytest.mark.parametrize(("env", "expected"), [
    ({"ATTNCLI_MODEL_CACHE": "/c/own", "XDG_CACHE_HOME": "/x"}, "/c/own"),
    ({"ATTNCLI_MODEL_CACHE": "", "XDG_CACHE_HOME": "/x"}, "/x/attncli/models"),
    ({"ATTNCLI_MODEL_CACHE": "", "XDG_CACHE_HOME": ""}, "HOME/.cache/attncli/models"),
    ({"ATTNCLI_MODEL_CACHE": "~/m", "XDG_CACHE_HOME": ""}, "HOME/m"),
    # the XDG spec: a relative XDG_CACHE_HOME is ignored (it would put the cache under the cwd)
    ({"ATTNCLI_MODEL_CACHE": "", "XDG_CACHE_HOME": "rel/x"}, "HOME/.cache/attncli/models"),
    ({"ATTNCLI_MODEL_CACHE": "", "XDG_CACHE_HOME": "~/x"}, "HOME/x/attncli/models"),
])
def test_the_cache_folder_rule_is_the_scripts(env: dict[str, str], expected: str, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    want = Path(expected.replace("HOME", str(tmp_path)))
    assert model_cache_dir() == want
    assert _script_cache_dir() == want


@pytest.fixture()
def fetched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """attncli's cache as make demo and a folder fetch leave it, beside partial fetches and
    hostile entries; the user's other stores pointed at empty places."""
    cache = tmp_path / "attncli-models"
    cache.mkdir()
    write_model(cache / "tiny-llama.Q8_0.gguf", "llama", gguf.GGMLQuantizationType.Q8_0)
    shutil.copytree(TOY, cache / "toy-gpt2")
    (cache / ".fetch-abc123").mkdir()  # a fetch under way: its wheel, its model half-written
    write_model(cache / ".fetch-abc123" / "model.gguf", "llama", gguf.GGMLQuantizationType.F16)
    shutil.copytree(TOY, cache / ".fetch-folder")
    (cache / "half.gguf.part").write_bytes(b"GGUF")
    (cache / "mmproj-tiny.gguf").write_bytes(b"GGUF")  # a vision projector: not a model
    os.mkfifo(cache / "pipe.gguf")  # an open() would wait for a writer forever
    os.symlink(cache / "loop.gguf", cache / "loop.gguf")
    os.symlink(cache / "gone.gguf.target", cache / "dangling.gguf")
    (cache / "notes").mkdir()  # a folder that holds no checkpoint
    (cache / "notes" / "readme.txt").write_text("hi")
    (cache / "README.txt").write_text("not a model")
    (cache / "cut.gguf").write_bytes((cache / "tiny-llama.Q8_0.gguf").read_bytes()[:300])
    monkeypatch.setenv("ATTNCLI_MODEL_CACHE", str(cache))
    for variable, folder in (("HF_HUB_CACHE", "no-hub"), ("OLLAMA_MODELS", "no-ollama"),
                             ("LMSTUDIO_MODELS", "no-lmstudio")):
        monkeypatch.setenv(variable, str(tmp_path / folder))
    return cache


def test_the_cache_lists_gguf_files_and_folders_never_partial_ones(fetched: Path) -> None:
    assert fetched_models() == [
        {"name": "cut", "source": "attncli", "kind": "gguf", "path": str(fetched / "cut.gguf"),
         "model": "cut"},
        {"name": "tiny-llama.Q8_0", "source": "attncli", "kind": "gguf",
         "path": str(fetched / "tiny-llama.Q8_0.gguf"), "model": "tiny-llama.Q8_0"},
        {"name": "toy-gpt2", "source": "attncli", "kind": "folder",
         "path": str(fetched / "toy-gpt2"), "model": "toy-gpt2"},
    ]


def test_models_lists_the_cache_from_the_headers(cli, fetched: Path) -> None:
    doc = cli("models", "--json").json()
    file, folder = fetched / "tiny-llama.Q8_0.gguf", fetched / "toy-gpt2"
    assert doc["stores"]["attncli"] == str(fetched)
    assert doc["models"] == [
        {"name": "tiny-llama.Q8_0", "source": "attncli", "format": "gguf",
         "model": "tiny-llama.Q8_0", "path": str(file), **_gguf_row(file)},
        {"name": "toy-gpt2", "source": "attncli", "format": "safetensors", "model": "toy-gpt2",
         "path": str(folder), "quantization": _stored_as(folder / "model.safetensors"),
         "architecture": "gpt2", "layers": 3, "heads": 4, "kv_heads": 4,
         "size_bytes": (folder / "model.safetensors").stat().st_size}]
    assert [(row["name"], row["source"]) for row in doc["unreadable"]] == [("cut", "attncli")]
    assert "truncated" in doc["unreadable"][0]["reason"]
    table = cli("models")
    assert "attncli's cache " + str(fetched) in table.out.replace("\n", "")
    assert "No model attncli can read" not in table.out


def test_each_listed_model_runs_by_its_name_and_by_its_path(cli, fetched: Path) -> None:
    for row in cli("models", "--json").json()["models"]:
        for model in (row["model"], row["path"]):
            got = cli("run", "the 12", "--model", model, "--json")
            assert got.code == 0, (model, got.err)
            shown = got.json()["model"]
            assert (shown["layers"], shown["heads"]) == (row["layers"], row["heads"])


@pytest.mark.parametrize(("name", "found"), [
    ("tiny-llama.Q8_0", "tiny-llama.Q8_0.gguf"), ("tiny-llama.Q8_0.gguf", "tiny-llama.Q8_0.gguf"),
    ("toy-gpt2", "toy-gpt2"), (".fetch-abc123", None), (".fetch-folder", None),
    ("half.gguf.part", None), ("half.gguf", None), ("pipe", None), ("loop.gguf", None),
    ("mmproj-tiny", None), ("notes", None), ("toy-gpt2/config.json", None), ("..", None),
    ("", None), ("nul\0name", None),
])
def test_names_find_what_is_listed_and_nothing_else(fetched: Path, name: str,
                                                    found: str | None) -> None:
    assert find_fetched(name) == (None if found is None else fetched / found)


def test_a_name_two_entries_share_is_one_line_and_listed_by_path(cli, fetched: Path) -> None:
    shutil.copytree(TOY, fetched / "tiny-llama.Q8_0")
    with pytest.raises(AttnCliError, match=r"names 2 models in attncli's cache"):
        find_fetched("tiny-llama.Q8_0")
    assert find_fetched("tiny-llama.Q8_0.gguf") == fetched / "tiny-llama.Q8_0.gguf"
    models = {row["path"]: row["model"] for row in cli("models", "--json").json()["models"]}
    assert models[str(fetched / "tiny-llama.Q8_0")] == str(fetched / "tiny-llama.Q8_0")
    assert models[str(fetched / "tiny-llama.Q8_0.gguf")] == str(fetched / "tiny-llama.Q8_0.gguf")
    cli("run", "hi", "--model", "tiny-llama.Q8_0").assert_usage_error("pass the path")


def test_the_hub_cache_comes_first_for_a_shared_name(cli, fetched: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    hub = tmp_path / "hub"
    shutil.copytree(TOY, hub / "models--Org--toy-gpt2" / "snapshots" / "a")
    (fetched / "toy-gpt2").rename(fetched / "Org")  # the hub name's first part, a folder here
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    doc = cli("run", "hi", "--model", "Org/toy-gpt2", "--json").json()
    assert doc["config"]["model"] == "Org/toy-gpt2"
    assert find_fetched("Org/toy-gpt2") is None


def test_a_missing_or_unlistable_cache_lists_nothing(cli, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "afile").write_text("x")
    for cache in (tmp_path / "none", tmp_path / "afile", tmp_path / "afile" / "models",
                  tmp_path / ("n" * 300)):
        monkeypatch.setenv("ATTNCLI_MODEL_CACHE", str(cache))
        assert fetched_models() == [] and find_fetched("anything") is None


def test_the_walk_is_bounded(fetched: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("attncli.models.stores.fetched.MAX_ENTRIES", 3)
    assert len(fetched_models()) <= 3 < MAX_ENTRIES


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a chmod 000 file anyway")
def test_an_unreadable_gguf_is_listed_as_unreadable(cli, fetched: Path) -> None:
    (fetched / "tiny-llama.Q8_0.gguf").chmod(0)
    try:
        doc = cli("models", "--json").json()
    finally:
        (fetched / "tiny-llama.Q8_0.gguf").chmod(0o644)
    assert "tiny-llama.Q8_0" in [row["name"] for row in doc["unreadable"]]


def test_a_hostile_cache_as_a_real_run_under_a_memory_limit(fetched: Path) -> None:
    """FIFOs, a loop, a dangling link and partial fetches: no hang, no traceback, exit 0."""
    for args in (("models",), ("models", "--json")):
        proc = run_process(*args)
        assert proc.returncode == 0 and proc.stderr == b"", proc.stderr
    assert b"tiny-llama.Q8_0" in proc.stdout and b".fetch" not in proc.stdout
    assert b"pipe" not in proc.stdout and b"loop" not in proc.stdout
