"""rope_scaling / rope_parameters of a Llama-family config, checked as transformers reads them.

transformers (5.x) takes rope_scaling over rope_parameters when both are set, rope_theta from
the dict before the top-level key, rotates the whole head for the default type whatever
partial_rotary_factor says, and fails on a partial rotary with a scaled type: so does attncli.
"""

from __future__ import annotations

from typing import Any

from attncli.errors import AttnCliError
from attncli.models.checks.values import config_int, config_number, shown

# Each implemented rope_type and the parameters it needs besides rope_theta.
ROPE_TYPES: dict[str, tuple[str, ...]] = {
    "default": (),
    "linear": ("factor",),
    "dynamic": ("factor",),
    "llama3": ("factor", "low_freq_factor", "high_freq_factor"),
    # a GGUF file's rope_freqs tensor (llama.cpp's form of Llama 3.1's scaling): one divisor
    # per rotated pair, in freq_factors
    "freq_factors": (),
    # Phi-3's LongRoPE: one divisor per pair, short_factor up to the original context and
    # long_factor past it, and cos/sin scaled by attention_factor
    "longrope": (),
}
WHERE = "config.json rope_scaling"


def _scaling_dict(config: dict[str, Any]) -> dict[str, Any]:
    """The rope dict transformers uses: rope_scaling when set, else rope_parameters."""
    for key in ("rope_scaling", "rope_parameters"):
        value = config.get(key)
        if value is None or value == {}:
            continue
        if not isinstance(value, dict):
            raise AttnCliError(f"config.json: {key} must be an object (got {shown(value)})")
        if any(isinstance(v, dict) for v in value.values()):
            raise AttnCliError(f"config.json sets {key} per layer type, which attncli does not "
                               "implement (one rope dict for every layer)")
        return dict(value)
    return {}


def _rope_type(scaling: dict[str, Any]) -> str:
    rope_type = scaling.get("rope_type", scaling.get("type", "default"))
    if not isinstance(rope_type, str) or rope_type not in ROPE_TYPES:
        raise AttnCliError(f"config.json sets rope_scaling.rope_type={shown(rope_type)}, which "
                           f"attncli does not implement (choose from {', '.join(ROPE_TYPES)})")
    return rope_type


def _partial(config: dict[str, Any], scaling: dict[str, Any]) -> float:
    """partial_rotary_factor, from the rope dict before the top level: a fraction in (0, 1]."""
    key = "partial_rotary_factor"
    source = scaling if key in scaling else config
    if source.get(key) is None:
        return 1.0
    partial = config_number(source, key, where="config.json", high=1.0, closed=True)
    if partial == 0:
        raise AttnCliError(f"config.json: {key} must be above 0 (got 0)")
    return partial


def _freq_factors(scaling: dict[str, Any], head_dim: int,
                  key: str = "freq_factors") -> list[float]:
    """One positive finite divisor per rotated pair."""
    factors = scaling.get("freq_factors")
    if not isinstance(factors, list) or len(factors) != head_dim // 2:
        raise AttnCliError(f"{WHERE}: {key} must be a list of {head_dim // 2} numbers, "
                           f"one per rotated pair")
    bad = [f for f in factors if isinstance(f, bool) or not isinstance(f, int | float)
           or not 0 < f < float("inf")]
    if bad:
        raise AttnCliError(f"{WHERE}: {key} holds {shown(bad[0])}, not a positive "
                           "finite number")
    return [float(f) for f in factors]


def _longrope(config: dict[str, Any], scaling: dict[str, Any], rotary_dim: int,
              max_positions: int) -> dict[str, Any]:
    """short_factor and long_factor (one per rotated pair), the original context, and the
    attention factor transformers derives when the config gives none."""
    import math

    old_key = "original_max_position_embeddings"
    old = config_int(scaling if scaling.get(old_key) is not None else config, old_key,
                     max_positions, where=WHERE)
    checked: dict[str, Any] = {"rope_type": "longrope", old_key: old}
    for key in ("short_factor", "long_factor"):
        checked[key] = _freq_factors({"freq_factors": scaling.get(key)}, rotary_dim, key)
    factor = scaling.get("factor")
    factor = max_positions / old if factor is None else config_number(scaling, "factor",
                                                                       where=WHERE)
    attention = scaling.get("attention_factor")
    if attention is None:
        attention = 1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(old))
    else:
        attention = config_number(scaling, "attention_factor", where=WHERE)
    checked["attention_factor"] = attention
    return checked


