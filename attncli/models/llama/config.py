"""config.json of a Llama-family model (llama, mistral, qwen2, qwen3) as one checked record."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
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
class Rope:
    """How one layer turns its queries and keys."""

    theta: float
    scaling: dict[str, Any]  # rope_type and its parameters
    rotary_dim: int  # the leading dimensions of each head that turn; the rest pass through


@dataclass(frozen=True)
class LlamaArch:
    """How one architecture built on the Llama block differs from Llama: declared as data.

    Llama, Mistral, Qwen2 and Qwen3 differ in windows and q/k norms only; the other families
    (Gemma, Phi-3, GPT-NeoX, OLMo 2, SmolLM3) bring their own config module, which reads the
    keys they add (prepare, before the shared keys; finish, after).
    """

    windows: bool = False  # without layer_types, sliding_window applies (llama: never)
    window_switch: bool = False  # the window needs use_sliding_window, from max_window_layers on
    qk_norm: bool = False  # RMSNorm over head_dim on each query and key head (Qwen3)
    implements: frozenset[str] = frozenset()  # NEUTRAL keys the family's own module reads
    partial_rotary: bool = False  # partial_rotary_factor holds for every rope_type
    eps_key: str = "rms_norm_eps"
    eps_default: float = 1e-6
    act_key: str = "hidden_act"
    act_default: str = "silu"
    # The family's own keys: config.json rewritten into the shared keys (legacy names), and
    # the spec completed from what the shared reader cannot know.
    prepare: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    finish: Callable[[dict[str, Any], LlamaSpec], LlamaSpec] | None = None

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
    # What the other families change (the defaults are Llama's):
    qk_norm_whole: bool = False  # OLMo 2: RMSNorm over all heads' queries (keys) at once
    layer_ropes: tuple[Rope | None, ...] = ()  # per layer; None: no positions (NoPE); ()=rope
    norm_offset: float = 0.0  # Gemma: RMSNorm scales by (1 + w)
    layer_norm: bool = False  # GPT-NeoX: LayerNorm (mean removed, bias added), not RMSNorm
    embed_scale: float = 1.0  # Gemma: embeddings times √d_model
    query_scale: float | None = None  # Gemma: query_pre_attn_scalar^-1/2; None: 1/√head_dim
    softcap: float | None = None  # Gemma 2: scores → cap · tanh(scores / cap)
    final_softcap: float | None = None  # Gemma 2: the logits likewise
    pre_attn_norm: bool = True  # OLMo 2: attention reads the residual stream itself
    post_attn_norm: bool = False  # Gemma, OLMo 2: the attention output is normalised
    pre_mlp_norm: bool = True
    post_mlp_norm: bool = False  # Gemma, OLMo 2: the MLP output is normalised
    parallel: bool = False  # GPT-NeoX: attention and MLP both read the block's input
    gated_mlp: bool = True  # SwiGLU-style gate · up; False: down(act(up(x))) (GPT-NeoX)
    head_name: str = "lm_head.weight"  # the unembedding outside the prefix, when untied

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

    def rope_of(self, layer: int) -> Rope | None:
        """How layer turns its queries and keys; None where it has no positions (NoPE)."""
        if self.layer_ropes:
            return self.layer_ropes[layer]
        return Rope(self.rope_theta, self.rope_scaling, self.rotary_dim)

    @property
    def nope_layers(self) -> tuple[int, ...]:
        """The layers without positional encoding."""
        return tuple(i for i in range(self.n_layer) if self.rope_of(i) is None)

    @property
    def tiled_refusal(self) -> str:
        """Why the tiled kernel cannot run this checkpoint exactly ("" when it can)."""
        if self.softcap is not None:
            return (f"attention logit soft-capping (cap {self.softcap:g}) is not part of the "
                    "tiled kernel's contract")
        return ""


def _refuse_unknown(config: dict[str, Any], arch: LlamaArch) -> None:
    """Refuse, naming the key, any setting that would change attention and is not implemented."""
    for key, neutral in NEUTRAL.items():
        if key in config and config[key] != neutral and key not in arch.implements:
            raise AttnCliError(f"config.json sets {key}={shown(config[key])}, which attncli "
                               f"does not implement (it runs {key}={neutral!r})")
    from attncli.models.activations import activation

    activation(config_str(config, arch.act_key, arch.act_default), arch.act_key)


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


def llama_spec(directory: Path, config: dict[str, Any],
               arch: LlamaArch | None = None) -> LlamaSpec:
    """The checked spec of a config built on the Llama block; anything unimplemented is
    refused (arch: the family's, else the one its model_type registers)."""
    family = config.get("model_type")
    arch = arch or arch_of(family)
    if arch.prepare is not None:
        config = arch.prepare(config)
    _refuse_unknown(config, arch)
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
    theta, scaling, rotary_dim = rope_settings(config, head_dim, max_positions,
                                               arch.partial_rotary)
    n_layer = config_int(config, "num_hidden_layers")
    spec = LlamaSpec(
        directory=directory, architecture=str(family), n_layer=n_layer, d_model=d_model,
        num_heads=num_heads, kv_heads=kv_heads, head_dim=head_dim,
        d_ff=config_int(config, "intermediate_size"), vocab_size=config_int(config, "vocab_size"),
        max_positions=max_positions, rms_eps=epsilon(config, arch.eps_key, arch.eps_default),
        rope_theta=theta, rope_scaling=scaling, rotary_dim=rotary_dim,
        hidden_act=config_str(config, arch.act_key, arch.act_default), qk_norm=arch.qk_norm,
        layer_windows=layer_windows(config, arch, n_layer),
    )  # fmt: skip
    return spec if arch.finish is None else arch.finish(config, spec)


def respec(spec: LlamaSpec, **changes: Any) -> LlamaSpec:
    """spec with a family's own settings (dataclasses.replace, for the families' modules)."""
    return replace(spec, **changes)


def kv_cache_values(spec: LlamaSpec, num_tokens: int) -> int:
    """Numbers a KV cache holds for num_tokens: 2 × layers × kv_heads × T × head_dim.

    GQA shrinks it by num_heads / kv_heads against one key and value per query head.
    """
    return 2 * spec.n_layer * spec.kv_heads * num_tokens * spec.head_dim
