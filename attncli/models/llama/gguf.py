"""The Llama family's GGUF architectures (llama, qwen2, qwen3): their metadata keys, tensor
names and stored layout, and the names and keys the other Llama-block families build on.

- llama: llama.cpp's converter permutes the rows of attn_q and attn_k into its rotary layout
  (convert_hf_to_gguf.py LlamaModel.permute); reading undoes it (Layout.permuted).
- qwen2, qwen3: written as HF stores them (llama.cpp rotates them NeoX-style).
"""

from __future__ import annotations

from typing import Any

from attncli.models.sources.gguf.header import GgufHeader
from attncli.models.sources.gguf.names import Layout
from attncli.models.sources.gguf.recipe import GgufRecipe

# `{arch}.` metadata key suffix -> config.json key
LLAMA_KEYS = {"block_count": "num_hidden_layers", "embedding_length": "hidden_size",
              "feed_forward_length": "intermediate_size",
              "attention.head_count": "num_attention_heads",
              "attention.head_count_kv": "num_key_value_heads",
              "attention.layer_norm_rms_epsilon": "rms_norm_eps", "rope.freq_base": "rope_theta",
              "context_length": "max_position_embeddings"}
LAYERS = "model.layers.{i}."  # HF prefix of layer i
LLAMA_TOP = {"model.embed_tokens.weight": "token_embd.weight",
             "model.norm.weight": "output_norm.weight", "lm_head.weight": "output.weight"}
LLAMA_LAYER = {
    **{f"self_attn.{hf}_proj.{part}": f"attn_{gg}.{part}"
       for hf, gg in (("q", "q"), ("k", "k"), ("v", "v"), ("o", "output"))
       for part in ("weight", "bias")},
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
    "input_layernorm.weight": "attn_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}


def llama_fill(config: dict[str, Any], header: GgufHeader) -> None:
    """What a Llama-family config.json holds that its GGUF metadata does not."""
    config.setdefault("num_key_value_heads", config["num_attention_heads"])
    config.setdefault("head_dim", config["hidden_size"] // config["num_attention_heads"])
    config["hidden_act"] = "silu"
    config["attention_bias"] = "blk.0.attn_q.bias" in header.tensors


def _layout(permuted: bool) -> Layout:
    return Layout(LAYERS, LLAMA_TOP, LLAMA_LAYER, frozenset(), permuted=permuted)


LLAMA = GgufRecipe("llama", "LlamaForCausalLM", LLAMA_KEYS | {"rope.dimension_count": "head_dim"},
                   _layout(permuted=True), llama_fill)
QWEN2 = GgufRecipe("qwen2", "Qwen2ForCausalLM",
                   LLAMA_KEYS | {"attention.sliding_window": "sliding_window"},
                   _layout(permuted=False), llama_fill)
QWEN3 = GgufRecipe("qwen3", "Qwen3ForCausalLM", LLAMA_KEYS | {"attention.key_length": "head_dim"},
                   _layout(permuted=False), llama_fill)
