"""Real GPT-2 attention from a local checkpoint: the chapter-4 blocks, run up to one layer."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

import torch
import torch.nn.functional as F
from torch import Tensor

from attncli.core.attention import AttentionOutput, MultiHeadAttention
from attncli.errors import AttnCliError
from attncli.models.activations import activation
from attncli.models.family import Known, LayerTrace
from attncli.models.gpt2.config import Checkpoint
from attncli.models.sources.named import Named
from attncli.models.unembed import Head, Table, need, unembed, unembedding


class Tensors(Protocol):
    """Anything that looks tensors up by name: an open checkpoint, or tensors read once."""

    def __getitem__(self, name: str) -> Tensor: ...


@dataclass
class GPT2Layer:
    """One layer's attention, what it read, and the residual stream that led there."""

    layer: int  # 0-based index of the layer shown
    inputs: Tensor  # (T, d_model) ln_1 of the residual stream: what this attention reads
    output: AttentionOutput  # weights (heads, T, T); context (T, d_model) after c_proj
    hidden_states: list[Tensor]  # (T, d_model) each: the streams entering the blocks run


@dataclass
class _Step:
    layer: int
    residual: Tensor  # (T, d_model) the stream entering the block
    attn_input: Tensor  # (T, d_model) ln_1(residual)
    attention: AttentionOutput


def weights_of(ckpt: Checkpoint) -> Named:
    """The checkpoint's tensors, by their unprefixed names."""
    assert ckpt.weights is not None, "a checkpoint from gpt2_checkpoint"
    return ckpt.weights


def check_tokens(ckpt: Checkpoint, token_ids: list[int]) -> None:
    """Refuse empty input, input longer than the model's context, and unknown token ids."""
    if not token_ids:
        raise AttnCliError("no tokens to run: the text is empty")
    if len(token_ids) > ckpt.n_positions:
        raise AttnCliError(f"{len(token_ids)} tokens is more than this model's context of "
                           f"{ckpt.n_positions} positions (n_positions); shorten the text")
    for position, token_id in enumerate(token_ids):
        if not 0 <= token_id < ckpt.vocab_size:
            raise AttnCliError(f"token id {token_id} at position {position} is outside the "
                               f"model's vocabulary (0..{ckpt.vocab_size - 1})")


@torch.no_grad()
def gpt2_attention(ckpt: Checkpoint, token_ids: list[int], layer: int,
                   known: Known | None = None) -> GPT2Layer:
    """Run blocks 0..layer (negative counts from the end; known.first.. given known streams)
    and return that layer's attention."""
    index = ckpt.layer_index(layer)
    check_tokens(ckpt, token_ids)
    hidden_states: list[Tensor] = []
    for step in _steps(weights_of(ckpt), ckpt, token_ids, last_layer=index, known=known):
        hidden_states.append(step.residual)
    return GPT2Layer(layer=index, inputs=step.attn_input, output=step.attention,
                     hidden_states=hidden_states)


@torch.no_grad()
def gpt2_all_layers(ckpt: Checkpoint, token_ids: list[int]) -> Tensor:
    """Attention weights of every head of every layer, from one forward pass."""
    check_tokens(ckpt, token_ids)
    weights = weights_of(ckpt)
    per_layer = [step.attention.weights  # (heads, T, T)
                 for step in _steps(weights, ckpt, token_ids, last_layer=ckpt.n_layer - 1)]
    return torch.stack(per_layer)  # (layers, heads, T, T)


def load_attention(weights: Tensors, ckpt: Checkpoint, layer: int) -> MultiHeadAttention:
    """Block layer's c_attn and c_proj copied into the chapter-3 MultiHeadAttention."""
    d = ckpt.n_embd
    # Conv1D stores weights input-major, y = x @ W + b; nn.Linear wants W transposed.
    qkv_w = weights[f"h.{layer}.attn.c_attn.weight"]  # (d, 3d): query, key, value side by side
    qkv_b = weights[f"h.{layer}.attn.c_attn.bias"]  # (3d,)
    q_w, k_w, v_w = qkv_w.split(d, dim=1)  # each (d, d)
    q_b, k_b, v_b = qkv_b.split(d)  # each (d,)
    state = {
        "W_query.weight": q_w.T, "W_query.bias": q_b,
        "W_key.weight": k_w.T, "W_key.bias": k_b,
        "W_value.weight": v_w.T, "W_value.bias": v_b,
        "out_proj.weight": weights[f"h.{layer}.attn.c_proj.weight"].T,  # (d, d)
        "out_proj.bias": weights[f"h.{layer}.attn.c_proj.bias"],  # (d,)
    }  # fmt: skip
    with torch.device("meta"):  # no random init: every parameter is replaced just below
        attn = MultiHeadAttention(d_in=d, d_out=d, num_heads=ckpt.n_head, qkv_bias=True)
    attn.load_state_dict(state, assign=True)
    attn.score_scale = score_scale(ckpt, layer)
    return attn.eval()


