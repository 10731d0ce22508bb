"""GPT-NeoX (Pythia): LayerNorm, Q, K and V interleaved head by head in query_key_value, RoPE on
a quarter of each head, and attention and the MLP side by side (use_parallel_residual)."""

from __future__ import annotations

from typing import Any

from attncli.models.checks.values import config_flag
from attncli.models.family import Family, FamilyTraits
from attncli.models.llama.checkpoint import Layout
from attncli.models.llama.config import LlamaArch, LlamaSpec, respec
from attncli.models.llama.family import LlamaFamily


def _prepare(config: dict[str, Any]) -> dict[str, Any]:
    """Pythia's own key names (rotary_pct, rotary_emb_base) as the shared reader's, and
    transformers' default of a quarter of each head turned."""
    out = dict(config)
    rope = config.get("rope_parameters") or config.get("rope_scaling") or {}
    rope = dict(rope) if isinstance(rope, dict) else rope
    if isinstance(rope, dict):
        if "partial_rotary_factor" not in rope and config.get("partial_rotary_factor") is None:
            rope["partial_rotary_factor"] = config.get("rotary_pct", 0.25)
        if rope.get("rope_theta") is None and config.get("rope_theta") is None \
                and config.get("rotary_emb_base") is not None:
            rope["rope_theta"] = config["rotary_emb_base"]
        out.pop("rope_scaling", None)
        out["rope_parameters"] = rope
    return out


def _finish(config: dict[str, Any], spec: LlamaSpec) -> LlamaSpec:
    return respec(spec, layer_norm=True, gated_mlp=False,
                  parallel=config_flag(config, "use_parallel_residual", True))


def _fused(spec: LlamaSpec) -> dict[str, tuple[str, int, int, int | None]]:
    """query_key_value's rows are [q k v] of head 0, then of head 1, ...: each a third."""
    hd, heads = spec.head_dim, spec.num_heads
    fused = "attention.query_key_value"
    return {"self_attn.q_proj": (fused, heads, 0, hd),
            "self_attn.k_proj": (fused, heads, hd, 2 * hd),
            "self_attn.v_proj": (fused, heads, 2 * hd, 3 * hd),
            "self_attn.o_proj": ("attention.dense", 1, 0, None),
            "mlp.up_proj": ("mlp.dense_h_to_4h", 1, 0, None),
            "mlp.down_proj": ("mlp.dense_4h_to_h", 1, 0, None)}


NEOX: Family = LlamaFamily(
    # is_decoder: GPTNeoXConfig writes false, and its causal LM masks whatever it says.
    LlamaArch(partial_rotary=True, eps_key="layer_norm_eps", eps_default=1e-5,
              implements=frozenset({"is_decoder"}),
              act_default="gelu", prepare=_prepare, finish=_finish),
    FamilyTraits(title="GPT-NeoX", variant="llama", supports_tiled=True, max_tokens=None,
                 kv_heads=True, tokenizer_file=True, norm="LayerNorm'd"),
    Layout(prefixes=("gpt_neox.", ""),
           top=(("embed_tokens.weight", "embed_in.weight"),
                ("norm.weight", "final_layer_norm.weight"),
                ("norm.bias", "final_layer_norm.bias")),
           heads=("embed_out.weight", "lm_head.weight"), layer=_fused))
