"""SmolLM3: the Llama block with no positional encoding on some layers (no_rope_layers).

On those NoPE layers attention sees the tokens' content and the causal mask, nothing else: the
permutation lesson of chapter 3, inside a trained model.
"""

from __future__ import annotations

from typing import Any

from attncli.errors import AttnCliError
from attncli.models.checks.values import config_int
from attncli.models.family import Family, FamilyTraits
from attncli.models.llama.config import LlamaArch, LlamaSpec, Rope, respec
from attncli.models.llama.family import LlamaFamily


def _prepare(config: dict[str, Any]) -> dict[str, Any]:
    """no_rope_layers (1: RoPE, 0: none) and layer_types as transformers fills them in."""
    n_layer = config_int(config, "num_hidden_layers")
    flags = config.get("no_rope_layers")
    if flags is None:
        every = config_int(config, "no_rope_layer_interval", 4)
        flags = [int((i + 1) % every != 0) for i in range(n_layer)]
    if not isinstance(flags, list) or len(flags) != n_layer or any(
            isinstance(f, bool) or f not in (0, 1) for f in flags):
        raise AttnCliError(f"config.json: no_rope_layers must list 0 or 1 for each of the "
                           f"{n_layer} layers (1: the layer uses RoPE)")
    out = {**config, "no_rope_layers": flags}
    if config.get("rope_theta") is None and not config.get("rope_parameters"):
        out["rope_theta"] = 2_000_000.0  # SmolLM3Config's default
    if config.get("layer_types") is None:
        sliding = bool(config.get("use_sliding_window")) and config.get("sliding_window") \
            is not None
        out["layer_types"] = ["sliding_attention" if sliding and not flag else "full_attention"
                              for flag in flags]
    return out


def _finish(config: dict[str, Any], spec: LlamaSpec) -> LlamaSpec:
    rope = Rope(spec.rope_theta, spec.rope_scaling, spec.rotary_dim)
    return respec(spec, layer_ropes=tuple(rope if flag else None
                                          for flag in config["no_rope_layers"]))


SMOLLM3: Family = LlamaFamily(
    LlamaArch(windows=True, window_switch=True, implements=frozenset({"no_rope_layers"}),
              prepare=_prepare, finish=_finish),
    FamilyTraits(title="SmolLM3", variant="llama", supports_tiled=True, max_tokens=None,
                 kv_heads=True, tokenizer_file=True, norm="RMSNorm'd"))
