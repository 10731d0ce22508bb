"""BERT-style encoders (bert, roberta) as a family: the checkpoint's own tokenizer.json
([CLS]/[SEP] or <s>/</s>), learned absolute positions, post-LN blocks, bidirectional attention."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from torch import Tensor

from attncli.core.attention import Attention
from attncli.core.request import Request
from attncli.core.result import ModelInfo
from attncli.errors import AttnCliError
from attncli.models.bert.checkpoint import BertCheckpoint, bert_checkpoint
from attncli.models.bert.config import BertArch, bert_spec
from attncli.models.bert.model import (
    bert_all_layers,
    bert_attention,
    bert_trace,
    check_tokens,
)
from attncli.models.decoding import DecodeStep, Shape
from attncli.models.family import (
    Family,
    FamilyTraits,
    LayerAttention,
    LayerTrace,
    ModelSpec,
    Tokens,
)
from attncli.models.own_tokens import source_tokens
from attncli.models.sources.base import WeightSource

TRAITS = FamilyTraits(title="BERT-style encoder", variant="bert", supports_tiled=False,
                      max_tokens=None, kv_heads=False, tokenizer_file=True, norm="LayerNorm'd",
                      bidirectional=True)
# Why the decoder-only views refuse an encoder, in one clause each.
NO_CACHE = ("its attention is bidirectional: every token attends to every other, so a new "
            "token changes the earlier tokens' keys and values in every layer after the first, "
            "and there is nothing to reuse token by token")
NO_PREDICT = ("--predict shows the token a decoder predicts next; an encoder (BERT, RoBERTa) "
              "fills in masked tokens in place, which attncli does not show")


class BertModel:
    """One checked encoder checkpoint, ready to run."""

    traits = TRAITS

    def __init__(self, ckpt: BertCheckpoint, source: WeightSource) -> None:
        s = ckpt.spec
        self.ckpt, self.source = ckpt, source
        self.spec = ModelSpec(architecture=s.architecture, n_layer=s.n_layer,
                              num_heads=s.num_heads, kv_heads=s.num_heads, head_dim=s.head_dim,
                              d_model=s.d_model, windows=(None,) * s.n_layer,
                              positions=s.max_tokens)
        self._type_id: int | None = None

    def vocabulary(self) -> WeightSource:
        """The source whose tokenizer this checkpoint's texts go through."""
        return self.source

    def unchanged(self) -> None:
        """One line where a file of the checkpoint changed since it was read."""
        self.source.unchanged()

    def tokens(self, req: Request) -> Tokens:
        """The checkpoint's tokenizer.json, and what its post-processor added ([CLS], [SEP])."""
        if req.heads is not None and req.heads != self.spec.num_heads:
            raise AttnCliError(f"heads={req.heads} disagrees with num_attention_heads="
                               f"{self.spec.num_heads} in config.json")
        return source_tokens(self.source, req)

    def type_id(self) -> int:
        """The token type id of every token of a text: the one the tokenizer's post-processor
        gives a single sequence (0 for BERT's and RoBERTa's), or 0 without a tokenizer.json."""
        if self._type_id is None:
            from attncli.models.hf_tokens import source_tokenizer

            found = {0} if self.source.tokenizer_json() is None else set(
                source_tokenizer(self.source).encode("x").type_ids)
            rows = self.ckpt.spec.type_vocab_size
            if len(found) != 1 or not 0 <= min(found) < rows:
                raise AttnCliError(f"the tokenizer gives one text the token type ids "
                                   f"{sorted(found)}; attncli runs one type id per text, one of "
                                   f"the model's {rows} (type_vocab_size)")
            self._type_id = found.pop()
        return self._type_id

    def check_tokens(self, token_ids: list[int]) -> None:
        """Empty input, an id outside the vocabulary, or more tokens than positions, refused."""
        check_tokens(self.ckpt.spec, token_ids)

    def attention(self, token_ids: list[int], layer: int) -> LayerAttention:
        """Blocks 0..layer run; that layer's attention with every stage."""
        index, inputs, output = bert_attention(self.ckpt.weights, self.ckpt.spec, token_ids,
                                               self.type_id(), layer)
        return LayerAttention(index, inputs, output)

    def attention_positionless(self, token_ids: list[int], layer: int) -> LayerAttention:
        """Layer's attention with the position embeddings left out: with no mask either, the
        whole encoder is then permutation-equivariant."""
        index, inputs, output = bert_attention(self.ckpt.weights, self.ckpt.spec, token_ids,
                                               self.type_id(), layer, positions_on=False)
        return LayerAttention(index, inputs, output)

    def all_layers(self, token_ids: list[int]) -> Tensor:
        """Every head's weights, (layers, heads, T, T)."""
        return bert_all_layers(self.ckpt.weights, self.ckpt.spec, token_ids, self.type_id())

    def trace(self, token_ids: list[int], last_layer: int,
              visible: Tensor | None = None) -> Iterator[LayerTrace]:
        """Blocks 0..last_layer one by one, whole."""
        return bert_trace(self.ckpt.weights, self.ckpt.spec, token_ids, self.type_id(),
                          last_layer, visible)

    def logits(self, hidden: Tensor) -> Tensor:
        """Refused: the masked-language-model head is not a next-token prediction."""
        raise AttnCliError(NO_PREDICT)

    def layer_input(self, token_ids: list[int], layer: int) -> tuple[Tensor, Attention]:
        """An encoder never takes the tiled path (traits.supports_tiled is false)."""
        raise AttnCliError(f"a {TRAITS.title} checkpoint runs the naive path only")

    def info(self, layer: int | None = None) -> ModelInfo:
        """The JSON "model" object: where the checkpoint is, its shape, bidirectional."""
        spec = self.ckpt.spec
        return ModelInfo(str(spec.directory), spec.n_layer, spec.num_heads, spec.d_model, layer,
                         name=spec.architecture, norm=TRAITS.norm, reads=TRAITS.reads,
                         bidirectional=True)

    def decode_shape(self) -> Shape:
        """The multiply-adds of one token through every block: q, k, v, out and the MLP."""
        d = self.spec.d_model
        return Shape(layers=self.spec.n_layer, d_in=d, d_out=d,
                     token_macs=4 * d * d + 2 * d * self.ckpt.spec.d_ff)

    def decoder(self, layer: int, num_tokens: int, held: bool = True) -> DecodeStep:
        """Refused: an encoder has no key/value cache (see NO_CACHE)."""
        raise AttnCliError(f"kvcache does not apply to a {TRAITS.title}: {NO_CACHE}")


class BertFamily:
    """One encoder architecture; arch says how it differs from BERT."""

    traits = TRAITS

    def __init__(self, arch: BertArch) -> None:
        self.arch = arch

    def load(self, source: WeightSource, model: str, heads: int | None) -> BertModel:
        """The source checked as its config.json's encoder (heads is checked with the text)."""
        return BertModel(bert_checkpoint(source, model), source)

    def shape(self, config: dict[str, Any], folder: Path) -> tuple[int, int, int]:
        """Layers, heads and kv heads from config.json alone (the `models` table)."""
        spec = bert_spec(folder, config)
        return spec.n_layer, spec.num_heads, spec.num_heads


BERT: Family = BertFamily(BertArch(prefix="bert.", padded_positions=False))
ROBERTA: Family = BertFamily(BertArch(prefix="roberta.", padded_positions=True))
