"""Gemma 2 and Gemma 3 (its text model): the Llama block with Gemma's norms, scale and caps."""

from __future__ import annotations

from attncli.models.family import Family, FamilyTraits
from attncli.models.gemma.config import (
    SCALED,
    gemma2_finish,
    gemma2_prepare,
    gemma3_finish,
    gemma3_prepare,
    gemma3_text_part,
)
from attncli.models.llama.checkpoint import Layout
from attncli.models.llama.config import LlamaArch, LlamaSpec
from attncli.models.llama.family import LlamaFamily


def _norms(spec: LlamaSpec) -> dict[str, tuple[str, int, int, int | None]]:
    """Gemma names its four norms by place: the block's after-attention norm is Gemma's
    post_attention_layernorm, and the MLP's input norm is pre_feedforward_layernorm."""
    return {"attn_output_norm": ("post_attention_layernorm", 1, 0, None),
            "post_attention_layernorm": ("pre_feedforward_layernorm", 1, 0, None),
            "mlp_output_norm": ("post_feedforward_layernorm", 1, 0, None)}


# A multimodal gemma3 file keeps its language model under language_model.
LAYOUT = Layout(prefixes=("model.language_model.", "language_model.model.", "model.", ""),
                layer=_norms)
ACT = "hidden_activation"  # Gemma's MLP reads this key, not hidden_act
GEMMA_TRAITS = {"supports_tiled": True, "max_tokens": None, "kv_heads": True,
                "tokenizer_file": True, "norm": "RMSNorm'd (1 + w)", "variant": "llama"}

GEMMA2: Family = LlamaFamily(
    LlamaArch(windows=True, act_key=ACT, act_default="gelu_pytorch_tanh",
              implements=SCALED | {"attn_logit_softcapping"}, prepare=gemma2_prepare,
              finish=gemma2_finish),
    FamilyTraits(title="Gemma 2", **GEMMA_TRAITS),  # type: ignore[arg-type]
    LAYOUT)
GEMMA3: Family = LlamaFamily(
    LlamaArch(windows=True, act_key=ACT, act_default="gelu_pytorch_tanh", qk_norm=True,
              implements=SCALED, prepare=gemma3_prepare, finish=gemma3_finish),
    FamilyTraits(title="Gemma 3", **GEMMA_TRAITS),  # type: ignore[arg-type]
    LAYOUT)
# The multimodal gemma3: its config.json nests the language model's in text_config.
GEMMA3_MULTIMODAL: Family = LlamaFamily(
    LlamaArch(windows=True, act_key=ACT, act_default="gelu_pytorch_tanh", qk_norm=True,
              implements=SCALED, prepare=gemma3_text_part, finish=gemma3_finish),
    FamilyTraits(title="Gemma 3", **GEMMA_TRAITS),  # type: ignore[arg-type]
    LAYOUT)
