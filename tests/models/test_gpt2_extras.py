"""GPT-2 options beyond the released models: attention scaling switches and MLP activations."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from attncli.models.activations import ACTIVATIONS
from attncli.models.gpt2.family import resolve_checkpoint
from attncli.models.gpt2.model import gpt2_attention
from tests.gpt2_fixtures import hf_reference, save_hf_gpt2
from tests.tolerance import assert_near

SMALL = {"n_layer": 3, "n_head": 4, "n_embd": 32, "n_positions": 32, "vocab_size": 300}
IDS = [5, 17, 200, 3, 3, 99, 250, 1, 42, 42, 7, 120]


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_each_activation_equals_transformers(name: str) -> None:
    from transformers.activations import ACT2FN

    x = torch.linspace(-12, 12, 2001)
    assert_near(ACTIVATIONS[name](x), ACT2FN[name](x))


def test_a_sharded_half_precision_gpt2_matches_transformers(tmp_path) -> None:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(4)
    model = GPT2LMHeadModel(GPT2Config(initializer_range=0.2, bos_token_id=0, eos_token_id=0,
                                       **SMALL)).half()
    model.save_pretrained(tmp_path, safe_serialization=True, max_shard_size="20KB")
    assert len(list(tmp_path.glob("model-*.safetensors"))) > 1
    reference = GPT2LMHeadModel.from_pretrained(tmp_path, dtype=torch.float32,
                                                attn_implementation="eager").eval()
    ckpt = resolve_checkpoint(str(tmp_path))
    assert ckpt.path == tmp_path / "model.safetensors.index.json"
    ref = hf_reference(reference, IDS)
    for layer in range(ckpt.n_layer):
        got = gpt2_attention(ckpt, IDS, layer)
        assert_near(got.output.weights, ref["attentions"][layer])


@pytest.mark.parametrize("config", [
    {"scale_attn_weights": False},
    {"scale_attn_by_inverse_layer_idx": True},
    {"scale_attn_weights": False, "scale_attn_by_inverse_layer_idx": True},
    {"activation_function": "relu"},
    {"activation_function": "gelu"},
    {"activation_function": "quick_gelu"},
    {"activation_function": "silu"},
])  # fmt: skip
def test_every_layer_matches_transformers(tmp_path, config: dict[str, Any]) -> None:
    model = save_hf_gpt2(tmp_path, seed=3, **SMALL, **config)
    ckpt = resolve_checkpoint(str(tmp_path))
    ref = hf_reference(model, IDS)
    for layer in range(ckpt.n_layer):
        got = gpt2_attention(ckpt, IDS, layer)
        assert_near(got.output.weights, ref["attentions"][layer])
        for mine, theirs in zip(got.hidden_states, ref["hidden_states"], strict=False):
            assert_near(mine, theirs)
