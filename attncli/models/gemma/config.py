"""Gemma 2 and Gemma 3 config.json: what they add to the Llama block, read and checked.

Both scale the embeddings by √d_model, normalise with RMSNorm times (1 + w), put a norm after
attention and after the MLP as well as before them, and scale scores by
query_pre_attn_scalar^-1/2. Gemma 2 soft-caps scores and logits, cap · tanh(x / cap), and
alternates sliding-window and global layers; Gemma 3 has five local layers to one global, each
kind with its own RoPE base, and RMSNorm on every query and key head.
"""

from __future__ import annotations

import math
from typing import Any

from attncli.errors import AttnCliError
from attncli.models.checks.rope_params import rope_settings
from attncli.models.checks.values import config_int, config_number, shown
from attncli.models.llama.config import LlamaSpec, Rope, respec

SCALED = frozenset({"query_pre_attn_scalar", "final_logit_softcapping"})


def _layer_types(config: dict[str, Any], every: int) -> dict[str, Any]:
    """layer_types as transformers assigns them when config.json leaves them out: sliding
    except every `every`-th layer (Gemma 2: 2; Gemma 3: sliding_window_pattern, 6)."""
    if config.get("layer_types") is not None:
        return config
    n_layer = config_int(config, "num_hidden_layers")
    types = ["sliding_attention" if (i + 1) % every else "full_attention" for i in range(n_layer)]
    return {**config, "layer_types": types}


def _gemma_common(config: dict[str, Any], spec: LlamaSpec) -> LlamaSpec:
    scalar = config_number(config, "query_pre_attn_scalar", 256.0, low=0.0)
    if scalar == 0:
        raise AttnCliError("config.json: query_pre_attn_scalar must be above 0 (got 0)")
    final = config.get("final_logit_softcapping")
    return respec(
        spec, embed_scale=math.sqrt(spec.d_model), norm_offset=1.0, query_scale=scalar**-0.5,
        post_attn_norm=True, post_mlp_norm=True,
        final_softcap=None if final is None else _cap(config, "final_logit_softcapping"))


def _cap(config: dict[str, Any], key: str) -> float:
    cap = config_number(config, key)
    if cap == 0:
        raise AttnCliError(f"config.json: {key} must be above 0 (got 0)")
    return cap


def gemma2_prepare(config: dict[str, Any]) -> dict[str, Any]:
    """Gemma 2's defaults where config.json is silent: alternating windows, caps 50 and 30."""
    defaults = {"attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0,
                "sliding_window": 4096}
    return _layer_types({**defaults, **config}, every=2)


def gemma2_finish(config: dict[str, Any], spec: LlamaSpec) -> LlamaSpec:
    """The embedding scale, (1 + w) norms, four norms a block, the scale and both caps."""
    spec = _gemma_common(config, spec)
    cap = config.get("attn_logit_softcapping")
    return respec(spec, softcap=None if cap is None else _cap(config, "attn_logit_softcapping"))


def gemma3_text_part(config: dict[str, Any]) -> dict[str, Any]:
    """A multimodal Gemma 3 config's text_config, prepared (attncli shows the language model)."""
    text = config.get("text_config")
    if not isinstance(text, dict):
        raise AttnCliError("config.json describes a multimodal gemma3 model without a "
                           "text_config object; attncli shows its language model only")
    return gemma3_prepare({**text, "model_type": "gemma3_text"})


def gemma3_prepare(config: dict[str, Any]) -> dict[str, Any]:
    """Gemma 3's text config as the shared reader takes it: the global layers' RoPE as the
    model's, the local layers' kept aside for gemma3_finish."""
    if config.get("attn_logit_softcapping") is not None:
        raise AttnCliError(f"config.json sets attn_logit_softcapping="
                           f"{shown(config['attn_logit_softcapping'])}, which Gemma 3's "
                           "attention does not apply (transformers ignores it); attncli "
                           "refuses rather than guess")
    if config.get("use_bidirectional_attention"):
        raise AttnCliError("config.json sets use_bidirectional_attention=true (an encoder "
                           "Gemma 3), which attncli does not implement")
    config = _layer_types({"sliding_window": 4096, **config},
                          every=config_int(config, "sliding_window_pattern", 6))
    ropes = config.get("rope_parameters")
    nested = isinstance(ropes, dict) and any(isinstance(v, dict) for v in ropes.values())
    if nested:
        assert isinstance(ropes, dict)
        full, local = ropes.get("full_attention"), ropes.get("sliding_attention")
        if not isinstance(full, dict) or not isinstance(local, dict):
            raise AttnCliError("config.json: rope_parameters must give full_attention and "
                               "sliding_attention objects")
        rest = {k: v for k, v in config.items() if k not in ("rope_parameters", "rope_scaling")}
        return {**rest, "rope_parameters": full, "_local_rope": local}
    # Older files: rope_theta (and rope_scaling) for the global layers, rope_local_base_freq.
    local = {"rope_type": "default",
             "rope_theta": config_number(config, "rope_local_base_freq", 10000.0, low=1.0)}
    theta = {} if config.get("rope_theta") is not None else {"rope_theta": 1_000_000.0}
    return {**config, **theta, "_local_rope": local}


def gemma3_finish(config: dict[str, Any], spec: LlamaSpec) -> LlamaSpec:
    """Gemma's common settings, and each layer's RoPE by its kind."""
    spec = _gemma_common(config, spec)
    local = rope_settings({"rope_parameters": config["_local_rope"]}, spec.head_dim,
                          spec.max_positions)
    ropes = {"full_attention": Rope(spec.rope_theta, spec.rope_scaling, spec.rotary_dim),
             "sliding_attention": Rope(*local)}
    return respec(spec, layer_ropes=tuple(ropes[kind] for kind in config["layer_types"]))
