"""RoPE: attncli's frequencies and rotation against transformers' own functions."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from attncli.errors import AttnCliError
from attncli.models.llama.config import llama_spec
from attncli.models.llama.rope import apply_rope, inv_freq, rope_tables
from tests.tolerance import assert_near

BASE = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
        "num_hidden_layers": 1, "intermediate_size": 8, "vocab_size": 10,
        "max_position_embeddings": 16}
SCALINGS = [
    {"rope_type": "default", "rope_theta": 10000.0},
    {"rope_type": "linear", "factor": 4.0, "rope_theta": 10000.0},
    {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10000.0},
    {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
     "original_max_position_embeddings": 8, "rope_theta": 500000.0},
]


@pytest.mark.parametrize("params", SCALINGS, ids=lambda p: p["rope_type"])
@pytest.mark.parametrize("num_tokens", [10, 40])  # within, and past, max_position_embeddings
def test_inv_freq_equals_transformers(params: dict, num_tokens: int) -> None:
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    spec = llama_spec(Path("."), {**BASE, "rope_parameters": params})
    config = LlamaConfig(**{k: v for k, v in BASE.items() if k != "model_type"},
                         rope_parameters=params)
    if params["rope_type"] == "default":
        expected = 1.0 / (10000.0 ** (torch.arange(0, 16, 2).float() / 16))
    else:
        seq_len = num_tokens if params["rope_type"] == "dynamic" else None
        expected, _ = ROPE_INIT_FUNCTIONS[params["rope_type"]](config, "cpu", seq_len=seq_len)
    assert_near(inv_freq(spec, num_tokens), expected)


def test_partial_rotary_with_default_rope_turns_the_whole_head_as_transformers_does() -> None:
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    spec = llama_spec(Path("."), {**BASE, "partial_rotary_factor": 0.25})
    assert spec.rotary_dim == 16
    config = LlamaConfig(**{k: v for k, v in BASE.items() if k != "model_type"},
                         partial_rotary_factor=0.25)
    ref_cos, ref_sin = LlamaRotaryEmbedding(config)(torch.zeros(1), torch.arange(7)[None])
    cos, sin = rope_tables(spec, 7)  # each (T, 16)
    assert_near(cos, ref_cos[0])
    assert_near(sin, ref_sin[0])


@pytest.mark.parametrize("params", SCALINGS[1:], ids=lambda p: p["rope_type"])
def test_partial_rotary_with_scaled_rope_is_refused_as_transformers_cannot_run_it(
        params: dict) -> None:
    from transformers import LlamaConfig, LlamaForCausalLM

    settings = {**BASE, "rope_parameters": {**params, "partial_rotary_factor": 0.5}}
    with pytest.raises(AttnCliError, match="partial_rotary_factor=0.5 with rope_type"):
        llama_spec(Path("."), settings)
    config = LlamaConfig(**{k: v for k, v in settings.items() if k != "model_type"})
    model = LlamaForCausalLM(config)
    with pytest.raises(RuntimeError, match="size of tensor"):  # its cos covers half the head
        model(torch.tensor([[1, 2, 3]]))


def test_rotation_keeps_length_and_depends_on_distance_only() -> None:
    spec = llama_spec(Path("."), BASE)
    cos, sin = rope_tables(spec, 12)
    v = torch.randn(1, 1, 16).expand(1, 12, 16)  # one vector at every position
    turned = apply_rope(v, cos, sin)[0]  # (T, 16)
    assert_near(turned.norm(dim=-1), v[0].norm(dim=-1))
    dots = turned @ turned.T  # (T, T)
    assert_near(dots[3, 1], dots[9, 7])  # both two positions apart


@pytest.mark.parametrize("rotary_dim", [64, 32])  # the whole head, and a partial rotary
def test_a_decode_steps_row_turns_as_transformers_rotary_formula(rotary_dim: int) -> None:
    """StepRopes' one-row RoPE (a roll and the signed sin, in _rows.c where it is built) against
    transformers' apply_rotary_pos_emb on the same tables, position by position; the tail past
    rotary_dim kept as it was."""
    from dataclasses import replace

    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    from attncli.models.llama.block import NATIVE_NORM
    from attncli.models.llama.rope import LayerRopes, StepRopes, native_turn

    spec = replace(llama_spec(Path("."), {**BASE, "hidden_size": 256, "num_key_value_heads": 2}),
                   rotary_dim=rotary_dim)  # as a partial-rotary family's config sets it
    assert (spec.head_dim, spec.rotary_dim) == (64, rotary_dim)
    ropes = LayerRopes(spec, 12)
    steps = StepRopes(ropes, spec.head_dim)
    cos, sin = ropes[0]  # (T, rotary_dim) each
    torch.manual_seed(0)
    for t in (0, 5, 11):
        q, k = torch.randn(1, 4, 1, 64) * 10, torch.randn(1, 2, 1, 64) * 10  # (1, h, 1, hd)
        row = steps.row(0, t)
        assert row is not None and row.whole is (rotary_dim == 64)
        # the whole head turns in _rows.c's one call where it is built (held to both below)
        assert native_turn(q[0], row.cos, row.sin) is (NATIVE_NORM and row.whole)
        ref_q, ref_k = apply_rotary_pos_emb(q[..., :rotary_dim], k[..., :rotary_dim],
                                            cos[t:t + 1][None], sin[t:t + 1][None])
        assert_near(row.turn(q[0]), torch.cat((ref_q, q[..., rotary_dim:]), dim=-1)[0])
        assert_near(row.turn(k[0]), torch.cat((ref_k, k[..., rotary_dim:]), dim=-1)[0])
        # and apply_rope's own bits: under llama.cpp's numerics an ulp moves the answer
        assert torch.equal(row.turn(q[0]), apply_rope(q[0], cos[t:t + 1], sin[t:t + 1]))


@pytest.mark.parametrize("shape", [(0, 1, 64), (3, 1, 0), (3, 0, 64)])
def test_a_step_row_turns_an_empty_tensor_as_torch_does(shape: tuple[int, int, int]) -> None:
    """An empty x (no heads, no positions, or a head of no values) has no buffer to hand
    _rows.c (data_ptr() is 0): RopeRow.turn takes torch's operations and gives their empty
    result, not the C call's ValueError or a division by a zero head_dim."""
    from attncli.models.llama.rope import RopeRow, native_turn

    hd = shape[-1]
    x = torch.randn(shape)  # (heads, T, hd), empty
    cos, sin = torch.randn(1, hd), torch.randn(1, hd)  # (1, hd) each
    assert not native_turn(x, cos, sin)
    expected = x * cos + x.roll(hd // 2, -1) * sin if hd else x * cos  # (heads, T, hd)
    assert torch.equal(RopeRow(cos, sin, True).turn(x), expected)
