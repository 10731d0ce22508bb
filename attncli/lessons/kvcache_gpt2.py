"""A GPT-2 checkpoint decoded token by token, every layer with its own key/value cache; and
`kvcache --model`, which sends a Llama-family folder to kvcache_llama."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from attncli.core.attention import MultiHeadAttention
from attncli.core.request import Request
from attncli.core.result import TokenInfo
from attncli.errors import AttnCliError
from attncli.lessons.budget import check_model_kvcache
from attncli.lessons.kvcache import Decoded, KVCacheResult, Shape, assemble, prefill_macs
from attncli.lessons.setup import text_tokens
from attncli.models.checkpoint import Checkpoint, Weights, open_weights
from attncli.models.gpt2 import (
    check_tokens,
    feed_forward,
    gpt2_attention,
    layer_norm,
    load_attention,
)


@dataclass
class _Block:
    """One block's attention module and its two caches, (heads, t, head_dim) each."""

    name: str
    attn: MultiHeadAttention
    k_cache: Tensor
    v_cache: Tensor


def gpt2_shape(ckpt: Checkpoint) -> Shape:
    """Per layer and token: c_attn (3·d²), c_proj (d²) and the MLP (2·d·n_inner)."""
    d = ckpt.n_embd
    return Shape(layers=ckpt.n_layer, d_in=d, d_out=d, token_macs=4 * d * d + 2 * d * ckpt.n_inner)


def _attend(block: _Block, x: Tensor, head_dim: int) -> tuple[Tensor, Tensor]:
    """One new token (1, d) against its block's cache: weights (heads, t+1), output (1, d)."""
    attn = block.attn
    queries, keys, values = (attn.split_heads(t) for t in attn.project(x))  # (heads, 1, hd)
    block.k_cache = torch.cat([block.k_cache, keys], dim=1)  # (heads, t+1, head_dim)
    block.v_cache = torch.cat([block.v_cache, values], dim=1)  # (heads, t+1, head_dim)
    scores = queries @ block.k_cache.transpose(1, 2) / math.sqrt(head_dim)  # (heads, 1, t+1)
    attn_weights = torch.softmax(scores, dim=-1)  # (heads, 1, t+1)
    heads_context = (attn_weights @ block.v_cache).transpose(0, 1).reshape(1, -1)  # (1, d)
    return attn_weights[:, 0], attn.out_proj(heads_context)  # (heads, t+1), (1, d)


@torch.no_grad()
def decode_gpt2(ckpt: Checkpoint, weights: Weights, token_ids: list[int], layer: int) -> Decoded:
    """Every block for one token at a time; the shown layer's weights and attention output."""
    out = Decoded()
    eps, heads, head_dim = ckpt.layer_norm_epsilon, ckpt.n_head, ckpt.head_dim
    blocks = [_Block(f"h.{i}", load_attention(weights, ckpt, i),
                     torch.empty(heads, 0, head_dim), torch.empty(heads, 0, head_dim))
              for i in range(ckpt.n_layer)]
    # The weights are read once; each lookup would read the file again.
    table = {name: weights[name] for b in blocks for name in _norm_and_mlp(b.name)}
    cached = _Cached(table)
    for t, token_id in enumerate(token_ids):
        x = weights.rows("wte.weight", [token_id]) + weights.rows("wpe.weight", [t])  # (1, d)
        for i, block in enumerate(blocks):
            attn_weights, attn_out = _attend(block, layer_norm(cached, f"{block.name}.ln_1", x,
                                                                eps), head_dim)
            if i == layer:
                out.weights.append(attn_weights)  # (heads, t+1)
                out.context.append(attn_out[0])  # (d,)
            x = x + attn_out  # (1, d)
            x = x + feed_forward(cached, ckpt, block.name, layer_norm(cached, f"{block.name}.ln_2",
                                                                  x, eps))  # (1, d)
        out.cache_bytes.append(sum(b.k_cache.nbytes + b.v_cache.nbytes for b in blocks))
    return out


def _norm_and_mlp(block: str) -> list[str]:
    return [f"{block}.{part}" for part in ("ln_1.weight", "ln_1.bias", "ln_2.weight", "ln_2.bias",
                                           "mlp.c_fc.weight", "mlp.c_fc.bias",
                                           "mlp.c_proj.weight", "mlp.c_proj.bias")]


class _Cached:
    """Tensors read once, looked up by name like Weights."""

    def __init__(self, table: dict[str, Tensor]) -> None:
        self._table = table

    def __getitem__(self, name: str) -> Tensor:
        return self._table[name]


def kvcache_gpt2(ckpt: Checkpoint, tokens: list[TokenInfo], token_ids: list[int], layer: int,
                 config: dict[str, Any]) -> KVCacheResult:
    """Decode the checkpoint step by step; check each step against the full pass of that layer."""
    index = ckpt.layer_index(layer)
    check_tokens(ckpt, token_ids)
    shape = gpt2_shape(ckpt)
    num_tokens = len(token_ids)
    check_model_kvcache(num_tokens, ckpt.n_head, ckpt.n_layer, shape.token_macs,
                        prefill_macs(shape, num_tokens),
                        2 * ckpt.n_layer * num_tokens * ckpt.n_embd * 4, config["model"])
    with open_weights(ckpt) as weights:
        decoded = decode_gpt2(ckpt, weights, token_ids, index)
    full = gpt2_attention(ckpt, token_ids, index)
    return assemble({**config, "layer": index}, tokens, shape, decoded,
                    (full.output.weights, full.output.context))


def kvcache_model(req: Request) -> KVCacheResult:
    """`attncli kvcache --model`: the request (checked like run's) names a checkpoint."""
    from attncli.models.checkpoint import resolve_checkpoint
    from attncli.models.llama_config import is_llama_family

    if req.model is None or req.text is None:
        raise AttnCliError("kvcache --model runs a checkpoint on text")
    if is_llama_family(req.model):
        return _kvcache_llama_model(req)
    ckpt = resolve_checkpoint(req.model, req.heads)  # --heads overrides an inferred head count
    tokens, ids = text_tokens(req, req.text)
    config = {"model": req.model, "heads": ckpt.n_head, "d_out": ckpt.n_embd}
    return kvcache_gpt2(ckpt, tokens, ids, req.layer or 0, config)


def _kvcache_llama_model(req: Request) -> KVCacheResult:
    """A Llama-family folder, read with its own tokenizer."""
    from attncli.lessons.kvcache_llama import kvcache_llama
    from attncli.models.llama_checkpoint import resolve_llama
    from attncli.models.llama_run import llama_tokens

    ckpt = resolve_llama(req.model or "")
    tokens, ids, _ = llama_tokens(ckpt, req)
    spec = ckpt.spec
    config = {"model": req.model, "heads": spec.num_heads, "kv_heads": spec.kv_heads,
              "d_out": spec.d_model}
    return kvcache_llama(ckpt, tokens, ids, req.layer or 0, config)
