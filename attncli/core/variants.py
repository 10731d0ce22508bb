"""The attention variants' names and declared traits: what each computes, without torch.

Every other module asks these traits (causal? heads? dropout? projections? stages?) instead of
comparing variant names; `core/attention.py` holds the modules that implement them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Variant(str, Enum):
    """The chapter-3 attention variants, in the book's order."""

    simple = "simple"
    qkv = "qkv"
    causal = "causal"
    multihead = "multihead"


@dataclass(frozen=True)
class Traits:
    """What a variant computes, declared once."""

    title: str  # how a header names it
    causal: bool = False  # query i sees keys 0..i only
    multihead: bool = False  # --num-heads splits d_out into heads, then out_proj combines them
    dropout: bool = False  # --dropout applies to its weights
    projections: bool = True  # W_query/W_key/W_value: --d-out and --qkv-bias apply
    scaled: bool = True  # scores are divided by √d_k
    default_heads: int = 1

    @property
    def stages(self) -> tuple[str, ...]:
        """The stages the variant produces, in computation order (dropped needs --dropout > 0)."""
        qkv = ("queries", "keys", "values") if self.projections else ()
        return ("inputs", *qkv, "scores", *(("scaled",) if self.scaled else ()),
                *(("masked",) if self.causal else ()), "softmax",
                *(("dropped",) if self.dropout else ()), "weights",
                *(("heads_context",) if self.multihead else ()), "context")


TRAITS: dict[Variant, Traits] = {
    Variant.simple: Traits("simple attention", projections=False, scaled=False),
    Variant.qkv: Traits("QKV self-attention"),
    Variant.causal: Traits("causal attention", causal=True, dropout=True),
    Variant.multihead: Traits("multi-head attention", causal=True, multihead=True, dropout=True,
                              default_heads=2),
}

# A trained checkpoint's attention: causal, many heads, no dropout.
MODEL_TRAITS = Traits("trained model attention", causal=True, multihead=True)
# A trained encoder's (BERT): bidirectional, no mask, every query sees every key.
ENCODER_TRAITS = Traits("trained encoder attention", multihead=True)


def model_traits(bidirectional: bool) -> Traits:
    """A checkpoint's traits: an encoder's (bidirectional) or a decoder's (causal)."""
    return ENCODER_TRAITS if bidirectional else MODEL_TRAITS


# Weights read back from a file with no settings: nothing is assumed, not even a mask.
SAVED_TRAITS = Traits("saved weights", multihead=True)


# The stages by shape: [h][T][T] over the keys, and [h][T][head_dim] per head.
TOKEN_STAGES = ("scores", "scaled", "capped", "masked", "softmax", "dropped", "weights")
HEAD_DIM_STAGES = ("queries", "keys", "values", "queries_norm", "keys_norm", "queries_rope",
                   "keys_rope")
