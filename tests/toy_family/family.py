"""The "toyarch" family: token embeddings and one chapter-3 MultiHeadAttention layer, nothing else.

It exists to show what a family needs: a Family with traits, load(), and a Model offering the
protocol's methods. It never opens a file: its tensors come from the weight source by name.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from attncli.core.attention import Attention, MultiHeadAttention
from attncli.core.pipeline import text_tokens
from attncli.core.request import Request
from attncli.core.result import ModelInfo
from attncli.errors import AttnCliError
from attncli.models.decoding import DecodeStep, Shape
from attncli.models.family import FamilyTraits, LayerAttention, ModelSpec, Tokens
from attncli.models.sources.base import WeightSource

TRAITS = FamilyTraits(title="Toy", variant="toyarch", supports_tiled=False, max_tokens=64,
                      kv_heads=False, tokenizer_file=False, norm="un-normalised")


class ToyModel:
    """One toyarch checkpoint."""

    traits = TRAITS

    def __init__(self, source: WeightSource, heads: int) -> None:
        vocab, d = source.shapes()["embed.weight"]
        self.source = source
        self.spec = ModelSpec(architecture="toyarch", n_layer=1, num_heads=heads, kv_heads=heads,
                              head_dim=d // heads, d_model=d, windows=(None,))
        with torch.device("meta"):  # every parameter is replaced just below
            self.attn = MultiHeadAttention(d_in=d, d_out=d, num_heads=heads, qkv_bias=False)
        self.attn.load_state_dict({
            "W_query.weight": source.tensor("attn.q.weight"),  # (d, d)
            "W_key.weight": source.tensor("attn.k.weight"),  # (d, d)
            "W_value.weight": source.tensor("attn.v.weight"),  # (d, d)
            "out_proj.weight": source.tensor("attn.o.weight"),  # (d, d)
            "out_proj.bias": source.tensor("attn.o.bias"),  # (d,)
        }, assign=True)
        self.attn.eval()
        self.vocab = vocab

    def vocabulary(self) -> WeightSource | None:
        return None  # tiktoken's GPT-2 ids, folded into the toy's vocabulary

    def unchanged(self) -> None:
        self.source.unchanged()

    def tokens(self, req: Request) -> Tokens:
        tokens, ids = text_tokens(req)
        return Tokens(tokens, [i % self.vocab for i in ids], encoding="gpt2", tokenizer=None)

    def check_tokens(self, token_ids: list[int]) -> None:
        if not token_ids:
            raise AttnCliError("no tokens to run: the text is empty")

    def _inputs(self, token_ids: list[int]) -> Tensor:
        self.check_tokens(token_ids)
        return self.source.rows("embed.weight", token_ids)  # (T, d)

    @torch.no_grad()
    def attention(self, token_ids: list[int], layer: int) -> LayerAttention:
        x = self._inputs(token_ids)  # (T, d)
        return LayerAttention(self.spec.layer_index(layer), x, self.attn(x))

    def all_layers(self, token_ids: list[int]) -> Tensor:
        return self.attention(token_ids, 0).output.weights.unsqueeze(0)  # (1, heads, T, T)

    def layer_input(self, token_ids: list[int], layer: int) -> tuple[Tensor, Attention]:
        raise AttnCliError("the toy family has no tiled path")

    def info(self, layer: int | None = None) -> ModelInfo:
        s = self.spec
        return ModelInfo(str(self.source.path), s.n_layer, s.num_heads, s.d_model, layer,
                         name=TRAITS.title, norm=TRAITS.norm)

    def decode_shape(self) -> Shape:
        d = self.spec.d_model
        return Shape(layers=1, d_in=d, d_out=d, token_macs=4 * d * d)

    def decoder(self, layer: int, num_tokens: int) -> DecodeStep:
        return ToyDecoder(self)


class ToyDecoder:
    """The one layer, a token at a time, its keys and values cached."""

    def __init__(self, model: ToyModel) -> None:
        self.model = model
        heads, head_dim = model.spec.num_heads, model.spec.head_dim
        self.keys = torch.empty(heads, 0, head_dim)  # (heads, 0, head_dim)
        self.values = torch.empty(heads, 0, head_dim)  # (heads, 0, head_dim)

    @torch.no_grad()
    def step(self, token_id: int, position: int) -> tuple[Tensor, Tensor]:
        attn = self.model.attn
        x = self.model.source.rows("embed.weight", [token_id])  # (1, d)
        queries, keys, values = attn.heads_qkv(x)  # each (heads, 1, head_dim)
        self.keys = torch.cat([self.keys, keys], dim=1)  # (heads, t+1, head_dim)
        self.values = torch.cat([self.values, values], dim=1)  # (heads, t+1, head_dim)
        scores = queries @ self.keys.transpose(1, 2) / math.sqrt(queries.shape[-1])  # (h, 1, t+1)
        weights = torch.softmax(scores, dim=-1)  # (heads, 1, t+1)
        context = attn.combine(weights @ self.values)  # (1, d)
        return weights[:, 0], context[0]  # (heads, t+1), (d,)

    def cache_bytes(self) -> int:
        return self.keys.nbytes + self.values.nbytes


class ToyFamily:
    traits = TRAITS

    def load(self, source: WeightSource, model: str, heads: int | None) -> ToyModel:
        return ToyModel(source, heads or int(source.config().get("num_heads", 1)))

    def shape(self, config: dict[str, Any], folder: Path) -> tuple[int, int, int]:
        heads = int(config.get("num_heads", 1))
        return 1, heads, heads


TOY = ToyFamily()