def score_scale(ckpt: Checkpoint, layer: int) -> float | None:
    """The factor on Q·Kᵀ when the config changes it, else None (the usual 1/√head_dim)."""
    if ckpt.scale_attn_weights and not ckpt.scale_attn_by_inverse_layer_idx:
        return None
    scale = ckpt.head_dim**-0.5 if ckpt.scale_attn_weights else 1.0
    # scale_attn_by_inverse_layer_idx (Mistral's GPT-2 runs) also divides by layer + 1.
    return scale / (layer + 1) if ckpt.scale_attn_by_inverse_layer_idx else scale


def layer_norm(weights: Tensors, name: str, x: Tensor, eps: float) -> Tensor:
    """GPT-2's LayerNorm name (its .weight and .bias) over the last axis of x."""
    scale, shift = weights[f"{name}.weight"], weights[f"{name}.bias"]  # each (d,)
    return F.layer_norm(x, x.shape[-1:], scale, shift, eps)  # (T, d)


def feed_forward(weights: Tensors, ckpt: Checkpoint, block: str, x: Tensor) -> Tensor:
    """The block's MLP: c_fc, the checkpoint's activation, c_proj."""
    hidden = x @ weights[f"{block}.mlp.c_fc.weight"] + weights[f"{block}.mlp.c_fc.bias"]  # (T, f)
    hidden = activation(ckpt.activation_function)(hidden)  # (T, f) GPT-2's own: the tanh GELU
    return hidden @ weights[f"{block}.mlp.c_proj.weight"] + weights[f"{block}.mlp.c_proj.bias"]


def _steps(weights: Named, ckpt: Checkpoint, token_ids: list[int],
           last_layer: int, known: Known | None = None) -> Iterator[_Step]:
    """Run blocks 0..last_layer, yielding each block's attention; stop after the last one's."""
    for step, _ in _blocks(weights, ckpt, token_ids, last_layer, None, whole=False, known=known):
        yield step


@torch.no_grad()
def gpt2_trace(ckpt: Checkpoint, token_ids: list[int], last_layer: int,
               visible: Tensor | None = None,
               known: Known | None = None) -> Iterator[LayerTrace]:
    """Blocks 0..last_layer whole: each one's weights, values, W_O and residual streams."""
    check_tokens(ckpt, token_ids)
    weights = weights_of(ckpt)
    for step, output in _blocks(weights, ckpt, token_ids, last_layer, visible, whole=True,
                                known=known):
        attention, layer = step.attention, step.layer
        assert attention.values is not None and output is not None
        # Conv1D's c_proj is (heads · head_dim, d_model); W_O as nn.Linear holds it transposed.
        out_proj = weights[f"h.{layer}.attn.c_proj.weight"].T  # (d_model, heads · head_dim)
        yield LayerTrace(layer=layer, residual=step.residual, weights=attention.weights,
                         values=attention.values, out_proj=out_proj, output=output)


@torch.no_grad()
def gpt2_trace_texts(ckpt: Checkpoint, texts: list[list[int]],
                     last_layer: int) -> Iterator[list[LayerTrace]]:
    """Blocks 0..last_layer whole for several texts together, layer by layer: each block's
    tensors read and its attention built once for all of them, each text's own pass
    otherwise (its own positions, mask and shapes), so its traces are gpt2_trace's."""
    plain = weights_of(ckpt)
    xs = []
    for token_ids in texts:
        check_tokens(ckpt, token_ids)
        xs.append(_embedded(plain, token_ids))  # (T, d) each
    for layer in range(last_layer + 1):
        read = plain.reading_once()  # block layer's tensors, read once, dropped after it
        module = load_attention(read, ckpt, layer)
        out_proj = read[f"h.{layer}.attn.c_proj.weight"].T  # (d_model, heads · head_dim)
        traces = []
        for k, x in enumerate(xs):
            attention = module(layer_norm(read, f"h.{layer}.ln_1", x, ckpt.layer_norm_epsilon))
            xs[k] = _finished(read, ckpt, layer, x, attention.context)  # (T, d)
            assert attention.values is not None
            traces.append(LayerTrace(layer=layer, residual=x, weights=attention.weights,
                                     values=attention.values, out_proj=out_proj, output=xs[k]))
        yield traces


def _embedded(weights: Named, token_ids: list[int]) -> Tensor:
    """The stream entering block 0: token plus position embeddings, (T, d)."""
    tok_embeds = weights.rows("wte.weight", token_ids)  # (T, d)
    pos_embeds = weights.rows("wpe.weight", range(len(token_ids)))  # (T, d)
    return tok_embeds + pos_embeds  # (T, d)


def _finished(weights: Tensors, ckpt: Checkpoint, layer: int, x: Tensor,
              context: Tensor) -> Tensor:
    """The stream leaving block layer: the shortcut around attention, then the MLP's."""
    x = x + context  # (T, d) shortcut around attention
    eps, block = ckpt.layer_norm_epsilon, f"h.{layer}"
    return x + feed_forward(weights, ckpt, block, layer_norm(weights, f"{block}.ln_2", x, eps))


