"""GPT-2 as a family: tiktoken's GPT-2 tokens, learned positions, LayerNorm, plain multi-head."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from torch import Tensor

from attncli.core.attention import Attention
from attncli.core.pipeline import text_tokens
from attncli.core.request import Request
from attncli.core.result import ModelInfo
from attncli.errors import AttnCliError
from attncli.models.checks.values import config_int
from attncli.models.decoding import DecodeStep, Shape
from attncli.models.family import (
    Family,
    FamilyTraits,
    Known,
    LayerAttention,
    LayerTrace,
    ModelSpec,
    Tokens,
    open_model,
)
from attncli.models.gpt2.config import Checkpoint, check_gpt2_config, gpt2_checkpoint
from attncli.models.gpt2.decode import GPT2Decoder, gpt2_shape
from attncli.models.gpt2.model import (
    check_tokens,
    gpt2_all_layers,
    gpt2_attention,
    gpt2_edited,
    gpt2_head,
    gpt2_logits,
    gpt2_trace,
    gpt2_trace_texts,
    weights_of,
)
from attncli.models.own_tokens import source_tokens
from attncli.models.sources.base import WeightSource
from attncli.models.unembed import Head, Table, held_unembedding

TRAITS = FamilyTraits(title="GPT-2", variant="gpt2", supports_tiled=False, max_tokens=1024,
                      kv_heads=False, tokenizer_file=False, norm="LayerNorm'd",
                      reads=" ln_1(h)")
LEAD = "A trained model, not the chapter-3 toy"  # how views introduce its weights


class GPT2Model:
    """One checked GPT-2 checkpoint, ready to run."""

    traits = TRAITS

    def __init__(self, ckpt: Checkpoint) -> None:
        self.ckpt = ckpt
        self._table: Table | None = None  # the unembedding held by held_logits
        self.spec = ModelSpec(architecture="gpt2", n_layer=ckpt.n_layer, num_heads=ckpt.n_head,
                              kv_heads=ckpt.n_head, head_dim=ckpt.head_dim, d_model=ckpt.n_embd,
                              windows=(None,) * ckpt.n_layer, positions=ckpt.n_positions)

    def vocabulary(self) -> WeightSource | None:
        """The weights file, where it carries its own vocabulary (a GGUF's need not be GPT-2's);
        None: tiktoken's GPT-2 encoding."""
        weights = self.ckpt.weights
        return weights.source if weights is not None and weights.source.vocabulary_inside else None

    def unchanged(self) -> None:
        """One line where a file of the checkpoint changed since it was read."""
        if self.ckpt.weights is not None:
            self.ckpt.weights.source.unchanged()

    def tokens(self, req: Request) -> Tokens:
        """tiktoken's GPT-2 encoding of the text, or the file's own vocabulary where the weights
        file carries one (a GGUF's need not be GPT-2's)."""
        source = self.vocabulary()
        if source is not None:
            return source_tokens(source, req)
        tokens, ids = text_tokens(req)
        return Tokens(tokens, ids, encoding="gpt2", tokenizer=None)

    def check_tokens(self, token_ids: list[int]) -> None:
        """Empty input, input past n_positions, or an id outside the vocabulary, refused."""
        check_tokens(self.ckpt, token_ids)

    def attention(self, token_ids: list[int], layer: int) -> LayerAttention:
        """Blocks 0..layer run; that layer's attention with every stage."""
        shown = gpt2_attention(self.ckpt, token_ids, layer)
        return LayerAttention(shown.layer, shown.inputs, shown.output)

    def attention_from(self, token_ids: list[int], layer: int,
                       known: Known | None) -> tuple[LayerAttention, list[Tensor]]:
        """Blocks known.first..layer run from a known stream; that layer's attention and the
        streams entering each block run."""
        shown = gpt2_attention(self.ckpt, token_ids, layer, known)
        return LayerAttention(shown.layer, shown.inputs, shown.output), shown.hidden_states

    def trace_from(self, token_ids: list[int], last_layer: int,
                   known: Known | None) -> Iterator[LayerTrace]:
        """Blocks known.first..last_layer whole, known outputs taken as they are."""
        return gpt2_trace(self.ckpt, token_ids, last_layer, None, known)

    def edited(self, token_ids: list[int], first: int, stream: Tensor,
               edit: Callable[[int, Tensor], Tensor],
               enter: Callable[[int, Tensor], Tensor] | None = None,
               prefix: list[Tensor] | None = None, last: int | None = None) -> Tensor:
        """Blocks first..last (None: every block from first) from stream (variants joining
        through enter; the last positions, the earlier ones prefix's) with each block's heads'
        outputs through edit."""
        return gpt2_edited(self.ckpt, token_ids, first, stream, edit, enter, prefix, last)

    def all_layers(self, token_ids: list[int]) -> Tensor:
        """Every head's weights, (layers, heads, T, T)."""
        return gpt2_all_layers(self.ckpt, token_ids)

    def trace(self, token_ids: list[int], last_layer: int,
              visible: Tensor | None = None) -> Iterator[LayerTrace]:
        """Blocks 0..last_layer one by one, whole."""
        return gpt2_trace(self.ckpt, token_ids, last_layer, visible)

    def trace_texts(self, texts: list[list[int]], last_layer: int) -> Iterator[list[LayerTrace]]:
        """trace of each of texts, run together block by block (each block read once)."""
        return gpt2_trace_texts(self.ckpt, texts, last_layer)

    def logits(self, hidden: Tensor) -> Tensor:
        """ln_f, then the tied unembedding: (T, vocab)."""
        return gpt2_logits(self.ckpt, hidden)

    def head(self) -> Head:
        """The final norm and the held unembedding, for reading logits a tile at a time."""
        return gpt2_head(self.ckpt, self._held())

    def held_logits(self, hidden: Tensor) -> Tensor:
        """logits, the whole unembedding read at the first call and kept."""
        return gpt2_logits(self.ckpt, hidden, table=self._held())

    def _held(self) -> Table:
        """The whole unembedding, read at the first call and kept."""
        if self._table is None:
            self._table = held_unembedding(weights_of(self.ckpt), "wte.weight",
                                           self.ckpt.vocab_size, self.ckpt.n_embd)
        return self._table

    def layer_input(self, token_ids: list[int], layer: int) -> tuple[Tensor, Attention]:
        """GPT-2 never takes the tiled path (traits.supports_tiled is false)."""
        raise AttnCliError("a GPT-2 checkpoint runs the naive path only")

    def info(self, layer: int | None = None) -> ModelInfo:
        """The JSON "model" object: path and shape."""
        c = self.ckpt
        return ModelInfo(str(c.path), c.n_layer, c.n_head, c.n_embd, layer, name=TRAITS.title,
                         norm=TRAITS.norm, reads=TRAITS.reads, lead=LEAD)

    def decode_shape(self) -> Shape:
        """The multiply-adds of one token through every block."""
        return gpt2_shape(self.ckpt)

    def decoder(self, layer: int, num_tokens: int, held: bool = True) -> DecodeStep:
        """Token-by-token decoding (positions come from wpe, any num_tokens), showing layer;
        held: every block's weights kept, else reread each step."""
        return GPT2Decoder(self.ckpt, layer, held)


class GPT2Family:
    """The gpt2 architecture."""

    traits = TRAITS

    def load(self, source: WeightSource, model: str, heads: int | None) -> GPT2Model:
        """The source checked as a GPT-2; heads overrides a head count config.json lacks."""
        return GPT2Model(gpt2_checkpoint(source, model, heads))

    def shape(self, config: dict[str, Any], folder: Path) -> tuple[int, int, int]:
        """Layers, heads and kv heads from config.json alone (the `models` table)."""
        check_gpt2_config(config, folder / "config.json")
        heads = config_int(config, "n_head", 12)
        return config_int(config, "n_layer", 12), heads, heads


GPT2: Family = GPT2Family()  # mypy checks it against the protocol


def resolve_checkpoint(model: str, heads: int | None = None) -> Checkpoint:
    """A hub name or a path as a checked GPT-2 Checkpoint; heads overrides the inferred count."""
    loaded = open_model(model, heads)
    if not isinstance(loaded, GPT2Model):
        raise AttnCliError(f"{model} is a {loaded.spec.architecture} checkpoint, not GPT-2")
    return loaded.ckpt
