"""Llama-family attention (Llama, Mistral, Qwen2, Qwen3) from a local checkpoint, run to one layer.

The chapter-3 multi-head attention with four changes: RMSNorm before it, RoPE on the queries
and keys, fewer key/value heads than query heads (GQA), and, for Mistral, a sliding window.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from attncli.core.attention import Attention, AttentionOutput, causal_mask
from attncli.errors import AttnCliError
from attncli.models.activations import activation
from attncli.models.family import LayerTrace
from attncli.models.llama.config import LlamaSpec
from attncli.models.llama.rope import apply_rope, rope_tables
from attncli.models.sources.named import Named
from attncli.models.unembed import need, unembedding


@dataclass
class LlamaAttentionOutput(AttentionOutput):
    """AttentionOutput plus the stages these models add; keys and values per query head."""

    queries_norm: Tensor | None = None  # (heads, T, head_dim) Qwen3's q_norm, before RoPE
    keys_norm: Tensor | None = None  # (heads, T, head_dim) Qwen3's k_norm, before RoPE
    queries_rope: Tensor | None = None  # (heads, T, head_dim) queries after RoPE
    keys_rope: Tensor | None = None  # (heads, T, head_dim) keys after RoPE, shared within a group


@dataclass
class LlamaLayer:
    """One layer's attention, what it read, and the residual stream that led there."""

    layer: int  # 0-based index of the layer shown
    inputs: Tensor  # (T, d_model) input_layernorm of the residual stream
    output: LlamaAttentionOutput  # weights (heads, T, T); context (T, d_model) after o_proj
    hidden_states: list[Tensor]  # layer + 1 tensors (T, d_model): embeddings, then each block out
    window: int | None  # this layer's sliding window, None for full causal attention


def rms_norm(x: Tensor, scale: Tensor, eps: float) -> Tensor:
    """x / RMS(x) · scale over the last dimension: LayerNorm without the mean or the shift."""
    variance = x.pow(2).mean(-1, keepdim=True)  # (..., 1)
    return scale * (x * torch.rsqrt(variance + eps))  # (..., d)


def window_mask(num_tokens: int, window: int | None) -> Tensor:
    """True where query i may not look: the future, and with a window, keys i - window or older."""
    mask = causal_mask(num_tokens)  # (T, T)
    if window is not None and window < num_tokens:  # a wider window hides nothing
        # Sliding window: query i sees keys i - window + 1 .. i, so at most `window` of them.
        mask |= torch.tril(torch.ones_like(mask), diagonal=-window)  # (T, T)
    return mask


def check_tokens(spec: LlamaSpec, token_ids: list[int]) -> None:
    """Refuse empty input and token ids outside the model's vocabulary."""
    if not token_ids:
        raise AttnCliError("no tokens to run: the text is empty")
    for position, token_id in enumerate(token_ids):
        if not 0 <= token_id < spec.vocab_size:
            raise AttnCliError(f"token id {token_id} at position {position} is outside the "
                               f"model's vocabulary (0..{spec.vocab_size - 1})")


def _linear(weights: Named, name: str, x: Tensor) -> Tensor:
    """x @ Wᵀ (+ b when the checkpoint has one): nn.Linear on weights read from disk."""
    bias = weights[f"{name}.bias"] if f"{name}.bias" in weights else None
    return F.linear(x, weights[f"{name}.weight"], bias)


