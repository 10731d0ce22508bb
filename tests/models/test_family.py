"""A third family is one folder (tests/toy_family/) plus one registry line: run, heads and
kvcache then work on it unchanged, checked against attention computed here with torch."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from attncli.core.request import Request
from attncli.core.tokens import tokenize
from attncli.errors import AttnCliError
from attncli.lessons.kvcache import kvcache_model
from attncli.models.family import REGISTRY, readable
from attncli.models.run import run_heads, run_model
from tests.tolerance import assert_near

TEXT = "The cat sat on the mat"
VOCAB, D, HEADS = 97, 8, 2


@pytest.fixture
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, dict[str, torch.Tensor]]:
    """A toyarch checkpoint, with its family registered by one line."""
    monkeypatch.setitem(REGISTRY, "toyarch", ("tests.toy_family.family", "TOY"))
    gen = torch.Generator().manual_seed(7)
    tensors = {"embed.weight": torch.randn(VOCAB, D, generator=gen),
               **{f"attn.{p}.weight": torch.randn(D, D, generator=gen) / math.sqrt(D)
                  for p in "qkvo"},
               "attn.o.bias": torch.randn(D, generator=gen)}
    save_file(tensors, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "toyarch",
                                                      "num_heads": HEADS}))
    return tmp_path, tensors


def _reference(tensors: dict[str, torch.Tensor], text: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Causal multi-head attention on the embeddings, written out: weights and context."""
    ids = [p.id % VOCAB for p in tokenize(text, "gpt2", False) if p.id is not None]
    x = tensors["embed.weight"][ids]  # (T, d)
    t, hd = len(ids), D // HEADS
    q, k, v = (x @ tensors[f"attn.{p}.weight"].T for p in "qkv")  # each (T, d)
    q, k, v = (m.view(t, HEADS, hd).transpose(0, 1) for m in (q, k, v))  # each (h, T, hd)
    scores = q @ k.transpose(1, 2) / math.sqrt(hd)  # (h, T, T)
    future = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)  # (T, T)
    weights = torch.softmax(scores.masked_fill(future, -torch.inf), dim=-1)  # (h, T, T)
    context = (weights @ v).transpose(0, 1).reshape(t, D)  # (T, d)
    return weights, context @ tensors["attn.o.weight"].T + tensors["attn.o.bias"]  # (T, d)


def test_run_reads_the_new_family(toy: tuple[Path, dict[str, torch.Tensor]]) -> None:
    folder, tensors = toy
    result = run_model(Request(text=TEXT, model=str(folder)))
    weights, context = _reference(tensors, TEXT)
    assert result.variant == "toyarch"
    assert_near(torch.tensor(result.weights), weights)
    assert_near(torch.tensor(result.context), context)
    assert result.to_dict()["model"] == {"path": str(folder), "layers": 1, "heads": HEADS,
                                         "d_model": D, "layer": 0}


def test_heads_and_kvcache_need_nothing_more(toy: tuple[Path, dict[str, torch.Tensor]]) -> None:
    folder, tensors = toy
    heads = run_heads(Request(text=TEXT, model=str(folder)))
    assert [(m["layer"], m["head"]) for m in heads.measures] == [(0, h) for h in range(HEADS)]
    decoded = kvcache_model(Request(text=TEXT, model=str(folder)))
    weights, _ = _reference(tensors, TEXT)
    assert decoded.ok and len(decoded.steps) == weights.shape[1]
    last = torch.tensor(decoded.steps[-1].weights)  # (heads, T)
    assert_near(last, weights[:, -1])


def test_its_traits_decide_what_runs(toy: tuple[Path, dict[str, torch.Tensor]]) -> None:
    folder, _ = toy
    with pytest.raises(AttnCliError, match="--impl tiled does not apply to a Toy checkpoint: "
                                           "it reads at most 64 tokens"):
        run_model(Request(text=TEXT, model=str(folder), impl="tiled"))
    assert readable().endswith("and Toy (model_type 'toyarch')")


def test_an_unregistered_model_type_is_refused_by_name(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "toyarch"}))
    with pytest.raises(AttnCliError) as info:
        run_model(Request(text=TEXT, model=str(tmp_path)))
    assert str(info.value) == (
        f"{tmp_path / 'config.json'} describes a 'toyarch' model; attncli reads GPT-2 "
        "(model_type 'gpt2'), Llama-family (llama, mistral, qwen2, qwen3), Gemma 2 "
        "(model_type 'gemma2'), Gemma 3 (gemma3_text, gemma3), Phi-3 (model_type 'phi3'), "
        "GPT-NeoX (model_type 'gpt_neox'), OLMo 2 (model_type 'olmo2'), SmolLM3 (model_type "
        "'smollm3') and BERT-style encoder (bert, roberta) checkpoints")


@pytest.mark.parametrize(("model_type", "why"), [
    ("mamba", "has no attention layers"), ("t5", "encoder-decoder"),
    ("qwen3_next", "softmax attention in layers 3, 7 of 8"),
])
def test_a_family_attncli_cannot_show_is_refused_with_its_reason(tmp_path: Path, model_type: str,
                                                                 why: str) -> None:
    types = ["linear_attention"] * 3 + ["full_attention"]
    (tmp_path / "config.json").write_text(json.dumps({"model_type": model_type,
                                                      "layer_types": types * 2}))
    with pytest.raises(AttnCliError, match=f"describes a '{model_type}' model, which .*{why}"):
        run_model(Request(text=TEXT, model=str(tmp_path)))
