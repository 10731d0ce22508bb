"""A model file renamed over or rewritten while a pass reads it (models/sources/identity.py, as
the hidden-state cache's passes use it): one line, exit 2, nothing cached, whether it changes
after the header was read or between two layers' reads, for a GGUF file and for a safetensors
folder (one file or shards); a later look at the new file equals a fresh pass over it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import gguf
import pytest

from attncli.models.sources import safetensors as safetensors_module
from attncli.models.sources.gguf import source as gguf_module
from tests.gguf_fixtures import write_model
from tests.llama_fixtures import save_family

TEXT = "the cat sat on the mat and the cat sat"
RUN = ("run", TEXT, "--layer", "1", "--json")
CHANGED = "changed while it was read: nothing was cached; run again"


@pytest.fixture(scope="module")
def ggufs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two tiny llama GGUF files of one shape and vocabulary, with other weights."""
    folder = tmp_path_factory.mktemp("ggufs")
    write_model(folder / "a.gguf", "llama", gguf.GGMLQuantizationType.Q8_0, add_bos=True)
    write_model(folder / "b.gguf", "llama", gguf.GGMLQuantizationType.Q8_0, add_bos=True,
                extra={"zz.other.weight": __import__("numpy").ones(32, dtype="float32")})
    return folder / "a.gguf", folder / "b.gguf"


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    """Two tiny llama safetensors folders (one file, and shards) each, with other weights."""
    root = tmp_path_factory.mktemp("folders")
    made = {}
    for kind, shard in (("single", None), ("sharded", "40KB")):
        pair = root / f"{kind}-a", root / f"{kind}-b"
        for seed, folder in enumerate(pair):
            save_family(folder, "llama", seed=seed, shard=shard)
        made[kind] = pair
    assert len(list(made["sharded"][0].glob("*.safetensors"))) > 1
    return made


def _cache() -> Path:
    return Path(os.environ["ATTNCLI_HIDDEN_CACHE"])


def _entries() -> list[str]:
    return sorted(p.name for p in _cache().iterdir()) if _cache().exists() else []


def _fresh(cli, model: Path, monkeypatch: pytest.MonkeyPatch) -> dict:  # noqa: ANN001
    """A run over model with no cache at all."""
    monkeypatch.setenv("ATTNCLI_NO_CACHE", "1")
    done = cli(*RUN, "--model", str(model))
    monkeypatch.delenv("ATTNCLI_NO_CACHE")
    assert done.code == 0, done.err
    return done.json()


def _replace(new: Path, path: Path) -> None:
    """path renamed over by a copy of new (another inode)."""
    shutil.copy(new, path.with_name(path.name + ".tmp"))
    os.replace(path.with_name(path.name + ".tmp"), path)


def _rewrite(new: Path, path: Path) -> None:
    """path rewritten in place with new's bytes (the same inode)."""
    with open(path, "r+b") as file:
        file.write(new.read_bytes())
    os.utime(path, ns=(1, 1))  # a clock too coarse to see the write would not hide it


def _after_header(monkeypatch: pytest.MonkeyPatch, change: Callable[[], None]) -> None:
    real = gguf_module.open_header

    def opened(path: Path) -> tuple:
        header = real(path)
        change()
        return header

    monkeypatch.setattr(gguf_module, "open_header", opened)


def _after_tensor(monkeypatch: pytest.MonkeyPatch, cls: type, name: str,
                  change: Callable[[], None]) -> None:
    """change() once, right after the tensor named name is read: as float32 (tensor) or, for
    the quantized kernels, as the file holds it (quantized)."""
    def hooked(real: Callable[..., object]) -> Callable[..., object]:
        def read(self, wanted: str):  # noqa: ANN001, ANN202
            out = real(self, wanted)
            if wanted == name and out is not None and not getattr(cls, "changed", False):
                cls.changed = True
                change()
            return out
        return read

    for method in ("tensor", "quantized"):
        if hasattr(cls, method):
            monkeypatch.setattr(cls, method, hooked(getattr(cls, method)))
    monkeypatch.setattr(cls, "changed", False, raising=False)