def grouped_attention(weights: Named, spec: LlamaSpec, layer: int, x: Tensor,
                      cos: Tensor, sin: Tensor,
                      visible: Tensor | None = None) -> LlamaAttentionOutput:
    """Block layer's self-attention on x (T, d_model), every stage kept; visible (T, T), True
    where a query may look, narrows the causal mask (None: the layer's own mask alone)."""
    num_tokens, head_dim, name = x.shape[0], spec.head_dim, f"layers.{layer}.self_attn"
    queries = _linear(weights, f"{name}.q_proj", x)  # (T, heads · head_dim)
    keys = _linear(weights, f"{name}.k_proj", x)  # (T, kv_heads · head_dim)
    values = _linear(weights, f"{name}.v_proj", x)  # (T, kv_heads · head_dim)
    queries = queries.view(num_tokens, spec.num_heads, head_dim).transpose(0, 1)  # (h, T, hd)
    keys = keys.view(num_tokens, spec.kv_heads, head_dim).transpose(0, 1)  # (kv, T, hd)
    values = values.view(num_tokens, spec.kv_heads, head_dim).transpose(0, 1)  # (kv, T, hd)
    queries_norm = keys_norm = None
    if spec.qk_norm:
        # Qwen3: RMSNorm over each head's own head_dim keeps the logits from growing.
        queries_norm = rms_norm(queries, weights[f"{name}.q_norm.weight"], spec.rms_eps)
        keys_norm = rms_norm(keys, weights[f"{name}.k_norm.weight"], spec.rms_eps)
    queries_rope = apply_rope(queries if queries_norm is None else queries_norm, cos, sin)
    keys_rope = apply_rope(keys if keys_norm is None else keys_norm, cos, sin)  # (kv, T, hd)
    # GQA: group_size query heads share each key/value head; repeat it for each of them.
    share = spec.group_size
    keys_rope, values = keys_rope.repeat_interleave(share, 0), values.repeat_interleave(share, 0)
    raw_keys = keys.repeat_interleave(share, 0)  # (heads, T, head_dim) before RoPE
    attn_scores = queries_rope @ keys_rope.transpose(-2, -1)  # (heads, T, T)
    scaled = attn_scores / math.sqrt(head_dim)  # (heads, T, T) the √d_k of chapter 3
    mask = window_mask(num_tokens, spec.layer_windows[layer])  # (T, T)
    if visible is not None:
        mask = mask | ~visible  # (T, T) and the keys an evicted cache dropped
    masked = scaled.masked_fill(mask, -torch.inf)  # (heads, T, T)
    attn_weights = torch.softmax(masked, dim=-1)  # (heads, T, T)
    context_vec = attn_weights @ values  # (heads, T, head_dim)
    heads_context = context_vec.transpose(0, 1).reshape(num_tokens, -1)  # (T, heads · head_dim)
    return LlamaAttentionOutput(
        weights=attn_weights, context=_linear(weights, f"{name}.o_proj", heads_context),
        queries=queries, keys=raw_keys, values=values,
        scores=attn_scores, scaled=scaled, masked=masked, softmax=attn_weights,
        heads_context=heads_context, queries_norm=queries_norm,
        keys_norm=None if keys_norm is None else keys_norm.repeat_interleave(share, 0),
        queries_rope=queries_rope, keys_rope=keys_rope,
    )  # fmt: skip


def _feed_forward(weights: Named, spec: LlamaSpec, block: str, x: Tensor) -> Tensor:
    """SwiGLU: down(act(gate(x)) · up(x))."""
    act = activation(spec.hidden_act, "hidden_act")
    gate = act(_linear(weights, f"{block}.mlp.gate_proj", x))  # (T, d_ff)
    hidden = gate * _linear(weights, f"{block}.mlp.up_proj", x)  # (T, d_ff)
    return _linear(weights, f"{block}.mlp.down_proj", hidden)  # (T, d_model)


@dataclass
class _Step:
    residual: Tensor  # (T, d_model) the stream entering the block
    attn_input: Tensor  # (T, d_model) input_layernorm(residual)
    attention: LlamaAttentionOutput


def llama_steps(weights: Named, spec: LlamaSpec, token_ids: list[int],
                last_layer: int) -> Iterator[_Step]:
    """Run blocks 0..last_layer, yielding each block's attention; stop after the last one's."""
    for step, _ in _blocks(weights, spec, token_ids, last_layer, None, whole=False):
        yield step


def _blocks(weights: Named, spec: LlamaSpec, token_ids: list[int], last_layer: int,
            visible: Tensor | None, whole: bool) -> Iterator[tuple[_Step, Tensor | None]]:
    """Blocks 0..last_layer: each one's attention, and (whole) the stream leaving the block;
    without whole the last block stops after its attention."""
    check_tokens(spec, token_ids)
    x = weights.rows("embed_tokens.weight", token_ids)  # (T, d_model); no position embeddings
    cos, sin = rope_tables(spec, len(token_ids))  # each (T, rotary_dim): positions enter here
    for layer in range(last_layer + 1):
        block = f"layers.{layer}"
        attn_input = rms_norm(x, weights[f"{block}.input_layernorm.weight"], spec.rms_eps)
        attention = grouped_attention(weights, spec, layer, attn_input, cos, sin, visible)
        step = _Step(residual=x, attn_input=attn_input, attention=attention)
        if layer == last_layer and not whole:
            yield step, None
            return  # the rest of this block is not needed
        x = x + attention.context  # (T, d_model) shortcut around attention
        normed = rms_norm(x, weights[f"{block}.post_attention_layernorm.weight"], spec.rms_eps)
        x = x + _feed_forward(weights, spec, block, normed)  # (T, d_model)
        yield step, x


