"""GPT-NeoX / Pythia's GGUF architecture (gptneox): its metadata keys, tensor names and stored
layout, and what llama.cpp fixes for it.

- HF's query_key_value holds each head's [q; k; v] rows in turn; the converter
  (GPTNeoXModel.modify_tensors) regroups them as [all q; all k; all v], and reading regroups
  back (Layout.neox_qkv).
- rope base 10000 where the file has no rope.freq_base (its converter writes none).
"""

from __future__ import annotations

from typing import Any

from attncli.models.sources.gguf.config import refuse, rotary
from attncli.models.sources.gguf.header import GgufHeader
from attncli.models.sources.gguf.names import Layout
from attncli.models.sources.gguf.recipe import GgufRecipe

# `gptneox.` metadata key suffix -> config.json key
_KEYS = {"block_count": "num_hidden_layers", "embedding_length": "hidden_size",
         "feed_forward_length": "intermediate_size",
         "attention.head_count": "num_attention_heads",
         "attention.layer_norm_epsilon": "layer_norm_eps", "rope.freq_base": "rotary_emb_base",
         "context_length": "max_position_embeddings"}
_LAYER = {
    f"{hf}.{part}": f"{gg}.{part}"
    for hf, gg in (("input_layernorm", "attn_norm"), ("post_attention_layernorm", "ffn_norm"),
                   ("attention.query_key_value", "attn_qkv"), ("attention.dense", "attn_output"),
                   ("mlp.dense_h_to_4h", "ffn_up"), ("mlp.dense_4h_to_h", "ffn_down"))
    for part in ("weight", "bias")}
_TOP = {"gpt_neox.embed_in.weight": "token_embd.weight",
        "gpt_neox.final_layer_norm.weight": "output_norm.weight",
        "gpt_neox.final_layer_norm.bias": "output_norm.bias",
        "embed_out.weight": "output.weight"}


def _fill(config: dict[str, Any], header: GgufHeader) -> None:
    """Pythia / GPT-NeoX: partial rotary, parallel residual, biases everywhere."""
    if "gptneox.use_parallel_residual" not in header.metadata:
        raise refuse(header, "lacks use_parallel_residual (its converter always writes it)")
    config["use_parallel_residual"] = bool(header.metadata["gptneox.use_parallel_residual"])
    config["head_dim"] = config["hidden_size"] // config["num_attention_heads"]
    config["rotary_pct"] = rotary(config, header)
    del config["head_dim"]  # GPT-NeoX's config.json has no head_dim
    config.setdefault("rotary_emb_base", 10000)
    config["hidden_act"] = "gelu"
    config["attention_bias"] = "blk.0.attn_qkv.bias" in header.tensors


NEOX = GgufRecipe("gpt_neox", "GPTNeoXForCausalLM", _KEYS,
                  Layout("gpt_neox.layers.{i}.", _TOP, _LAYER, frozenset(), permuted=False,
                         neox_qkv=True), _fill)
