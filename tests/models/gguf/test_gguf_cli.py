"""`--model FILE.gguf`, `ollama:NAME[:TAG]` and LM Studio names on the CLI, against transformers
loading the same GGUF file (`from_pretrained(..., gguf_file=...)`, eager attention)."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import gguf
import pytest
import torch

from attncli.models.family import open_model
from tests.gguf_fixtures import smollm2, write_model
from tests.llama_fixtures import hf_reference
from tests.tolerance import assert_near

TEXT = "The cat sat on the mat. 猫 123 🙂"


@contextmanager
def gguf_parsed_once() -> Iterator[None]:
    """What transformers' GGUF loader asks gguf for again and again, made once inside: the
    TensorNameMap(arch, layers) it builds for each module of the model (397 times for SmolLM2,
    ~14 ms each), and the GGUFReader of a file, which from_pretrained parses twice, for the config
    and for the tensors (5 s each for SmolLM2's 49,152-token vocabulary). Both are only read
    (get_name; fields and tensors of a read-only memmap), so the loader builds exactly the config
    and the tensors that it would from fresh ones."""
    readers: dict[tuple[Any, ...], Any] = {}
    fresh_reader = gguf.GGUFReader

    def reader(path: Any, *args: Any, **kwargs: Any) -> Any:
        key = (os.fspath(path), args, tuple(sorted(kwargs.items())))
        if key not in readers:
            readers[key] = fresh_reader(path, *args, **kwargs)
        return readers[key]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(gguf, "get_tensor_name_map",
                      functools.lru_cache(maxsize=None)(gguf.get_tensor_name_map))
        patch.setattr(gguf, "GGUFReader", reader)
        yield


def _transformers(path: Path) -> Any:
    from transformers import AutoModelForCausalLM

    with gguf_parsed_once():
        model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name,
                                                     attn_implementation="eager",
                                                     dtype=torch.float32)
    return model.eval()


def _weights(doc: dict[str, Any]) -> torch.Tensor:
    return torch.tensor(doc["weights"])  # (heads, T, T)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    path = tmp_path_factory.mktemp("gguf") / "tiny-llama.gguf"
    write_model(path, "llama", gguf.GGMLQuantizationType.Q8_0, add_bos=True)
    return path, _transformers(path)


@pytest.mark.parametrize("layer", [0, -1])
def test_run_on_a_gguf_file_matches_transformers(cli, tiny, layer: int) -> None:  # noqa: ANN001
    path, model = tiny
    doc = cli("run", TEXT, "--model", str(path), "--layer", str(layer), "--json").json()
    ids = [t["id"] for t in doc["tokens"]]
    ref = hf_reference(model, ids)
    assert_near(_weights(doc), ref["attentions"][layer])
    assert doc["config"]["tokenizer"]["file"] == path.name
    assert doc["model"]["architecture"] == "llama"


def test_heads_on_a_gguf_file_matches_transformers(cli, tiny) -> None:  # noqa: ANN001
    path, model = tiny
    doc = cli("heads", TEXT, "--model", str(path), "--json").json()
    assert doc["model"]["layers"] == len(model.model.layers)
    assert cli("run", TEXT, "--model", str(path), "--json").code == 0


def _ollama_store(root: Path, blob: Path, name: str = "tiny", tag: str = "latest") -> None:
    digest = hashlib.sha256(blob.read_bytes()).hexdigest()
    (root / "blobs").mkdir(parents=True)
    shutil.copy(blob, root / "blobs" / f"sha256-{digest}")
    manifest = {"schemaVersion": 2, "layers": [
        {"mediaType": "application/vnd.ollama.image.model", "digest": f"sha256:{digest}",
         "size": blob.stat().st_size}]}
    folder = root / "manifests" / "registry.ollama.ai" / "library" / name
    folder.mkdir(parents=True)
    (folder / tag).write_text(json.dumps(manifest))


def test_ollama_name_reads_the_same_model(cli, tiny, tmp_path: Path,  # noqa: ANN001
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    path, _ = tiny
    _ollama_store(tmp_path / "ollama", path)
    monkeypatch.setenv("OLLAMA_MODELS", str(tmp_path / "ollama"))
    direct = cli("run", TEXT, "--model", str(path), "--json").json()
    stored = cli("run", TEXT, "--model", "ollama:tiny", "--json").json()
    assert stored["weights"] == direct["weights"]
    missing = cli("run", TEXT, "--model", "ollama:absent:7b")
    assert missing.code == 2 and len(missing.err.strip().splitlines()) == 1


def test_lmstudio_name_reads_the_same_model(cli, tiny, tmp_path: Path,  # noqa: ANN001
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    path, _ = tiny
    folder = tmp_path / "lms" / "someone" / "tiny-GGUF"
    folder.mkdir(parents=True)
    shutil.copy(path, folder / "tiny.Q8_0.gguf")
    monkeypatch.setenv("LMSTUDIO_MODELS", str(tmp_path / "lms"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    direct = cli("run", TEXT, "--model", str(path), "--json").json()
    stored = cli("run", TEXT, "--model", "someone/tiny-GGUF", "--json").json()
    assert stored["weights"] == direct["weights"]


@pytest.mark.slow
def test_the_real_smollm2_matches_transformers_on_every_layer(cli) -> None:  # noqa: ANN001
    path = smollm2()
    text = "The quick brown fox. The quick brown fox. 猫 42"
    doc = cli("heads", text, "--model", str(path), "--json").json()
    ids = [t["id"] for t in doc["tokens"]]
    ref = hf_reference(_transformers(path), ids)
    for layer in (0, 16, 29):  # through the command a user types
        ours = cli("run", text, "--model", str(path), "--layer", str(layer), "--json").json()
        assert [t["id"] for t in ours["tokens"]] == ids
        want = ref["attentions"][layer]  # (heads, T, T)
        assert_near(_weights(ours), want)
    every = open_model(str(path)).all_layers(ids)  # (layers, heads, T, T): one forward pass
    assert every.shape == (30, 9, len(ids), len(ids))
    for layer in range(30):
        assert_near(every[layer], ref["attentions"][layer],
                    msg=lambda m, layer=layer: f"layer {layer}: {m}")


def test_a_fifo_named_gguf_is_refused_at_once(cli, tmp_path: Path) -> None:  # noqa: ANN001
    fifo = tmp_path / "model.gguf"
    os.mkfifo(fifo)  # opening it for reading would wait for a writer forever
    result = cli("run", "hi", "--model", str(fifo))
    assert result.code == 2
    assert result.err.strip().splitlines() == [f"attncli: error: {fifo} is a FIFO (named pipe), "
                                               "not a regular file or folder, so attncli does "
                                               "not open it"]


def test_the_tiled_table_describes_the_checkpoint_not_a_seed(cli, tiny) -> None:  # noqa: ANN001
    path, _ = tiny
    got = cli("run", TEXT, "--model", str(path), "--layer", "1", "--impl", "tiled")
    assert got.code == 0, got.err
    header = " ".join(got.out.split("Summary per head")[0].split())
    assert "seed None" not in header and "layer 1 of 2" in header and "tiled path:" in header


def test_heads_on_too_long_a_text_is_refused_before_it_runs(cli, tiny,  # noqa: ANN001
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    """Every layer's N × N weights are estimated first: one line, exit 2, no forward pass."""
    from attncli import machine
    from attncli.models.llama import family

    path, _ = tiny
    monkeypatch.setattr(machine, "available_bytes", lambda: 2 * 10**9)
    for forward in ("all_layers", "trace"):
        monkeypatch.setattr(family.LlamaModel, forward,
                            lambda *_, name=forward: pytest.fail(f"{name} ran before the estimate"))
    got = cli("heads", "the " * 3000, "--model", str(path))
    assert got.code == 2 and got.err.count("\n") == 1
    assert re.search(r"heads keeps 2 layers' 4 heads of (3,\d{3}) × \1 weights \(2\.\d GB\), "
                     r"more than half the 2\.0 GB available", got.err)
