"""Gemma 2 and 3's GGUF architectures (gemma2, gemma3): their metadata keys, tensor names,
stored layout, and what llama.cpp fixes for them (src/llama-model.cpp load_hparams).

- HF's Gemma RMSNorm stores w and computes x·(1 + w); the converter stores w + 1 for every
  tensor named *norm.weight (Gemma2Model / Gemma3Model.modify_tensors), q_norm and k_norm
  included, and reading subtracts 1 (Layout.norm_shift).
- gemma2: every other layer local (swa pattern 2); gemma3: 5 local to 1 global (pattern 6), local
  layers rotating with base 10000 unscaled. query_pre_attn_scalar is not stored: llama.cpp scales
  scores by 1/sqrt(hidden/heads) for the 27B models (46 layers gemma2, 62 gemma3) and by
  1/sqrt(head_dim) otherwise, which are the released checkpoints' values.
"""

from __future__ import annotations

from typing import Any

from attncli.models.llama.gguf import LAYERS, LLAMA_KEYS, LLAMA_LAYER, LLAMA_TOP, llama_fill
from attncli.models.sources.gguf.config import layer_types, refuse
from attncli.models.sources.gguf.header import GgufHeader
from attncli.models.sources.gguf.names import Layout
from attncli.models.sources.gguf.recipe import GgufRecipe

_KEYS = LLAMA_KEYS | {"attention.key_length": "head_dim",
                      "attention.sliding_window": "sliding_window",
                      "attn_logit_softcapping": "attn_logit_softcapping",
                      "final_logit_softcapping": "final_logit_softcapping"}
_LAYER = LLAMA_LAYER | {
    "post_attention_layernorm.weight": "post_attention_norm.weight",
    "pre_feedforward_layernorm.weight": "ffn_norm.weight",
    "post_feedforward_layernorm.weight": "post_ffw_norm.weight"}
_LAYOUT = Layout(LAYERS, LLAMA_TOP, _LAYER, frozenset(), permuted=False, norm_shift=True)


def _gemma2_fill(config: dict[str, Any], header: GgufHeader) -> None:
    _gemma_fill(config, header, gemma2=True)


def _gemma3_fill(config: dict[str, Any], header: GgufHeader) -> None:
    _gemma_fill(config, header, gemma2=False)


def _gemma_fill(config: dict[str, Any], header: GgufHeader, gemma2: bool) -> None:
    """Gemma 2 / 3: softcaps, windows, the score scale and the local rope base."""
    llama_fill(config, header)
    needed = ("attn_logit_softcapping", "final_logit_softcapping", "sliding_window") if gemma2 \
        else ()
    missing = [k for k in needed if k not in config]
    if missing:
        raise refuse(header, f"lacks {', '.join(missing)} (its converter always writes them)")
    config["hidden_activation"] = "gelu_pytorch_tanh"
    config.setdefault("rope_theta", 10000.0)
    layers = int(config["num_hidden_layers"])
    big = layers == (46 if gemma2 else 62)  # llama.cpp's LLM_TYPE_27B
    config["query_pre_attn_scalar"] = (config["hidden_size"] // config["num_attention_heads"]
                                       if big else config["head_dim"])
    window = config.get("sliding_window")
    if not gemma2:
        config.setdefault("final_logit_softcapping", None)
        config["attn_logit_softcapping"] = None
        config["rope_local_base_freq"] = 10000.0
    if not window:  # gemma3 written with sliding_window_pattern 1: every layer global
        config["sliding_window"] = None
        layer_types(config, header, [False] * layers)
    else:
        every = 2 if gemma2 else 6
        layer_types(config, header, [i % every < every - 1 for i in range(layers)])


GEMMA2 = GgufRecipe("gemma2", "Gemma2ForCausalLM", _KEYS, _LAYOUT, _gemma2_fill)
GEMMA3 = GgufRecipe("gemma3_text", "Gemma3ForCausalLM", _KEYS, _LAYOUT, _gemma3_fill)
