"""Phi-3 (and Phi-4-mini): the Llama block with Q, K, V fused in qkv_proj, gate and up fused
in gate_up_proj, RoPE on part of each head, and LongRoPE's two sets of factors."""

from __future__ import annotations

from typing import Any

from attncli.models.family import Family, FamilyTraits
from attncli.models.llama.checkpoint import Layout
from attncli.models.llama.config import LlamaArch, LlamaSpec
from attncli.models.llama.family import LlamaFamily

LEGACY_ROPE = ("su", "yarn")  # older Phi-3 files' names for LongRoPE, as transformers maps them


def _prepare(config: dict[str, Any]) -> dict[str, Any]:
    """The rope dict with LongRoPE named as such, and the top-level original context (which
    transformers takes over the rope dict's)."""
    out = dict(config)
    for key in ("rope_scaling", "rope_parameters"):
        rope = config.get(key)
        if isinstance(rope, dict) and rope:
            rope = dict(rope)
            kind = rope.get("rope_type", rope.get("type"))
            if kind in LEGACY_ROPE:
                rope["rope_type"] = "longrope"
                rope.pop("type", None)
            if config.get("original_max_position_embeddings") is not None:
                rope["original_max_position_embeddings"] = \
                    config["original_max_position_embeddings"]
            out[key] = rope
    return out


def _fused(spec: LlamaSpec) -> dict[str, tuple[str, int, int, int | None]]:
    """Where Q, K, V lie in qkv_proj's rows ([Q; K; V]) and gate, up in gate_up_proj's."""
    q, kv, f = spec.num_heads * spec.head_dim, spec.kv_heads * spec.head_dim, spec.d_ff
    return {"self_attn.q_proj": ("self_attn.qkv_proj", 1, 0, q),
            "self_attn.k_proj": ("self_attn.qkv_proj", 1, q, q + kv),
            "self_attn.v_proj": ("self_attn.qkv_proj", 1, q + kv, q + 2 * kv),
            "mlp.gate_proj": ("mlp.gate_up_proj", 1, 0, f),
            "mlp.up_proj": ("mlp.gate_up_proj", 1, f, 2 * f)}


PHI3: Family = LlamaFamily(
    LlamaArch(windows=True, partial_rotary=True, eps_default=1e-5, prepare=_prepare),
    FamilyTraits(title="Phi-3", variant="llama", supports_tiled=True, max_tokens=None,
                 kv_heads=True, tokenizer_file=True, norm="RMSNorm'd"),
    Layout(layer=_fused))
