"""config.json of a Llama-family model (llama, mistral, qwen2, qwen3) as one checked record."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attncli.errors import AttnCliError
from attncli.models.checks.rope_params import rope_settings
from attncli.models.checks.values import (
    config_flag,
    config_int,
    config_str,
    epsilon,
    layer_index,
    shown,
)

FAMILY_MODULE = "attncli.models.llama.family"  # where the registry finds this family


@dataclass(frozen=True)
class LlamaArch:
    """How one architecture of the family differs: its sliding windows and its q/k norms."""

    windows: bool  # without layer_types, sliding_window applies (llama: never)
    window_switch: bool  # the window needs use_sliding_window true, from max_window_layers on
    qk_norm: bool  # RMSNorm over head_dim on each query and key head (Qwen3)

# Keys that would change the maths if set, with the value that leaves it as implemented here.
NEUTRAL = {
    "attn_logit_softcapping": None,
    "final_logit_softcapping": None,
    "attention_chunk_size": None,
    "no_rope_layers": None,
    "query_pre_attn_scalar": None,
    "residual_multiplier": None,
    "attention_multiplier": None,
    "embedding_multiplier": None,
    "sandwich_norm": None,
    "is_decoder": True,
    "add_cross_attention": False,
}


@dataclass(frozen=True)
class LlamaSpec:
    """The sizes and attention settings of one Llama-family checkpoint."""

    directory: Path
    architecture: str  # model_type: llama, mistral, qwen2 or qwen3
    n_layer: int
    d_model: int  # hidden_size
    num_heads: int  # query heads
    kv_heads: int  # key/value heads; num_heads // kv_heads query heads share each one
    head_dim: int
    d_ff: int  # intermediate_size of the SwiGLU MLP
    vocab_size: int
    max_positions: int
    rms_eps: float
    rope_theta: float
    rope_scaling: dict[str, Any] = field(default_factory=dict)  # rope_type and its parameters
    rotary_dim: int = 0  # dimensions RoPE turns: all of head_dim, as transformers does
    hidden_act: str = "silu"
    qk_norm: bool = False  # Qwen3: RMSNorm over head_dim on each query and key head
    layer_windows: tuple[int | None, ...] = ()  # per layer: the sliding window, None = full

    @property
    def group_size(self) -> int:
        """How many query heads share one key/value head."""
        return self.num_heads // self.kv_heads

    @property
    def sliding_window(self) -> int | None:
        """The window of the sliding layers, None when every layer sees the whole past."""
        return next((w for w in self.layer_windows if w is not None), None)

    def kv_group(self, head: int) -> int:
        """The key/value head query head reads (GQA shares one among group_size heads)."""
        return head // self.group_size

    def layer_index(self, layer: int) -> int:
        """The 0-based index of layer, which may count from the end (-1 is the last)."""
        return layer_index(layer, self.n_layer)


def _refuse_unknown(config: dict[str, Any]) -> None:
    """Refuse, naming the key, any setting that would change attention and is not implemented."""
    for key, neutral in NEUTRAL.items():
        if key in config and config[key] != neutral:
            raise AttnCliError(f"config.json sets {key}={shown(config[key])}, which attncli "
                               f"does not implement (it runs {key}={neutral!r})")
    from attncli.models.activations import activation

    activation(config_str(config, "hidden_act", "silu"), "hidden_act")  # an unknown one fails


def layer_windows(config: dict[str, Any], arch: LlamaArch, n_layer: int) -> tuple[int | None, ...]:
    """Each layer's sliding window (None: full causal), as transformers assigns them."""
    window = config.get("sliding_window")
    if window is not None:
        window = config_int(config, "sliding_window")
    if arch.window_switch and not config_flag(config, "use_sliding_window", False):
        window = None
    types = config.get("layer_types")
    if types is None:
        if not arch.windows:
            return (None,) * n_layer
        first = 0
        if arch.window_switch and config.get("max_window_layers") is not None:
            first = config_int(config, "max_window_layers", low=0)
        types = ["sliding_attention" if window is not None and i >= first else "full_attention"
                 for i in range(n_layer)]
    if not isinstance(types, list) or len(types) != n_layer:
        raise AttnCliError(f"config.json: layer_types must list one type per layer ({n_layer})")
    for kind in types:
        if kind not in ("full_attention", "sliding_attention"):
            raise AttnCliError(f"config.json sets layer_types entry {shown(kind)}, which attncli "
                               f"does not implement (full_attention, sliding_attention)")
    return tuple(window if kind == "sliding_attention" else None for kind in types)


def arch_of(model_type: object) -> LlamaArch:
    """The registered Llama-family architecture model_type names; any other is refused."""
    from attncli.models.family import REGISTRY, family_named

    names = [name for name, (module, _) in REGISTRY.items() if module == FAMILY_MODULE]
    family = family_named(model_type) if isinstance(model_type, str) and model_type in names \
        else None
    arch = getattr(family, "arch", None)
    if not isinstance(arch, LlamaArch):
        raise AttnCliError(f"model_type {shown(model_type)} is not a Llama-family model "
                           f"({', '.join(names)})")
    return arch


def llama_spec(directory: Path, config: dict[str, Any]) -> LlamaSpec:
    """The checked spec of a Llama-family config; anything unimplemented is refused."""
    family = config.get("model_type")
    arch = arch_of(family)
    _refuse_unknown(config)
    d_model, num_heads = config_int(config, "hidden_size"), config_int(config,
                                                                       "num_attention_heads")
    kv_heads = config_int(config, "num_key_value_heads", num_heads)
    if num_heads % kv_heads:
        raise AttnCliError(f"num_key_value_heads must divide num_attention_heads (got "
                           f"{kv_heads} and {num_heads})")
    if config.get("head_dim") is None and d_model < num_heads:
        raise AttnCliError(f"config.json: hidden_size {d_model} is smaller than "
                           f"num_attention_heads {num_heads}, and head_dim is not set")
    head_dim = config_int(config, "head_dim") if config.get("head_dim") is not None \
        else d_model // num_heads
    max_positions = config_int(config, "max_position_embeddings", 2048)
    theta, scaling, rotary_dim = rope_settings(config, head_dim, max_positions)
    n_layer = config_int(config, "num_hidden_layers")
    return LlamaSpec(
        directory=directory, architecture=str(family), n_layer=n_layer, d_model=d_model,
        num_heads=num_heads, kv_heads=kv_heads, head_dim=head_dim,
        d_ff=config_int(config, "intermediate_size"), vocab_size=config_int(config, "vocab_size"),
        max_positions=max_positions, rms_eps=epsilon(config, "rms_norm_eps", 1e-6),
        rope_theta=theta, rope_scaling=scaling, rotary_dim=rotary_dim,
        hidden_act=config_str(config, "hidden_act", "silu"), qk_norm=arch.qk_norm,
        layer_windows=layer_windows(config, arch, n_layer),
    )  # fmt: skip


def kv_cache_values(spec: LlamaSpec, num_tokens: int) -> int:
    """Numbers a KV cache holds for num_tokens: 2 × layers × kv_heads × T × head_dim.

    GQA shrinks it by num_heads / kv_heads against one key and value per query head.
    """
    return 2 * spec.n_layer * spec.kv_heads * num_tokens * spec.head_dim
