"""Phi-3 / Phi-4's GGUF architecture (phi3): its metadata keys and tensor names, written as HF
stores them (fused qkv_proj and gate_up_proj; llama.cpp rotates them NeoX-style)."""

from __future__ import annotations

from typing import Any

from attncli.models.llama.gguf import LAYERS, LLAMA_KEYS, LLAMA_LAYER, LLAMA_TOP, llama_fill
from attncli.models.sources.gguf.config import rotary
from attncli.models.sources.gguf.header import GgufHeader
from attncli.models.sources.gguf.names import Layout
from attncli.models.sources.gguf.recipe import GgufRecipe

_KEYS = LLAMA_KEYS | {"rope.scaling.original_context_length": "original_max_position_embeddings"}
_LAYER = {hf: gg for hf, gg in LLAMA_LAYER.items()
          if hf not in ("mlp.gate_proj.weight", "mlp.up_proj.weight")} | {
    "self_attn.qkv_proj.weight": "attn_qkv.weight", "mlp.gate_up_proj.weight": "ffn_up.weight"}


def _fill(config: dict[str, Any], header: GgufHeader) -> None:
    """Phi-3 / Phi-4: partial rotary, an optional window (0: none)."""
    llama_fill(config, header)
    window = header.metadata.get("phi3.attention.sliding_window")
    config["sliding_window"] = int(window) if isinstance(window, int) and window > 0 else None
    config["partial_rotary_factor"] = rotary(config, header)
    config.setdefault("original_max_position_embeddings", config.get("max_position_embeddings"))


PHI3 = GgufRecipe("phi3", "Phi3ForCausalLM", _KEYS,
                  Layout(LAYERS, LLAMA_TOP, _LAYER, frozenset(), permuted=False), _fill)
