"""A Llama-family checkpoint decoded token by token, every layer with its own key/value cache
(step.py: one token through one block, and the cache it reads and writes).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from attncli.core.measures import value_norms
from attncli.models.decoding import (
    DecodedToken,
    Shape,
    prefill_queries,
    prefill_spans,
    release_freed,
)
from attncli.models.llama.block import embed
from attncli.models.llama.config import LlamaSpec
from attncli.models.llama.model import llama_logits, scale_scores, soft_cap
from attncli.models.llama.rope import LayerRopes, StepRopes
from attncli.models.llama.step import LayerCache, StepBlock, as_cached, attend
from attncli.models.sources.gguf.qmatmul import as_llama_cpp
from attncli.models.sources.named import Named
from attncli.models.unembed import Table, held_unembedding


def llama_shape(spec: LlamaSpec) -> Shape:
    """Per layer and token: q and o (d·heads·hd each), k and v (d·kv_heads·hd each), SwiGLU."""
    d, q_width = spec.d_model, spec.num_heads * spec.head_dim
    kv_width = spec.kv_heads * spec.head_dim
    projections = 2 * d * q_width + 2 * d * kv_width  # q_proj, o_proj; k_proj, v_proj
    mlp = (3 if spec.gated_mlp else 2) * d * spec.d_ff  # gate_proj, up_proj, down_proj
    return Shape(layers=spec.n_layer, d_in=d, d_out=q_width, token_macs=projections + mlp,
                 kv_width=kv_width, head_weights=spec.vocab_size * d,
                 row_bytes=prefill_row_bytes(spec))


def window_rows(start: int, end: int, num_tokens: int, window: int | None) -> Tensor:
    """window_mask(num_tokens, window)[start:end]: True where query q may not look."""
    queries = torch.arange(start, end).unsqueeze(1)  # (C, 1)
    keys = torch.arange(num_tokens).unsqueeze(0)  # (1, T)
    mask = keys > queries  # (C, T) the future
    if window is not None:
        mask |= keys <= queries - window  # (C, T) keys older than the window
    return mask


def prefill_row_bytes(spec: LlamaSpec) -> int:
    """The widest intermediates one prompt row holds in a block's parts that work row by row:
    the feed-forward's [gate | up] product, act(gate) and their product (4 · d_ff floats; 2
    without a gate), or the [q | k | v] product and its heads turned (twice their width)."""
    mlp = (4 if spec.gated_mlp else 2) * spec.d_ff
    qkv = 2 * (spec.num_heads + 2 * spec.kv_heads) * spec.head_dim
    return 4 * max(mlp, qkv)


def _prefill_context(spec: LlamaSpec, layer: int, queries: Tensor, cache: LayerCache) -> None:
    """Every prompt query, queries (T, heads · hd), over the cache's T keys, causal and
    windowed as the step reads them, in float64 as the step's scores are; each chunk's context
    written over its own queries (a chunk reads no other row): queries becomes the context
    (T, heads · hd). A chunk's queries of a kv head are one (g · C, hd) matrix against its
    keys, as the step's group is (no copy of the keys or values per query head); nothing of a
    chunk outlives it (a list of the chunks' contexts, joined at the end, left the allocator's
    heap holding 0.5 GB of freed stages between them on a 1B's 2,000-token prompt)."""
    num_tokens, window = queries.shape[0], spec.layer_windows[layer]
    kv, group, hd = spec.kv_heads, spec.group_size, spec.head_dim
    cached = as_llama_cpp()
    keys = cache.keys.double().transpose(1, 2)  # (kv, hd, T)
    values = cache.values  # (kv, T, hd)
    chunk = prefill_queries(spec.num_heads, num_tokens)
    for start in range(0, num_tokens, chunk):
        end = min(start + chunk, num_tokens)
        grouped = queries[start:end].view(end - start, kv, group, hd)  # (C, kv, g, hd)
        rows = as_cached(grouped, cached).permute(1, 2, 0, 3).double().reshape(
            kv, -1, hd)  # (kv, g · C, hd)
        attn_scores = torch.bmm(rows, keys).view(kv, group, end - start,
                                                 num_tokens)  # (kv, g, C, T)
        scaled = scale_scores(spec, attn_scores)  # (kv, g, C, T), a tensor of its own
        del attn_scores, rows
        capped = soft_cap(spec, scaled)
        # Query q sees keys q - window + 1 .. q: the window mask's rows start..end, built
        # alone (the whole (T, T) mask of a long prompt would be T² bytes).
        mask = window_rows(start, end, num_tokens, window)  # (C, T)
        masked = (scaled if capped is None else capped).masked_fill_(mask, -torch.inf)
        del scaled, capped
        attn_weights = torch.softmax(masked, dim=-1).to(queries.dtype)  # (kv, g, C, T)
        del masked
        context = torch.bmm(as_cached(attn_weights, cached).view(kv, -1, num_tokens),
                            values)  # (kv, g · C, hd)
        del attn_weights
        grouped.copy_(context.view(kv, group, end - start, hd).permute(2, 0, 1, 3))


class LlamaDecoder:
    """Every layer for one token at a time; the shown layer's weights and attention output.

    held: every layer's weights read once and kept (fast steps, the whole model in memory);
    else each step reads each layer's weights again from the source (one layer in memory).
    """

    def __init__(self, weights: Named, spec: LlamaSpec, num_tokens: int, layer: int,
                 held: bool = True) -> None:
        self.weights, self.spec, self.layer = weights, spec, layer
        self.read, self.held = (weights.reading_once(held=True) if held else weights), held
        self._table: Table | None = None  # the whole unembedding, held at the first logits
        self.caches = [LayerCache(spec, num_tokens) for _ in range(spec.n_layer)]
        self.ropes = LayerRopes(spec, num_tokens)  # each (T, rotary_dim), or None (NoPE)
        self.step_ropes = StepRopes(self.ropes, spec.head_dim)  # a step's row of them
        self._held_blocks: list[StepBlock] = []  # held: every layer resolved once, at a first step

    def _block(self, layer: int) -> StepBlock:
        """Block layer resolved: once for a held decoder, else (reading again) at each step."""
        if not self.held:
            return StepBlock.of(self.read, self.spec, layer)
        if not self._held_blocks:
            self._held_blocks = [StepBlock.of(self.read, self.spec, i)
                                 for i in range(self.spec.n_layer)]
        return self._held_blocks[layer]

    def _through(self, block: StepBlock, layer: int, cache: LayerCache, x: Tensor, t: int,
                 cached: bool) -> tuple[Tensor, Tensor, Tensor]:
        """Token t's stream x (1, d_model) through block layer: its weights (heads, t+1),
        attention output (1, d_model) and the stream leaving the block (1, d_model)."""
        attn_input = x if block.attn_norm is None else block.attn_norm(x)  # (1, d_model)
        attn_weights, attn_out = attend(block, self.spec, cache, attn_input,
                                         self.step_ropes.row(layer, t), cached)
        return attn_weights, attn_out, block.finish(x, attn_out)

    @torch.no_grad()
    def step(self, token_id: int, position: int) -> tuple[Tensor, Tensor]:
        """Token at position through every layer: the shown one's (heads, t+1), (d_model,)."""
        every, outputs, _ = self._blocks(token_id, position)
        return every[self.layer], outputs[self.layer][0]  # (heads, t+1), (d_model,)

    @torch.no_grad()
    def step_layers(self, token_id: int, position: int) -> tuple[Tensor, Tensor]:
        """Token at position through every layer: each layer's weights (layers, heads, t+1)
        over its cache, and the logits of the next token (vocab,)."""
        every, _, hidden = self._blocks(token_id, position)
        if self.held and self._table is None:
            self._table = held_unembedding(self.read, "embed_tokens.weight",
                                           self.spec.vocab_size, self.spec.d_model,
                                           self.spec.head_name)  # (vocab, d_model)
        logits = llama_logits(self.read, self.spec, hidden, self._table)  # (1, vocab)
        return torch.stack(every), logits[0]  # (layers, heads, t+1), (vocab,)

    def _blocks(self, token_id: int, position: int) -> tuple[list[Tensor], list[Tensor], Tensor]:
        """Every layer's weights (heads, t+1) and attention output (1, d_model), and the
        residual stream leaving the last block (1, d_model)."""
        x = embed(self.read, self.spec, [token_id])  # (1, d_model); no position embedding
        every: list[Tensor] = []
        outputs: list[Tensor] = []
        cached = as_llama_cpp()
        for i, cache in enumerate(self.caches):
            attn_weights, attn_out, x = self._through(self._block(i), i, cache, x, position,
                                                      cached)
            every.append(attn_weights)  # (heads, t+1)
            outputs.append(attn_out)  # (1, d_model)
        return every, outputs, x

    @torch.no_grad()
    def decode_by_layer(self, token_ids: list[int]) -> list[DecodedToken]:
        """Every token through layer 0, then layer 1, ...: each token's step is step()'s own
        arithmetic on (1, d_model) rows, but one layer's weights are held at a time, and a
        layer's cache is dropped once its bytes are counted."""
        # Rows one by one, as step() reads them: each (1, d_model).
        rows = [embed(self.weights, self.spec, [token_id]) for token_id in token_ids]
        cache_bytes = [0] * len(token_ids)  # every layer's cache after token t
        shown: list[tuple[Tensor, Tensor]] = []
        cached = as_llama_cpp()
        for i in range(self.spec.n_layer):
            read, cache = self.weights.reading_once(), LayerCache(self.spec, len(rows))
            block = StepBlock.of(read, self.spec, i)
            for t, x in enumerate(rows):
                attn_weights, attn_out, rows[t] = self._through(block, i, cache, x, t, cached)
                cache_bytes[t] += cache.keys.nbytes + cache.values.nbytes
                if i == self.layer:
                    shown.append((attn_weights, attn_out[0]))  # (heads, t+1), (d_model,)
            del read, cache, block  # layer i's weights and cache go before layer i + 1's are read
        return [DecodedToken(w, c, b) for (w, c), b in zip(shown, cache_bytes, strict=True)]

    @torch.no_grad()
    def prefill(self, token_ids: list[int]) -> None:
        """Tokens 0..T-1 through every layer in one pass, each layer's cache filled with their
        keys and values, as T steps would fill it (no weights or logits kept: a generation's
        prompt). Only on an empty cache. The block's parts that work row by row take the
        prompt a span of rows at a time (prefill_spans): what a layer holds beside its cache
        is its stream and its queries (T, d_model) and (T, heads · hd), and one span's work."""
        assert all(c.length == 0 for c in self.caches), "prefill starts a decode"
        read, spec, n = self.read, self.spec, len(token_ids)
        spans = prefill_spans(n, prefill_row_bytes(spec))
        x = embed(read, spec, token_ids)  # (T, d_model), each block's output written over it
        cached = as_llama_cpp()
        for i, cache in enumerate(self.caches):
            block, tables = StepBlock.of(read, spec, i), self.ropes[i]
            queries = x.new_empty(n, spec.num_heads * spec.head_dim)  # (T, heads · hd)
            for start, end in spans:  # each span's keys and values appended in order
                rows = x[start:end]  # (C, d_model)
                heads = block.projection(rows if block.attn_norm is None else
                                         block.attn_norm(rows), None if tables is None else
                                         (tables[0][start:end], tables[1][start:end]))
                cache.append(as_cached(heads.keys_rope, cached),
                             as_cached(heads.values, cached))  # (kv, end, hd)
                queries[start:end].view(end - start, spec.num_heads, spec.head_dim).copy_(
                    heads.queries_rope.transpose(0, 1))  # (C, heads, hd)
                del heads
            _prefill_context(spec, i, queries, cache)  # queries now the context (T, h · hd)
            release_freed()  # the attention's stages go back before the feed-forward's come
            for start, end in spans:
                x[start:end] = block.finish(x[start:end],
                                            block.o_proj(queries[start:end]))  # (C, d_model)
            del block, queries
            release_freed()  # and the feed-forward's before the next layer's

    def keep(self, tokens: int) -> int:
        """Every layer's cache cut to the tokens every one holds, at most tokens: how many."""
        held = min([tokens] + [cache.length for cache in self.caches])
        for cache in self.caches:
            cache.length = held
        return held

    @torch.no_grad()
    def value_norms(self) -> Tensor:
        """‖W_O^h v_j^h‖ of every layer's cached values (each layer's W_O as float32, one at
        a time): (layers, heads, t)."""
        norms, scratch = [], None  # scratch: one float32 W_O, written again by each layer
        for i, cache in enumerate(self.caches):
            values = cache.values.float().repeat_interleave(self.spec.group_size,
                                                            dim=0)  # (heads, t, hd)
            name = f"layers.{i}.self_attn.o_proj.weight"
            quantized = self.read.quantized(name)
            if quantized is not None and (scratch is None or scratch.shape != quantized.shape):
                scratch = np.empty(quantized.shape, dtype=np.float32)  # (d, heads · hd)
            w_o = self.read[name] if quantized is None else \
                quantized.dequantized(into=scratch)  # (d, heads · hd)
            norms.append(value_norms(values, w_o))  # (heads, t)
        return torch.stack(norms)  # (layers, heads, t)

    def cache_bytes(self) -> int:
        """Bytes of every layer's keys and values so far (kv_heads per token, not heads)."""
        return sum(c.keys.nbytes + c.values.nbytes for c in self.caches)
