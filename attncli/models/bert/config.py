"""config.json of a BERT-style encoder (bert, roberta) as one checked record."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attncli.errors import AttnCliError
from attncli.models.checks.values import config_int, config_str, epsilon, layer_index, shown

FAMILY_MODULE = "attncli.models.bert.family"  # where the registry finds this family


@dataclass(frozen=True)
class BertArch:
    """How one encoder of the family differs: its weight prefix and where positions start."""

    prefix: str  # "bert." or "roberta." (…ForMaskedLM); the bare …Model has none
    padded_positions: bool  # RoBERTa: positions count from pad_token_id + 1, pads keep pad's


# Keys that would change the maths if set, with the value that leaves it as implemented here.
NEUTRAL = {
    "position_embedding_type": "absolute",  # relative_key(_query) adds distance embeddings
    "is_decoder": False,  # a causal mask, and a key/value cache
    "add_cross_attention": False,
    "embedding_size": None,  # ALBERT-style factorised embeddings
    "attn_logit_softcapping": None,
    "sliding_window": None,
    "rotary_emb_base": None,
}


@dataclass(frozen=True)
class BertSpec:
    """The sizes and settings of one BERT-style encoder."""

    directory: Path
    architecture: str  # model_type: bert or roberta
    n_layer: int
    d_model: int  # hidden_size
    num_heads: int
    head_dim: int
    d_ff: int  # intermediate_size of the MLP
    vocab_size: int
    max_positions: int  # rows of position_embeddings
    type_vocab_size: int  # rows of token_type_embeddings
    eps: float  # layer_norm_eps, of every LayerNorm
    hidden_act: str = "gelu"
    pad_token_id: int = 0
    padded_positions: bool = False  # RoBERTa's position ids (see position_ids)

    @property
    def first_position(self) -> int:
        """The position id of the first token: 0, or RoBERTa's pad_token_id + 1."""
        return self.pad_token_id + 1 if self.padded_positions else 0

    @property
    def max_tokens(self) -> int:
        """The most tokens the position table holds (RoBERTa's first pad + 1 rows unused)."""
        return self.max_positions - self.first_position

    def position_ids(self, token_ids: list[int]) -> list[int]:
        """Each token's row of position_embeddings, as transformers makes them.

        BERT: 0, 1, 2, … RoBERTa (create_position_ids_from_input_ids): a token that is not the
        pad counts up from pad_token_id + 1; a pad token takes pad_token_id itself.
        """
        if not self.padded_positions:
            return list(range(len(token_ids)))
        pad, seen, out = self.pad_token_id, 0, []
        for token_id in token_ids:
            seen += token_id != pad
            out.append(pad + seen if token_id != pad else pad)
        return out

    def layer_index(self, layer: int) -> int:
        """The 0-based index of layer, which may count from the end (-1 is the last)."""
        return layer_index(layer, self.n_layer)


def _refuse_unknown(config: dict[str, Any]) -> None:
    """Refuse, naming the key, any setting that would change the maths and is not implemented."""
    for key, neutral in NEUTRAL.items():
        if key in config and config[key] != neutral:
            raise AttnCliError(f"config.json sets {key}={shown(config[key])}, which attncli "
                               f"does not implement for an encoder (it runs {key}={neutral!r})")
    from attncli.models.activations import activation

    activation(config_str(config, "hidden_act", "gelu"), "hidden_act")  # an unknown one fails


def arch_of(model_type: object) -> BertArch:
    """The registered encoder architecture model_type names; any other is refused."""
    from attncli.models.family import REGISTRY, family_named

    names = [name for name, (module, _) in REGISTRY.items() if module == FAMILY_MODULE]
    family = family_named(model_type) if isinstance(model_type, str) and model_type in names \
        else None
    arch = getattr(family, "arch", None)
    if not isinstance(arch, BertArch):
        raise AttnCliError(f"model_type {shown(model_type)} is not a BERT-style encoder "
                           f"({', '.join(names)})")
    return arch


def _pad(config: dict[str, Any], arch: BertArch) -> int:
    """pad_token_id: RoBERTa's positions are counted from it (transformers' default 1)."""
    default = 1 if arch.padded_positions else 0
    return default if config.get("pad_token_id") is None else config_int(
        config, "pad_token_id", low=0)


def bert_spec(directory: Path, config: dict[str, Any]) -> BertSpec:
    """The checked spec of an encoder's config; anything unimplemented is refused by name."""
    model_type = config.get("model_type")
    arch = arch_of(model_type)
    _refuse_unknown(config)
    d_model = config_int(config, "hidden_size")
    num_heads = config_int(config, "num_attention_heads")
    if d_model % num_heads:
        raise AttnCliError(f"config.json: num_attention_heads {num_heads} must divide "
                           f"hidden_size {d_model}")
    spec = BertSpec(
        directory=directory, architecture=str(model_type),
        n_layer=config_int(config, "num_hidden_layers"), d_model=d_model, num_heads=num_heads,
        head_dim=d_model // num_heads, d_ff=config_int(config, "intermediate_size"),
        vocab_size=config_int(config, "vocab_size"),
        max_positions=config_int(config, "max_position_embeddings", 512),
        type_vocab_size=config_int(config, "type_vocab_size", 2),
        eps=epsilon(config, "layer_norm_eps", 1e-12),
        hidden_act=config_str(config, "hidden_act", "gelu"),
        pad_token_id=_pad(config, arch),
        padded_positions=arch.padded_positions,
    )  # fmt: skip
    if spec.max_tokens < 1:
        raise AttnCliError(f"config.json: max_position_embeddings {spec.max_positions} leaves "
                           f"no position for a token (positions start at {spec.first_position})")
    return spec
