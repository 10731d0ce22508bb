"""A GPT-2 checkpoint decoded token by token, every layer with its own key/value cache."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from attncli.core.attention import MultiHeadAttention, causal_mask
from attncli.core.measures import value_norms
from attncli.models.decoding import DecodedToken, Shape
from attncli.models.gpt2.config import Checkpoint
from attncli.models.gpt2.model import (
    feed_forward,
    gpt2_logits,
    layer_norm,
    load_attention,
    weights_of,
)
from attncli.models.sources.named import Named
from attncli.models.unembed import Table, held_unembedding


@dataclass
class _Block:
    """One block's attention module and its two caches, (heads, t, head_dim) each."""

    name: str
    layer: int
    attn: MultiHeadAttention | None  # None: built from the weights at each step (not held)
    k_cache: Tensor
    v_cache: Tensor


def gpt2_shape(ckpt: Checkpoint) -> Shape:
    """Per layer and token: c_attn (3·d²), c_proj (d²) and the MLP (2·d·n_inner)."""
    d = ckpt.n_embd
    return Shape(layers=ckpt.n_layer, d_in=d, d_out=d, token_macs=4 * d * d + 2 * d * ckpt.n_inner,
                 head_weights=ckpt.vocab_size * d)


def _attend(attn: MultiHeadAttention, block: _Block, x: Tensor,
            head_dim: int) -> tuple[Tensor, Tensor]:
    """One new token (1, d) against its block's cache: weights (heads, t+1), output (1, d)."""
    queries, keys, values = (attn.split_heads(t) for t in attn.project(x))  # (heads, 1, hd)
    block.k_cache = torch.cat([block.k_cache, keys], dim=1)  # (heads, t+1, head_dim)
    block.v_cache = torch.cat([block.v_cache, values], dim=1)  # (heads, t+1, head_dim)
    scores = queries @ block.k_cache.transpose(1, 2) / math.sqrt(head_dim)  # (heads, 1, t+1)
    attn_weights = torch.softmax(scores, dim=-1)  # (heads, 1, t+1)
    heads_context = (attn_weights @ block.v_cache).transpose(0, 1).reshape(1, -1)  # (1, d)
    return attn_weights[:, 0], attn.out_proj(heads_context)  # (heads, t+1), (1, d)