@torch.no_grad()
def llama_trace(weights: Named, spec: LlamaSpec, token_ids: list[int], last_layer: int,
                visible: Tensor | None = None) -> Iterator[LayerTrace]:
    """Blocks 0..last_layer whole: each one's weights, values, W_O and residual streams."""
    for layer, (step, output) in enumerate(
            _blocks(weights, spec, token_ids, last_layer, visible, whole=True)):
        attention = step.attention
        assert attention.values is not None and output is not None
        yield LayerTrace(layer=layer, residual=step.residual, weights=attention.weights,
                         values=attention.values,  # (heads, T, head_dim) repeated per group
                         out_proj=weights[f"layers.{layer}.self_attn.o_proj.weight"],
                         output=output)


@torch.no_grad()
def llama_logits(weights: Named, spec: LlamaSpec, hidden: Tensor) -> Tensor:
    """The final RMSNorm and lm_head (or the tied embedding): logits (T, vocab) of hidden."""
    need(weights, {"norm.weight": (spec.d_model,)}, "predictions")
    normed = rms_norm(hidden, weights["norm.weight"], spec.rms_eps)  # (T, d_model)
    lm_head = unembedding(weights, "embed_tokens.weight", spec.vocab_size, spec.d_model)
    return normed @ lm_head.T  # (T, vocab)


@torch.no_grad()
def llama_attention(weights: Named, spec: LlamaSpec, token_ids: list[int],
                    layer: int) -> LlamaLayer:
    """Run blocks 0..layer (negative counts from the end) and return that layer's attention."""
    index = spec.layer_index(layer)
    hidden_states = []
    for step in llama_steps(weights, spec, token_ids, last_layer=index):
        hidden_states.append(step.residual)
    return LlamaLayer(layer=index, inputs=step.attn_input, output=step.attention,
                      hidden_states=hidden_states, window=spec.layer_windows[index])


@torch.no_grad()
def llama_all_layers(weights: Named, spec: LlamaSpec, token_ids: list[int]) -> Tensor:
    """Attention weights of every query head of every layer, from one forward pass."""
    per_layer = [step.attention.weights  # (heads, T, T)
                 for step in llama_steps(weights, spec, token_ids, last_layer=spec.n_layer - 1)]
    return torch.stack(per_layer)  # (layers, heads, T, T)


