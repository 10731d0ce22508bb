"""GPT-2 options beyond the released models: attention scaling switches and MLP activations."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch.testing import assert_close

from attncli.models.activations import ACTIVATIONS
from attncli.models.checkpoint import resolve_checkpoint
from attncli.models.gpt2 import gpt2_attention
from tests.gpt2_fixtures import hf_reference, save_hf_gpt2

SMALL = {"n_layer": 3, "n_head": 4, "n_embd": 32, "n_positions": 32, "vocab_size": 300}
IDS = [5, 17, 200, 3, 3, 99, 250, 1, 42, 42, 7, 120]


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_each_activation_equals_transformers(name: str) -> None:
    from transformers.activations import ACT2FN

    x = torch.linspace(-12, 12, 2001)
    assert_close(ACTIVATIONS[name](x), ACT2FN[name](x), atol=1e-6, rtol=1e-6)


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
        assert_close(got.output.weights, ref["attentions"][layer], atol=1e-5, rtol=0)
        for mine, theirs in zip(got.hidden_states, ref["hidden_states"], strict=False):
            assert_close(mine, theirs, atol=1e-5, rtol=1e-5)
