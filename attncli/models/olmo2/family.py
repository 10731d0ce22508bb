"""OLMo 2: the Llama block with its norms moved after attention and after the MLP, and one
RMSNorm over all query (key) heads together before RoPE."""

from __future__ import annotations

from typing import Any

from attncli.models.family import Family, FamilyTraits
from attncli.models.llama.checkpoint import Layout
from attncli.models.llama.config import LlamaArch, LlamaSpec, respec
from attncli.models.llama.family import LlamaFamily


def _finish(config: dict[str, Any], spec: LlamaSpec) -> LlamaSpec:
    """No norm before attention or the MLP; one after each; q/k norms over the projection."""
    return respec(spec, qk_norm_whole=True, pre_attn_norm=False, pre_mlp_norm=False,
                  post_attn_norm=True, post_mlp_norm=True)


def _norms(spec: LlamaSpec) -> dict[str, tuple[str, int, int, int | None]]:
    return {"attn_output_norm": ("post_attention_layernorm", 1, 0, None),
            "mlp_output_norm": ("post_feedforward_layernorm", 1, 0, None)}


OLMO2: Family = LlamaFamily(
    LlamaArch(eps_default=1e-5, finish=_finish),
    FamilyTraits(title="OLMo 2", variant="llama", supports_tiled=True, max_tokens=None,
                 kv_heads=True, tokenizer_file=True, norm="un-normalised"),
    Layout(layer=_norms))