def rope_settings(config: dict[str, Any], head_dim: int, max_positions: int,
                  partial_always: bool = False) -> tuple[float, dict[str, Any], int]:
    """rope_theta, the checked scaling parameters (rope_type named) and the rotary dim.

    partial_always: the family turns int(head_dim · partial_rotary_factor) dimensions whatever
    the rope_type (GPT-NeoX, Phi-3), where Llama's default type turns the whole head.
    """
    scaling = _scaling_dict(config)
    rope_type = _rope_type(scaling)
    theta_from = scaling if scaling.get("rope_theta") is not None else config
    theta = config_number(theta_from, "rope_theta", 10000.0, where="config.json", low=1.0)
    partial = _partial(config, scaling)
    if head_dim % 2:
        raise AttnCliError(f"config.json: head_dim must be even for RoPE, which turns pairs of "
                           f"dimensions (got {head_dim})")
    checked: dict[str, Any] = {"rope_type": rope_type}
    for key in ROPE_TYPES[rope_type]:
        checked[key] = config_number(scaling, key, where=WHERE)
    if partial_always:
        rotary_dim = int(head_dim * partial)
        if rotary_dim < 2 or rotary_dim % 2:
            raise AttnCliError(f"config.json: partial_rotary_factor={partial:g} turns "
                               f"{rotary_dim} of head_dim {head_dim} dimensions, which must be "
                               "an even number above 0")
        if rope_type == "longrope":
            return theta, _longrope(config, scaling, rotary_dim, max_positions), rotary_dim
        if rope_type == "freq_factors":
            checked["freq_factors"] = _freq_factors(scaling, rotary_dim)
            return theta, checked, rotary_dim
        if rope_type != "default":
            checked["factor"] = config_number(scaling, "factor", where=WHERE, low=1.0,
                                              closed=True)
        return theta, checked, rotary_dim
    if rope_type == "longrope":
        raise AttnCliError("config.json sets rope_scaling.rope_type='longrope', which attncli "
                           "implements for Phi-3 only (this family: choose from "
                           f"{', '.join(t for t in ROPE_TYPES if t != 'longrope')})")
    if rope_type == "default":
        return theta, checked, head_dim  # transformers turns the whole head here
    if rope_type == "freq_factors":
        checked["freq_factors"] = _freq_factors(scaling, head_dim)
        return theta, checked, head_dim
    if int(head_dim * partial) != head_dim:
        raise AttnCliError(f"config.json sets partial_rotary_factor={partial:g} with "
                           f"rope_type {rope_type!r}, which transformers cannot run (its "
                           f"{rope_type} frequencies cover {int(head_dim * partial)} of "
                           f"head_dim {head_dim}); attncli refuses it too")
    checked["factor"] = config_number(scaling, "factor", where=WHERE, low=1.0, closed=True)
    if rope_type == "dynamic" and head_dim <= 2:
        raise AttnCliError(f"config.json: dynamic RoPE raises its base to dim / (dim - 2), "
                           f"which needs head_dim above 2 (got {head_dim})")
    if rope_type == "llama3":
        low, high = checked["low_freq_factor"], checked["high_freq_factor"]
        if not high > low:
            raise AttnCliError(f"{WHERE}: high_freq_factor must be above low_freq_factor "
                               f"(got {high:g} and {low:g})")
        old = "original_max_position_embeddings"
        checked[old] = config_int(scaling, old, max_positions, where=WHERE)
    return theta, checked, head_dim