@torch.no_grad()
def gpt2_unembedding(ckpt: Checkpoint, weights: Named) -> Callable[[range], Table]:
    """Rows of the unembedding (wte, tied), its shape checked."""
    return unembedding(weights, "wte.weight", ckpt.vocab_size, ckpt.n_embd)


def gpt2_logits(ckpt: Checkpoint, hidden: Tensor, weights: Named | None = None,
                table: Table | None = None) -> Tensor:
    """ln_f and the unembedding (GPT-2 ties it to wte): logits (T, vocab) of hidden; weights:
    a view reading each tensor once (a decoder's), else the checkpoint's; table: the whole
    unembedding, held (held_unembedding)."""
    weights, d = weights or weights_of(ckpt), ckpt.n_embd
    need(weights, {"ln_f.weight": (d,), "ln_f.bias": (d,)}, "predictions")
    normed = layer_norm(weights, "ln_f", hidden, ckpt.layer_norm_epsilon)  # (T, d_model)
    lm_head = gpt2_unembedding(ckpt, weights) if table is None else table
    return unembed(normed, lm_head, ckpt.vocab_size)  # (T, vocab)


def gpt2_head(ckpt: Checkpoint, table: Table) -> Head:
    """gpt2_logits in parts (ln_f, the held table), for reading logits a tile at a time."""
    weights, d, eps = weights_of(ckpt), ckpt.n_embd, ckpt.layer_norm_epsilon
    need(weights, {"ln_f.weight": (d,), "ln_f.bias": (d,)}, "predictions")
    return Head(lambda hidden: layer_norm(weights, "ln_f", hidden, eps), table)


def _blocks(weights: Named, ckpt: Checkpoint, token_ids: list[int], last_layer: int,
            visible: Tensor | None, whole: bool,
            known: Known | None = None) -> Iterator[tuple[_Step, Tensor | None]]:
    """Blocks 0..last_layer: each one's attention, and (whole) the stream leaving the block;
    without whole the last block stops after its attention. visible (T, T), True where a
    query may look, narrows the causal mask. Known streams start the pass at known.first and
    stand for the blocks' outputs they cover (their MLPs are not run)."""
    eps = ckpt.layer_norm_epsilon
    # (T, d) the stream entering block 0, or block known.first
    x = _embedded(weights, token_ids) if known is None else known.stream
    for layer in range(0 if known is None else known.first, last_layer + 1):
        block = f"h.{layer}"
        attn_input = layer_norm(weights, f"{block}.ln_1", x, eps)  # (T, d)
        module = load_attention(weights, ckpt, layer)
        module.hidden = None if visible is None else ~visible  # (T, T) keys evicted
        attention = module(attn_input)
        step = _Step(layer=layer, residual=x, attn_input=attn_input, attention=attention)
        if layer == last_layer and not whole:
            yield step, None
            return  # the rest of this block is not needed
        after = None if known is None else known.after(layer)
        if after is None:  # no stream known past this block: its MLP is run
            after = _finished(weights, ckpt, layer, x, attention.context)  # (T, d)
        x = after
        yield step, x


def gpt2_edited(ckpt: Checkpoint, token_ids: list[int], first: int, stream: Tensor,
                edit: Callable[[int, Tensor], Tensor],
                enter: Callable[[int, Tensor], Tensor] | None = None,
                prefix: list[Tensor] | None = None, last: int | None = None) -> Tensor:
    """Blocks first..last (None: n_layer-1) from stream (B, S, d), B variants of the text's last S
    positions (enter(layer, x): x with the variants joining at block layer added; where
    S < T, prefix[layer] (T, d) the clean stream whose earlier positions they attend to),
    each block's z (B, heads, S, hd) passed through edit before c_proj; the streams leaving
    the last block (gradients where the caller asks). Attention runs variant by variant (once
    for variants entering as one stream, expanded: stride 0), the MLP on all."""
    weights, x = weights_of(ckpt), stream  # x: (B, S, d)
    start = len(token_ids) - x.shape[1]
    for layer in range(first, ckpt.n_layer if last is None else last + 1):
        x = x if enter is None else enter(layer, x)  # (B, S, d)
        shared = x.shape[0] > 1 and x.stride(0) == 0
        whole = x[:1] if shared else x  # (b, S, d)
        if start:
            assert prefix is not None
            whole = torch.cat([prefix[layer][:start].expand(whole.shape[0], -1, -1), whole],
                              dim=1)  # (b, T, d)
        attn_input = layer_norm(weights, f"h.{layer}.ln_1", whole,
                                ckpt.layer_norm_epsilon)  # (b, T, d)
        module = load_attention(weights, ckpt, layer)
        outputs = [module(one) for one in attn_input] * (x.shape[0] if shared else 1)
        z = torch.stack([module.split_heads(out.heads_context)[:, start:]
                         for out in outputs])  # (B, heads, S, hd)
        edited = edit(layer, z)  # (B, heads, S, hd)
        context = torch.stack([out.context[start:] for out in outputs] if edited is z
                              else [module.combine(e) for e in edited])  # (B, S, d)
        x = _finished(weights, ckpt, layer, x, context)  # (B, S, d)
    return x
