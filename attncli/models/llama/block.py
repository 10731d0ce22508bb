"""The Llama block's parts every family on it shares: its norms, its MLP and its shortcuts.

Each family declares in its spec which of them it has (Gemma's four norms, OLMo 2's norms
after attention and MLP only, GPT-NeoX's LayerNorm and parallel MLP); the code asks the spec.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from attncli.models.activations import activation
from attncli.models.llama.config import LlamaSpec
from attncli.models.sources.mapped import Mapped
from attncli.models.sources.named import Named


def rms_norm(x: Tensor, scale: Tensor, eps: float) -> Tensor:
    """x / RMS(x) · scale over the last dimension: LayerNorm without the mean or the shift."""
    if x.dtype == scale.dtype == torch.float32:  # the same formula, one torch call
        return F.rms_norm(x, scale.shape, scale, eps)  # (..., d)
    variance = x.pow(2).mean(-1, keepdim=True)  # (..., 1)
    return scale * (x * torch.rsqrt(variance + eps))  # (..., d)


def block_norm(weights: Named, spec: LlamaSpec, name: str, x: Tensor) -> Tensor:
    """The family's norm named name on x (..., d): RMSNorm (Gemma's by 1 + w), or LayerNorm."""
    scale = weights[f"{name}.weight"]  # (d,)
    if spec.layer_norm:  # GPT-NeoX: mean removed, then scale and shift
        bias = weights[f"{name}.bias"] if f"{name}.bias" in weights else None
        return F.layer_norm(x, scale.shape, scale, bias, spec.rms_eps)  # (..., d)
    return rms_norm(x, scale + spec.norm_offset if spec.norm_offset else scale, spec.rms_eps)


def linear(weights: Named, name: str, x: Tensor) -> Tensor:
    """x @ Wᵀ (+ b when the checkpoint has one): nn.Linear on weights read from disk, or on
    the file's quantized blocks where the source computes on them (a GGUF on the CPU)."""
    bias = weights[f"{name}.bias"] if f"{name}.bias" in weights else None
    quantized = weights.quantized(f"{name}.weight")
    if quantized is not None:
        return quantized.linear(x, bias)  # (..., d_out)
    return F.linear(x, weights[f"{name}.weight"], bias)


def linears(weights: Named, names: list[str], x: Tensor) -> list[Tensor]:
    """x through each named linear. Where one stored tensor holds them all (Phi-3's qkv_proj and
    gate_up_proj, NeoX's query_key_value), one product with it, cut into each one's columns:
    the same dot products, without copying the pieces out of the weight."""
    mapped = weights if isinstance(weights, Mapped) else None
    fused = None if mapped is None else mapped.fused([f"{n}.weight" for n in names])
    biases = [f"{n}.bias" in weights for n in names]
    if mapped is None or fused is None or (any(biases) and not all(biases)):
        stack = None if any(biases) else weights.stacked([f"{n}.weight" for n in names])
        if stack is None:
            return [linear(weights, n, x) for n in names]
        y = stack.linear(x)  # (T, Σ rows): held matrices stacked, one product
        return list(y.split([weights.shape(f"{n}.weight")[0] for n in names], dim=-1))
    whole, pieces = fused
    bias = None
    if all(biases):
        bias_fused = mapped.fused([f"{n}.bias" for n in names])
        if bias_fused is None:
            return [linear(weights, n, x) for n in names]
        bias = weights[bias_fused[0]]  # (rows,)
    quantized = weights.quantized(whole)
    y = F.linear(x, weights[whole], bias) if quantized is None \
        else quantized.linear(x, bias)  # (T, rows) every piece's features
    return [piece.columns(y) for piece in pieces]  # each (T, its rows)


def feed_forward(weights: Named, spec: LlamaSpec, block: str, x: Tensor) -> Tensor:
    """SwiGLU down(act(gate(x)) · up(x)), or down(act(up(x))) where the MLP has no gate."""
    act = activation(spec.hidden_act, "hidden_act")
    if spec.gated_mlp:
        gate, up = linears(weights, [f"{block}.mlp.gate_proj", f"{block}.mlp.up_proj"], x)
        hidden = act(gate) * up  # (T, d_ff)
    else:
        hidden = act(linear(weights, f"{block}.mlp.up_proj", x))  # (T, d_ff)
    return linear(weights, f"{block}.mlp.down_proj", hidden)  # (T, d_model)


def attention_input(weights: Named, spec: LlamaSpec, layer: int, x: Tensor) -> Tensor:
    """What block layer's attention reads: input_layernorm(x), or x itself (OLMo 2)."""
    if not spec.pre_attn_norm:
        return x
    return block_norm(weights, spec, f"layers.{layer}.input_layernorm", x)  # (T, d_model)


def finish_block(weights: Named, spec: LlamaSpec, layer: int, x: Tensor,
                 attn_out: Tensor) -> Tensor:
    """The rest of block layer after attention wrote attn_out (T, d_model) for input x:
    the family's norms, the MLP and both shortcuts. Returns the stream leaving the block."""
    block = f"layers.{layer}"
    if spec.post_attn_norm:  # Gemma, OLMo 2
        attn_out = block_norm(weights, spec, f"{block}.attn_output_norm", attn_out)
    if spec.parallel:  # GPT-NeoX: the MLP reads the block's input, not attention's output
        normed = block_norm(weights, spec, f"{block}.post_attention_layernorm", x)
        return feed_forward(weights, spec, block, normed) + attn_out + x  # (T, d_model)
    x = x + attn_out  # (T, d_model) shortcut around attention
    normed = block_norm(weights, spec, f"{block}.post_attention_layernorm", x) \
        if spec.pre_mlp_norm else x  # (T, d_model)
    mlp_out = feed_forward(weights, spec, block, normed)  # (T, d_model)
    if spec.post_mlp_norm:
        mlp_out = block_norm(weights, spec, f"{block}.mlp_output_norm", mlp_out)
    return x + mlp_out  # (T, d_model)


def embed(weights: Named, spec: LlamaSpec, token_ids: list[int]) -> Tensor:
    """The token embeddings (T, d_model), times √d_model in Gemma; no position embeddings."""
    x = weights.rows("embed_tokens.weight", token_ids)  # (T, d_model)
    return x if spec.embed_scale == 1.0 else x * spec.embed_scale  # (T, d_model)
