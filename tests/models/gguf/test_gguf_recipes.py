"""A family is one folder for every format: the GGUF reader takes each architecture's names and
fixes from its family's gguf.py, through one registry line in attncli/models/__init__.py."""

from __future__ import annotations

import importlib
from pathlib import Path

import gguf
import numpy as np
import pytest
import torch

from attncli.core.request import Request
from attncli.errors import AttnCliError
from attncli.models import GGUF, REFUSED
from attncli.models.family import REGISTRY
from attncli.models.run import run_model
from attncli.models.sources.gguf import open_gguf
from attncli.models.sources.gguf.recipe import RECIPES
from tests.models.test_family import HEADS, TEXT, VOCAB, D, _reference
from tests.tolerance import assert_near


def _write_toy(path: Path) -> dict[str, torch.Tensor]:
    """A toyarch GGUF file, its attn_output stored (in, out) as the toy recipe declares; returns
    the tensors in HF layout."""
    gen = torch.Generator().manual_seed(7)
    tensors = {"embed.weight": torch.randn(VOCAB, D, generator=gen),
               **{f"attn.{p}.weight": torch.randn(D, D, generator=gen) / D ** 0.5
                  for p in "qkvo"},
               "attn.o.bias": torch.randn(D, generator=gen)}
    stored = {"token_embd.weight": tensors["embed.weight"],
              **{f"blk.0.attn_{g}.weight": tensors[f"attn.{p}.weight"]
                 for p, g in (("q", "q"), ("k", "k"), ("v", "v"))},
              "blk.0.attn_output.weight": tensors["attn.o.weight"].T,
              "blk.0.attn_output.bias": tensors["attn.o.bias"]}
    writer = gguf.GGUFWriter(str(path), "toyarch")
    writer.add_block_count(1)
    writer.add_embedding_length(D)
    writer.add_head_count(HEADS)
    for name, w in stored.items():
        writer.add_tensor(name, np.ascontiguousarray(w.numpy(), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return tensors


@pytest.fixture
def toy_gguf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, dict]:
    """A toyarch GGUF file, the toy family registered by its one line in REGISTRY."""
    monkeypatch.setitem(REGISTRY, "toyarch", ("tests.toy_family.family", "TOY"))
    path = tmp_path / "toy.gguf"
    return path, _write_toy(path)


def test_an_architecture_without_a_registry_line_is_refused(toy_gguf: tuple[Path, dict]) -> None:
    path, _ = toy_gguf
    readable = ", ".join(sorted(GGUF))
    with pytest.raises(AttnCliError) as caught:
        open_gguf(path)
    assert str(caught.value) == (f"{path} holds a 'toyarch' model (an architecture attncli has "
                                 f"no tensor mapping for); attncli reads GGUF architectures "
                                 f"{readable}")


def test_one_registry_line_reads_a_new_family(toy_gguf: tuple[Path, dict],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The toy's recipe in its folder plus one GGUF line: its tensors come back in HF layout (the
    declared transpose undone), and run gives the attention computed here with torch."""
    path, tensors = toy_gguf
    monkeypatch.setitem(GGUF, "toyarch", ("tests.toy_family.gguf", "TOY"))
    source = open_gguf(path)
    assert source.config()["model_type"] == "toyarch"
    assert source.config()["num_heads"] == HEADS
    assert sorted(source.shapes()) == sorted(tensors)
    for name, want in tensors.items():
        assert torch.equal(source.tensor(name), want), name
    result = run_model(Request(text=TEXT, model=str(path)))
    weights, context = _reference(tensors, TEXT)
    assert result.variant == "toyarch"
    assert_near(torch.tensor(result.weights), weights)
    assert_near(torch.tensor(result.context), context)


@pytest.mark.parametrize("arch", sorted(GGUF))
def test_each_recipe_lives_in_the_folder_of_the_family_that_runs_it(arch: str) -> None:
    module, attribute = GGUF[arch]
    recipe = RECIPES[arch]
    assert recipe is getattr(importlib.import_module(module), attribute)
    family_module, _ = REGISTRY[recipe.model_type]
    assert module.rsplit(".", 1)[0] == family_module.rsplit(".", 1)[0], (module, family_module)
    assert module.endswith(".gguf")


def test_a_refused_architecture_is_not_also_read() -> None:
    assert set(GGUF).isdisjoint(REFUSED)
    assert set(RECIPES) == set(GGUF)