def _rotated(weights: Named, spec: LlamaSpec, layer: int, x: Tensor, cos: Tensor,
             sin: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Queries (heads, T, hd), keys and values (kv_heads, T, hd) of block layer, after RoPE."""
    num_tokens, name = x.shape[0], f"layers.{layer}.self_attn"
    shape = (num_tokens, -1, spec.head_dim)
    queries = _linear(weights, f"{name}.q_proj", x).view(shape).transpose(0, 1)  # (h, T, hd)
    keys = _linear(weights, f"{name}.k_proj", x).view(shape).transpose(0, 1)  # (kv, T, hd)
    values = _linear(weights, f"{name}.v_proj", x).view(shape).transpose(0, 1)  # (kv, T, hd)
    if spec.qk_norm:
        queries = rms_norm(queries, weights[f"{name}.q_norm.weight"], spec.rms_eps)
        keys = rms_norm(keys, weights[f"{name}.k_norm.weight"], spec.rms_eps)
    return apply_rope(queries, cos, sin), apply_rope(keys, cos, sin), values


def llama_layer_input(weights: Named, spec: LlamaSpec, token_ids: list[int],
                      layer: int) -> tuple[Tensor, Tensor, Tensor]:
    """Layer's input (T, d_model) and RoPE tables, earlier blocks run without their weights.

    For long inputs: PyTorch's fused attention never builds the (T, T) weights it does not
    need to keep.
    """
    # Only the last is kept: each earlier input goes once the next block has read it.
    return deque(llama_layer_inputs(weights, spec, token_ids, layer), maxlen=1)[0]


@torch.no_grad()
def llama_layer_inputs(weights: Named, spec: LlamaSpec, token_ids: list[int],
                       layer: int) -> Iterator[tuple[Tensor, Tensor, Tensor]]:
    """Layers 0..layer's inputs (T, d_model) and the RoPE tables: blocks without weights."""
    check_tokens(spec, token_ids)
    x = weights.rows("embed_tokens.weight", token_ids)  # (T, d_model)
    cos, sin = rope_tables(spec, len(token_ids))  # each (T, rotary_dim)
    for index in range(layer):
        block = f"layers.{index}"
        attn_input = rms_norm(x, weights[f"{block}.input_layernorm.weight"], spec.rms_eps)
        queries, keys, values = _rotated(weights, spec, index, attn_input, cos, sin)
        group = spec.group_size
        window = spec.layer_windows[index]
        mask = None if window is None else ~window_mask(len(token_ids), window)  # True: seen
        # A batch of one: with 3-D inputs CPU PyTorch takes its math path, which builds the
        # (heads, T, T) weights (5.5 GB at 8,000 tokens); 4-D ones take the flash kernel.
        heads_context = F.scaled_dot_product_attention(
            queries[None], keys.repeat_interleave(group, 0)[None],
            values.repeat_interleave(group, 0)[None],
            attn_mask=mask, is_causal=mask is None)[0]  # (heads, T, head_dim)
        heads_context = heads_context.transpose(0, 1).reshape(len(token_ids), -1)  # (T, h·hd)
        x = x + _linear(weights, f"{block}.self_attn.o_proj", heads_context)  # (T, d_model)
        normed = rms_norm(x, weights[f"{block}.post_attention_layernorm.weight"], spec.rms_eps)
        x = x + _feed_forward(weights, spec, block, normed)  # (T, d_model)
        yield attn_input, cos, sin
    yield rms_norm(x, weights[f"layers.{layer}.input_layernorm.weight"], spec.rms_eps), cos, sin


class RotaryProjection(Attention):
    """One Llama layer as the tiled path takes a module: its heads' q, k, v, and o_proj.

    Its queries and keys come out already rotated, and the keys and values of each kv head
    repeated for every query head of its group, so the kernel runs plain multi-head attention.
    """

    def __init__(self, weights: Named, spec: LlamaSpec, layer: int, cos: Tensor,
                 sin: Tensor) -> None:
        super().__init__()
        self.weights, self.spec, self.layer, self.cos, self.sin = weights, spec, layer, cos, sin
        self.num_heads, self.head_dim = spec.num_heads, spec.head_dim
        self.d_out = spec.d_model

    def project(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """RoPE'd queries and keys, and values, each (T, heads · head_dim)."""
        queries, keys, values = _rotated(self.weights, self.spec, self.layer, x, self.cos,
                                         self.sin)
        group = self.spec.group_size
        keys, values = keys.repeat_interleave(group, 0), values.repeat_interleave(group, 0)
        return tuple(t.transpose(0, 1).reshape(x.shape[0], -1)  # type: ignore[return-value]
                     for t in (queries, keys, values))

    def split_heads(self, t: Tensor) -> Tensor:
        """(T, heads · head_dim) → (heads, T, head_dim)."""
        return t.view(t.shape[0], self.num_heads, self.head_dim).transpose(0, 1)

    def out_proj(self, heads_context: Tensor) -> Tensor:
        """o_proj: (T, heads · head_dim) → (T, d_model)."""
        return _linear(self.weights, f"layers.{self.layer}.self_attn.o_proj", heads_context)

    def heads_qkv(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        queries, keys, values = self.project(x)  # each (T, heads · head_dim)
        return self.split_heads(queries), self.split_heads(keys), self.split_heads(values)

    def combine(self, heads_context: Tensor) -> Tensor:
        num_tokens = heads_context.shape[1]
        concat = heads_context.transpose(0, 1).reshape(num_tokens, -1)  # (T, heads · head_dim)
        return self.out_proj(concat)  # (T, d_model)
