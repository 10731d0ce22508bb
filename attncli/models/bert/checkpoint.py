"""An encoder's weight source checked against its config: every tensor's shape and dtype."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from torch import Tensor

from attncli.core.sizes import LAYER_BOUND
from attncli.errors import AttnCliError
from attncli.models.bert.config import BertSpec, arch_of, bert_spec
from attncli.models.sources.base import WeightSource
from attncli.models.sources.named import Named, check_tensors

_LAYER = re.compile(r"encoder\.layer\.(\d+)\.")
WORDS = "embeddings.word_embeddings.weight"


@dataclass(frozen=True)
class BertCheckpoint:
    """A checked encoder: its spec, the key prefix of its tensors, and the tensors."""

    spec: BertSpec
    source: str  # what the user asked for: a hub name or a path
    prefix: str  # "bert." / "roberta." (…ForMaskedLM) or "" (the bare …Model)
    weights: Named = field(compare=False, repr=False)


def expected_shapes(spec: BertSpec) -> dict[str, tuple[int, ...]]:
    """Every tensor the forward pass reads, without the prefix, and its shape."""
    d, f = spec.d_model, spec.d_ff
    shapes: dict[str, tuple[int, ...]] = {
        WORDS: (spec.vocab_size, d),
        "embeddings.position_embeddings.weight": (spec.max_positions, d),
        "embeddings.token_type_embeddings.weight": (spec.type_vocab_size, d),
        "embeddings.LayerNorm.weight": (d,), "embeddings.LayerNorm.bias": (d,),
    }  # fmt: skip
    block: dict[str, tuple[int, ...]] = {
        "attention.self.query.weight": (d, d), "attention.self.query.bias": (d,),
        "attention.self.key.weight": (d, d), "attention.self.key.bias": (d,),
        "attention.self.value.weight": (d, d), "attention.self.value.bias": (d,),
        "attention.output.dense.weight": (d, d), "attention.output.dense.bias": (d,),
        "attention.output.LayerNorm.weight": (d,), "attention.output.LayerNorm.bias": (d,),
        "intermediate.dense.weight": (f, d), "intermediate.dense.bias": (f,),
        "output.dense.weight": (d, f), "output.dense.bias": (d,),
        "output.LayerNorm.weight": (d,), "output.LayerNorm.bias": (d,),
    }  # fmt: skip
    for layer in range(spec.n_layer):
        shapes |= {f"encoder.layer.{layer}.{name}": shape for name, shape in block.items()}
    return shapes


class OldNorms(Named):
    """Named, for checkpoints that keep TensorFlow BERT's LayerNorm names (google-bert's own
    bert-base-uncased): LayerNorm.gamma and .beta, which transformers reads as .weight, .bias."""

    def old(self, name: str) -> str:
        """name as the file spells it."""
        for new, old in ((".LayerNorm.weight", ".LayerNorm.gamma"),
                         (".LayerNorm.bias", ".LayerNorm.beta")):
            if name.endswith(new):
                return name.removesuffix(new) + old
        return name

    def __contains__(self, name: str) -> bool:
        return super().__contains__(self.old(name))

    def __getitem__(self, name: str) -> Tensor:
        return super().__getitem__(self.old(name))

    def shape(self, name: str) -> tuple[int, ...]:
        return super().shape(self.old(name))

    def dtype(self, name: str) -> str:
        return super().dtype(self.old(name))


def bert_checkpoint(source: WeightSource, model: str) -> BertCheckpoint:
    """The source checked as its config.json's encoder (headers only are read)."""
    config = source.config()
    spec = bert_spec(source.path, config)
    names = source.shapes()
    arch = arch_of(config.get("model_type"))
    prefix = arch.prefix if arch.prefix + WORDS in names else ""
    held = {m[1] for name in names if (m := _LAYER.match(name.removeprefix(prefix)))}
    # A few missing layers are listed by name below; an absurd claim is refused before that.
    if spec.n_layer > max(len(held), LAYER_BOUND):
        raise AttnCliError(f"config.json claims num_hidden_layers={spec.n_layer:,}, but "
                           f"{source.path} holds tensors for {len(held):,} layer(s)")
    old = prefix + "embeddings.LayerNorm.gamma" in names
    weights = OldNorms(source, prefix) if old else Named(source, prefix)
    check_tensors(expected_shapes(spec), weights.shape, weights.dtype, weights.__contains__,
                  prefix, source.path, f"{spec.n_layer}-layer {spec.architecture} encoder")
    return BertCheckpoint(spec=spec, source=model, prefix=prefix, weights=weights)