class GPT2Decoder:
    """Every block for one token at a time; the shown layer's weights and attention output.

    held: every block's weights read once and kept; else each step reads them again.
    """

    def __init__(self, ckpt: Checkpoint, layer: int, held: bool = True) -> None:
        self.ckpt, self.layer, self.held = ckpt, layer, held
        # Held, the weights are read once; each lookup of a plain view reads the file again.
        self.weights = weights_of(ckpt).reading_once(held=True) if held else weights_of(ckpt)
        self.blocks = [self._block(self.weights, i) for i in range(ckpt.n_layer)]
        self._table: Table | None = None  # the whole unembedding, held at the first logits

    def _block(self, weights: Named, layer: int) -> _Block:
        """Block layer with an empty cache; its attention module only where weights are held."""
        empty = torch.empty(self.ckpt.n_head, 0, self.ckpt.head_dim)  # (heads, 0, head_dim)
        attn = load_attention(weights, self.ckpt, layer) if self.held else None
        return _Block(f"h.{layer}", layer, attn, empty, empty)

    def _through(self, weights: Named, block: _Block, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """One token's stream x (1, d) through block: its weights (heads, t+1), attention
        output (1, d) and the stream leaving the block (1, d)."""
        ckpt, eps = self.ckpt, self.ckpt.layer_norm_epsilon
        attn = block.attn or load_attention(weights, ckpt, block.layer)
        attn_weights, attn_out = _attend(attn, block, layer_norm(weights, f"{block.name}.ln_1",
                                                                 x, eps), ckpt.head_dim)
        x = x + attn_out  # (1, d)
        x = x + feed_forward(weights, ckpt, block.name,
                             layer_norm(weights, f"{block.name}.ln_2", x, eps))  # (1, d)
        return attn_weights, attn_out, x

    def _embed(self, token_id: int, position: int) -> Tensor:
        """Token embedding plus position embedding (1, d)."""
        weights = self.weights
        return weights.rows("wte.weight", [token_id]) + weights.rows("wpe.weight", [position])

    @torch.no_grad()
    def step(self, token_id: int, position: int) -> tuple[Tensor, Tensor]:
        """Token at position through every block: the shown one's (heads, t+1) and (d,)."""
        every, outputs, _ = self._blocks(token_id, position)
        return every[self.layer], outputs[self.layer][0]  # (heads, t+1), (d,)

    @torch.no_grad()
    def step_layers(self, token_id: int, position: int) -> tuple[Tensor, Tensor]:
        """Token at position through every block: each block's weights (layers, heads, t+1)
        over its cache, and the logits of the next token (vocab,)."""
        every, _, hidden = self._blocks(token_id, position)
        if self.held and self._table is None:
            self._table = held_unembedding(self.weights, "wte.weight", self.ckpt.vocab_size,
                                           self.ckpt.n_embd)  # (vocab, d)
        logits = gpt2_logits(self.ckpt, hidden, self.weights, self._table)  # (1, vocab)
        return torch.stack(every), logits[0]  # (layers, heads, t+1), (vocab,)

    def _blocks(self, token_id: int, position: int) -> tuple[list[Tensor], list[Tensor], Tensor]:
        """Every block's weights (heads, t+1) and attention output (1, d), and the residual
        stream leaving the last block (1, d)."""
        x = self._embed(token_id, position)  # (1, d)
        every: list[Tensor] = []
        outputs: list[Tensor] = []
        for block in self.blocks:
            attn_weights, attn_out, x = self._through(self.weights, block, x)
            every.append(attn_weights)  # (heads, t+1)
            outputs.append(attn_out)  # (1, d)
        return every, outputs, x

    @torch.no_grad()
    def decode_by_layer(self, token_ids: list[int]) -> list[DecodedToken]:
        """Every token through block 0, then block 1, ...: step()'s arithmetic on each (1, d)
        row, one block's weights held at a time and its cache dropped once counted."""
        rows = [self._embed(token_id, t) for t, token_id in enumerate(token_ids)]  # (1, d)
        cache_bytes = [0] * len(token_ids)  # every block's cache after token t
        shown: list[tuple[Tensor, Tensor]] = []
        plain = weights_of(self.ckpt)
        for i in range(self.ckpt.n_layer):
            read = plain.reading_once()  # block i's tensors, read once, dropped after it
            empty = torch.empty(self.ckpt.n_head, 0, self.ckpt.head_dim)  # (heads, 0, hd)
            block = _Block(f"h.{i}", i, load_attention(read, self.ckpt, i), empty, empty)
            for t, x in enumerate(rows):
                attn_weights, attn_out, rows[t] = self._through(read, block, x)
                cache_bytes[t] += block.k_cache.nbytes + block.v_cache.nbytes
                if i == self.layer:
                    shown.append((attn_weights, attn_out[0]))  # (heads, t+1), (d,)
            del read, block  # block i's weights and cache go before block i + 1's are read
        return [DecodedToken(w, c, b) for (w, c), b in zip(shown, cache_bytes, strict=True)]

    @torch.no_grad()
    def prefill(self, token_ids: list[int]) -> None:
        """Tokens 0..T-1 through every block in one pass, each block's cache filled with their
        keys and values, as T steps would fill it (no weights or logits kept). Only on an empty
        cache."""
        assert all(b.k_cache.shape[1] == 0 for b in self.blocks), "prefill starts a decode"
        ckpt, weights, eps = self.ckpt, self.weights, self.ckpt.layer_norm_epsilon
        n = len(token_ids)
        x = weights.rows("wte.weight", token_ids) + weights.rows("wpe.weight", list(range(n)))
        mask = causal_mask(n)  # (T, T) True where a query may not look: the future
        for block in self.blocks:  # x: (T, d) above
            attn = block.attn or load_attention(weights, ckpt, block.layer)
            queries, block.k_cache, block.v_cache = attn.heads_qkv(
                layer_norm(weights, f"{block.name}.ln_1", x, eps))  # (heads, T, hd) each
            scores = queries @ block.k_cache.transpose(1, 2) / math.sqrt(ckpt.head_dim)
            attn_weights = torch.softmax(scores.masked_fill(mask, -torch.inf), dim=-1)
            heads_context = (attn_weights @ block.v_cache).transpose(0, 1).reshape(n, -1)
            x = x + attn.out_proj(heads_context)  # (T, d)
            x = x + feed_forward(weights, ckpt, block.name,
                                 layer_norm(weights, f"{block.name}.ln_2", x, eps))  # (T, d)

    def keep(self, tokens: int) -> int:
        """Every block's cache cut to the tokens every one holds, at most tokens: how many."""
        held = min([tokens] + [b.v_cache.shape[1] for b in self.blocks])
        for block in self.blocks:
            block.k_cache, block.v_cache = block.k_cache[:, :held], block.v_cache[:, :held]
        return held

    @torch.no_grad()
    def value_norms(self) -> Tensor:
        """‖W_O^h v_j^h‖ of every block's cached values: (layers, heads, t)."""
        norms = []
        for block in self.blocks:
            attn = block.attn or load_attention(self.weights, self.ckpt, block.layer)
            norms.append(value_norms(block.v_cache.float(),
                                     attn.out_proj.weight))  # (heads, t); W_O (d, heads · hd)
        return torch.stack(norms)  # (layers, heads, t)

    def cache_bytes(self) -> int:
        """Bytes of every block's keys and values so far."""
        return sum(b.k_cache.nbytes + b.v_cache.nbytes for b in self.blocks)
