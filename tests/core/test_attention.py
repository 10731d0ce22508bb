"""The four variants against the book's published numbers and PyTorch's own attention."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from attncli.core.attention import (
    CausalAttention,
    MultiHeadAttention,
    QKVAttention,
    SimpleAttention,
    build_variant,
)
from attncli.errors import AttnCliError
from tests.tolerance import assert_near

# The six 3-d input vectors of "Your journey starts with one step" (chapter 3).
JOURNEY = torch.tensor([[0.43, 0.15, 0.89], [0.55, 0.87, 0.66], [0.57, 0.85, 0.64],
                        [0.22, 0.58, 0.33], [0.77, 0.25, 0.10], [0.05, 0.80, 0.55]])


def test_simple_matches_book_query_x2() -> None:
    out = SimpleAttention(3)(JOURNEY)
    expected_weights = torch.tensor([0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581])
    expected_context = torch.tensor([0.4419, 0.6515, 0.5683])
    assert_near(out.weights[0, 1], expected_weights, atol=5e-5, rtol=0)
    assert_near(out.context[1], expected_context, atol=5e-5, rtol=0)


def test_qkv_matches_book_self_attention_v2() -> None:
    torch.manual_seed(789)
    out = QKVAttention(3, 2)(JOURNEY)
    expected = torch.tensor([[-0.0739, 0.0713], [-0.0748, 0.0703], [-0.0749, 0.0702],
                             [-0.0760, 0.0685], [-0.0763, 0.0679], [-0.0754, 0.0693]])
    assert_near(out.context, expected, atol=5e-5, rtol=0)


def test_causal_matches_book() -> None:
    torch.manual_seed(123)
    out = CausalAttention(3, 2, dropout=0.0)(JOURNEY)
    expected = torch.tensor([[-0.4519, 0.2216], [-0.5874, 0.0058], [-0.6300, -0.0632],
                             [-0.5675, -0.0843], [-0.5526, -0.0981], [-0.5299, -0.1081]])
    assert_near(out.context, expected, atol=5e-5, rtol=0)


def test_multihead_matches_book() -> None:
    torch.manual_seed(123)
    out = MultiHeadAttention(3, 2, num_heads=2)(JOURNEY)
    expected = torch.tensor([[0.3190, 0.4858], [0.2943, 0.3897], [0.2856, 0.3593],
                             [0.2693, 0.3873], [0.2639, 0.3928], [0.2575, 0.4028]])
    assert_near(out.context, expected, atol=5e-5, rtol=0)


def _x(num_tokens: int = 7, d_in: int = 6, seed: int = 0) -> torch.Tensor:
    return torch.randn(num_tokens, d_in, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("causal", [False, True])
def test_qkv_and_causal_against_sdpa(causal: bool) -> None:
    torch.manual_seed(1)
    module = CausalAttention(6, 4) if causal else QKVAttention(6, 4)
    x = _x()
    out = module(x)
    q, k, v = module.W_query(x), module.W_key(x), module.W_value(x)
    reference = F.scaled_dot_product_attention(q[None], k[None], v[None], is_causal=causal)[0]
    assert_near(out.context, reference)
    assert_near(out.weights.sum(-1), torch.ones(1, 7))
    if causal:
        upper = torch.triu(torch.ones(7, 7, dtype=torch.bool), diagonal=1)
        assert torch.all(out.weights[0][upper] == 0)


@pytest.mark.parametrize("num_heads", [1, 2, 4])
def test_multihead_per_head_against_sdpa_and_nn_multiheadattention(num_heads: int) -> None:
    torch.manual_seed(2)
    d = 8
    module = MultiHeadAttention(d, d, num_heads=num_heads, qkv_bias=True)
    x = _x(d_in=d)
    out = module(x)

    def split(t: torch.Tensor) -> torch.Tensor:
        return t.view(7, num_heads, d // num_heads).transpose(0, 1)  # (heads, T, head_dim)

    q, k, v = split(module.W_query(x)), split(module.W_key(x)), split(module.W_value(x))
    per_head = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (heads, T, head_dim)
    assert_near(out.heads_context, per_head.transpose(0, 1).reshape(7, d))

    # torch.nn.MultiheadAttention with the same weights copied in.
    mha = torch.nn.MultiheadAttention(d, num_heads, batch_first=True)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([module.W_query.weight, module.W_key.weight,
                                            module.W_value.weight]))
        mha.in_proj_bias.copy_(torch.cat([module.W_query.bias, module.W_key.bias,
                                          module.W_value.bias]))
        mha.out_proj.weight.copy_(module.out_proj.weight)
        mha.out_proj.bias.copy_(module.out_proj.bias)
    mask = torch.triu(torch.ones(7, 7, dtype=torch.bool), diagonal=1)
    ref, ref_weights = mha(x[None], x[None], x[None], attn_mask=mask,
                           average_attn_weights=False, need_weights=True)
    assert_near(out.context, ref[0], atol=1e-5, rtol=1e-4)
    assert_near(out.weights, ref_weights[0])


def test_stages_are_consistent() -> None:
    torch.manual_seed(3)
    module = MultiHeadAttention(6, 8, num_heads=2)
    out = module(_x())
    assert out.scores is not None and out.scaled is not None and out.masked is not None
    assert_near(out.scaled, out.scores / math.sqrt(4))
    assert torch.isneginf(out.masked[:, 0, 1:]).all()
    assert_near(out.weights, torch.softmax(out.masked, dim=-1))


def test_dropout_keeps_rescaled_weights() -> None:
    torch.manual_seed(4)
    module = CausalAttention(6, 4, dropout=0.5)
    out = module(_x(num_tokens=12))
    assert out.dropped is not None and out.softmax is not None
    kept = out.dropped != 0
    assert_near(out.dropped[kept], out.softmax[kept] / 0.5)
    assert (~kept & (out.softmax > 0)).any(), "dropout 0.5 on 78 weights dropped none"


def test_bad_heads_and_variant() -> None:
    with pytest.raises(AttnCliError, match=r"heads must divide d_out \(got d_out=6, heads=4\)"):
        build_variant("multihead", 3, 6, num_heads=4)
    with pytest.raises(AttnCliError, match="unknown variant 'nope'"):
        build_variant("nope", 3, 3)
    with pytest.raises(AttnCliError, match="d_out must equal d_in"):
        build_variant("simple", 3, 2)