@pytest.mark.parametrize("change", [_replace, _rewrite])
@pytest.mark.parametrize("cached", [True, False])
def test_a_gguf_changed_after_its_header_was_read_is_one_line_and_nothing_cached(
        cli, ggufs: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,  # noqa: ANN001
        change: Callable[[Path, Path], None], cached: bool) -> None:
    path = tmp_path / "model.gguf"
    shutil.copy(ggufs[0], path)
    with monkeypatch.context() as hooked:
        if not cached:
            hooked.setenv("ATTNCLI_NO_CACHE", "1")
        _after_header(hooked, lambda: change(ggufs[1], path))
        cli(*RUN, "--model", str(path)).assert_usage_error(f"{path} {CHANGED}")
    assert _entries() == []
    again = cli(*RUN, "--model", str(path))  # the new file, whole
    assert again.code == 0 and again.json() == _fresh(cli, path, monkeypatch)


@pytest.mark.parametrize("change", [_replace, _rewrite])
def test_a_gguf_changed_between_two_layers_leaves_nothing_cached(
        cli, ggufs: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,  # noqa: ANN001
        change: Callable[[Path, Path], None]) -> None:
    path = tmp_path / "model.gguf"
    shutil.copy(ggufs[0], path)
    _after_tensor(monkeypatch, gguf_module.GgufSource, "model.layers.1.self_attn.q_proj.weight",
                  lambda: change(ggufs[1], path))
    cli(*RUN, "--model", str(path)).assert_usage_error(f"{path} {CHANGED}")
    assert _entries() == []  # the streams of layer 0, kept before the change, removed too


@pytest.mark.parametrize("kind", ["single", "sharded"])
def test_a_safetensors_file_changed_while_it_is_read_is_one_line_and_nothing_cached(
        cli, folders: dict[str, tuple[Path, Path]], tmp_path: Path,  # noqa: ANN001
        monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    folder = tmp_path / "model"
    shutil.copytree(folders[kind][0], folder)
    shards = sorted(folder.glob("*.safetensors"))
    target = shards[-1]  # the last shard: opened after the first was read from
    with monkeypatch.context() as hooked:
        _after_tensor(hooked, safetensors_module.SafetensorsSource,
                      "model.layers.1.self_attn.q_proj.weight",
                      lambda: _replace(folders[kind][1] / target.name, target))
        cli(*RUN, "--model", str(folder)).assert_usage_error(f"{target} {CHANGED}")
    assert _entries() == []
    again = cli(*RUN, "--model", str(folder))
    assert again.code == 0 and again.json() == _fresh(cli, folder, monkeypatch)


def test_a_config_rewritten_while_the_model_is_read_is_one_line(
        cli, folders: dict[str, tuple[Path, Path]], tmp_path: Path,  # noqa: ANN001
        monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "model"
    shutil.copytree(folders["single"][0], folder)
    config = folder / "config.json"
    _after_tensor(monkeypatch, safetensors_module.SafetensorsSource,
                  "model.layers.0.self_attn.q_proj.weight",
                  lambda: config.write_text(config.read_text().replace("{", "{\n", 1)))
    cli(*RUN, "--model", str(folder)).assert_usage_error(f"{config} {CHANGED}")
    assert _entries() == []


REPLACED_BY_A_FIFO = """
import os, sys
from pathlib import Path
from attncli.errors import AttnCliError
from attncli.models.sources.gguf.header import read_header
from attncli.models.sources.gguf.source import GgufSource
path = Path(sys.argv[1])
source = GgufSource(read_header(path))  # as `models` describes a file: opened at the first read
path.unlink()
os.mkfifo(path)  # no writer: a blocking open would wait forever
try:
    source.tensor("model.norm.weight")
except AttnCliError as err:
    print(err)
"""


def test_a_gguf_replaced_by_a_fifo_before_its_first_read_is_one_line(
        ggufs: tuple[Path, Path], tmp_path: Path) -> None:
    path = tmp_path / "model.gguf"
    shutil.copy(ggufs[0], path)
    done = subprocess.run([sys.executable, "-c", REPLACED_BY_A_FIFO, str(path)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.stdout == f"{path} {CHANGED}\n", done.stderr
