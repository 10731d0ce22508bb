"""A Llama-family checkpoint decoded token by token, every layer with its own key/value cache.

The cache of a layer holds kv_heads keys and values per token, not one per query head: under
grouped-query attention (GQA) the group_size query heads of a group read the same cached head.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from attncli.core.measures import value_norms
from attncli.models.decoding import DecodedToken, Shape, prefill_queries, release_freed
from attncli.models.llama.block import attention_input, embed, finish_block, linear
from attncli.models.llama.config import LlamaSpec
from attncli.models.llama.model import llama_logits, project, scale_scores, soft_cap
from attncli.models.llama.rope import LayerRopes, RopeRow, StepRopes
from attncli.models.sources.gguf.qmatmul import as_llama_cpp
from attncli.models.sources.named import Named
from attncli.models.unembed import Table, held_unembedding


class _LayerCache:
    """One layer's cache: keys (after RoPE) and values of every token so far, written in place
    into buffers of the decode's length (a step copies its own row, not the whole cache)."""

    def __init__(self, spec: LlamaSpec, capacity: int) -> None:
        self.shape, self.capacity, self.length = (spec.kv_heads, spec.head_dim), capacity, 0
        self._keys: Tensor | None = None  # (kv_heads, capacity, head_dim) once a row comes
        self._values: Tensor | None = None

    @property
    def keys(self) -> Tensor:
        """(kv_heads, t, head_dim): the keys so far, a view of the buffer."""
        return self._view(self._keys)

    @property
    def values(self) -> Tensor:
        """(kv_heads, t, head_dim): the values so far, a view of the buffer."""
        return self._view(self._values)

    def _view(self, buffer: Tensor | None) -> Tensor:
        if buffer is None:
            return torch.empty(self.shape[0], 0, self.shape[1])  # (kv_heads, 0, head_dim)
        return buffer[:, :self.length]  # (kv_heads, t, head_dim)

    def seen(self, start: int) -> tuple[Tensor, Tensor]:
        """(kv_heads, t - start, head_dim) each: the keys and values from start on, views."""
        return self.keys[:, start:], self.values[:, start:]

    def append(self, keys: Tensor, values: Tensor) -> None:
        """Add n tokens' keys and values (kv_heads, n, head_dim) each after the ones held."""
        end = self.length + keys.shape[1]
        if self._keys is None or self._values is None or end > self._keys.shape[1]:
            size = max(end, self.capacity)  # past the decode's length: a larger buffer
            self._keys = self._grown(self._keys, keys, size)  # (kv_heads, size, head_dim)
            self._values = self._grown(self._values, values, size)
        self._keys[:, self.length:end] = keys
        self._values[:, self.length:end] = values
        self.length = end

    def _grown(self, buffer: Tensor | None, like: Tensor, size: int) -> Tensor:
        """A buffer of size tokens (like's dtype and device) holding buffer's tokens so far."""
        grown = like.new_empty(self.shape[0], size, self.shape[1])  # (kv_heads, size, hd)
        if buffer is not None:
            grown[:, :self.length] = buffer[:, :self.length]
        return grown


def llama_shape(spec: LlamaSpec) -> Shape:
    """Per layer and token: q and o (d·heads·hd each), k and v (d·kv_heads·hd each), SwiGLU."""
    d, q_width = spec.d_model, spec.num_heads * spec.head_dim
    kv_width = spec.kv_heads * spec.head_dim
    projections = 2 * d * q_width + 2 * d * kv_width  # q_proj, o_proj; k_proj, v_proj
    mlp = (3 if spec.gated_mlp else 2) * d * spec.d_ff  # gate_proj, up_proj, down_proj
    return Shape(layers=spec.n_layer, d_in=d, d_out=q_width, token_macs=projections + mlp,
                 kv_width=kv_width, head_weights=spec.vocab_size * d)


def _as_cached(t: Tensor, cached: bool) -> Tensor:
    """t as the cache's arithmetic holds it: float16 under llama.cpp's numerics (cached: its
    KV cache, and the queries and weights its float16 products round), else unchanged."""
    return t.to(torch.float16).to(t.dtype) if cached else t


def _attend(weights: Named, spec: LlamaSpec, layer: int, cache: _LayerCache, x: Tensor,
            rope: RopeRow | None) -> tuple[Tensor, Tensor]:
    """Token t (1, d_model) against layer's cache: weights (heads, t+1), output (1, d_model)."""
    kv_heads, cached = spec.kv_heads, as_llama_cpp()
    # Only token t is projected (q/k norms and RoPE at position t, as the full pass does):
    # the cache already holds the rotated keys of 0..t-1.
    heads = project(weights, spec, layer, x, None)  # queries (heads, 1, hd), keys (kv, 1, hd)
    queries, keys = heads.queries_rope, heads.keys_rope  # (heads, 1, hd), (kv, 1, hd)
    if rope is not None:
        queries, keys = rope.turn(queries), rope.turn(keys)
    # GQA: the group_size query heads of a group read one cached head, which is never copied.
    grouped = _as_cached(queries, cached).reshape(kv_heads, spec.group_size,
                                                  spec.head_dim)  # (kv, group, hd)
    cache.append(_as_cached(keys, cached), _as_cached(heads.values, cached))  # (kv, t+1, hd)
    cache_len, window = cache.length, spec.layer_windows[layer]
    # Sliding window: query t sees keys t - window + 1 .. t; older ones stay in the cache unread.
    start = 0 if window is None else max(0, cache_len - window)
    seen_keys, seen_values = cache.seen(start)  # (kv, n, hd) each, views of the buffers
    # Scores and softmax in float64, rounded once to the model dtype: the step's weights differ
    # from the full pass only by that pass's own rounding, not by two roundings added up.
    attn_scores = torch.bmm(grouped.double(),
                            seen_keys.double().transpose(1, 2))  # (kv, group, n)
    scaled = scale_scores(spec, attn_scores)  # (kv, group, n)
    capped = soft_cap(spec, scaled)  # Gemma 2: cap · tanh(scaled / cap), else None
    attn_weights = torch.softmax(scaled if capped is None else capped,
                                 dim=-1).to(grouped.dtype)  # (kv, group, n)
    heads_context = torch.bmm(_as_cached(attn_weights, cached),
                              seen_values).view(1, -1)  # (1, heads · hd)
    shown = attn_weights.view(spec.num_heads, -1)  # (heads, n)
    if start:  # (heads, t+1): 0 on the keys before the window
        shown = torch.cat([shown.new_zeros(spec.num_heads, start), shown], dim=1)
    return shown, linear(weights, f"layers.{layer}.self_attn.o_proj",
                         heads_context)  # (heads, t+1), (1, d)


def window_rows(start: int, end: int, num_tokens: int, window: int | None) -> Tensor:
    """window_mask(num_tokens, window)[start:end]: True where query q may not look."""
    queries = torch.arange(start, end).unsqueeze(1)  # (C, 1)
    keys = torch.arange(num_tokens).unsqueeze(0)  # (1, T)
    mask = keys > queries  # (C, T) the future
    if window is not None:
        mask |= keys <= queries - window  # (C, T) keys older than the window
    return mask


def _prefill_context(spec: LlamaSpec, layer: int, queries: Tensor,
                     cache: _LayerCache) -> Tensor:
    """Every prompt query (heads, T, hd) over the cache's T keys, causal and windowed as the
    step reads them, in float64 as the step's scores are: the context (T, heads · hd). A
    chunk's queries of a kv head are one (g · C, hd) matrix against its keys, as the step's
    group is (no copy of the keys or values per query head)."""
    num_tokens, window = queries.shape[1], spec.layer_windows[layer]
    kv, group, hd = spec.kv_heads, spec.group_size, spec.head_dim
    cached = as_llama_cpp()
    grouped = _as_cached(queries, cached).view(kv, group, num_tokens, hd)  # (kv, g, T, hd)
    keys = cache.keys.double().transpose(1, 2)  # (kv, hd, T)
    values = cache.values  # (kv, T, hd)
    parts, chunk = [], prefill_queries(spec.num_heads, num_tokens)
    for start in range(0, num_tokens, chunk):
        end = min(start + chunk, num_tokens)
        rows = grouped[:, :, start:end].double().reshape(kv, -1, hd)  # (kv, g · C, hd)
        attn_scores = torch.bmm(rows, keys).view(kv, group, end - start,
                                                 num_tokens)  # (kv, g, C, T)
        scaled = scale_scores(spec, attn_scores)  # (kv, g, C, T), a tensor of its own
        del attn_scores
        capped = soft_cap(spec, scaled)
        # Query q sees keys q - window + 1 .. q: the window mask's rows start..end, built
        # alone (the whole (T, T) mask of a long prompt would be T² bytes).
        mask = window_rows(start, end, num_tokens, window)  # (C, T)
        masked = (scaled if capped is None else capped).masked_fill_(mask, -torch.inf)
        del scaled, capped
        attn_weights = torch.softmax(masked, dim=-1).to(grouped.dtype)  # (kv, g, C, T)
        context = torch.bmm(_as_cached(attn_weights, cached).view(kv, -1, num_tokens),
                            values)  # (kv, g · C, hd)
        parts.append(context.view(spec.num_heads, end - start, hd))
    return torch.cat(parts, dim=1).transpose(0, 1).reshape(num_tokens, -1)  # (T, heads · hd)


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
        self.caches = [_LayerCache(spec, num_tokens) for _ in range(spec.n_layer)]
        self.ropes = LayerRopes(spec, num_tokens)  # each (T, rotary_dim), or None (NoPE)
        self.step_ropes = StepRopes(self.ropes, spec.head_dim)  # a step's row of them

    def _through(self, read: Named, layer: int, cache: _LayerCache, x: Tensor,
                 t: int) -> tuple[Tensor, Tensor, Tensor]:
        """Token t's stream x (1, d_model) through block layer: its weights (heads, t+1),
        attention output (1, d_model) and the stream leaving the block (1, d_model)."""
        attn_input = attention_input(read, self.spec, layer, x)  # (1, d_model)
        attn_weights, attn_out = _attend(read, self.spec, layer, cache, attn_input,
                                         self.step_ropes.row(layer, t))
        return attn_weights, attn_out, finish_block(read, self.spec, layer, x, attn_out)

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
        for i, cache in enumerate(self.caches):
            attn_weights, attn_out, x = self._through(self.read, i, cache, x, position)
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
        for i in range(self.spec.n_layer):
            read, cache = self.weights.reading_once(), _LayerCache(self.spec, len(rows))
            for t, x in enumerate(rows):
                attn_weights, attn_out, rows[t] = self._through(read, i, cache, x, t)
                cache_bytes[t] += cache.keys.nbytes + cache.values.nbytes
                if i == self.layer:
                    shown.append((attn_weights, attn_out[0]))  # (heads, t+1), (d_model,)
            del read, cache  # layer i's weights and cache go before layer i + 1's are read
        return [DecodedToken(w, c, b) for (w, c), b in zip(shown, cache_bytes, strict=True)]

    @torch.no_grad()
    def prefill(self, token_ids: list[int]) -> None:
        """Tokens 0..T-1 through every layer in one pass, each layer's cache filled with their
        keys and values, as T steps would fill it (no weights or logits kept: a generation's
        prompt). Only on an empty cache."""
        assert all(c.length == 0 for c in self.caches), "prefill starts a decode"
        read, spec, n = self.read, self.spec, len(token_ids)
        x = embed(read, spec, token_ids)  # (T, d_model)
        for i, cache in enumerate(self.caches):
            tables = self.ropes[i]
            rope = None if tables is None else (tables[0][:n], tables[1][:n])
            heads = project(read, spec, i, attention_input(read, spec, i, x), rope)
            cached = as_llama_cpp()
            cache.append(_as_cached(heads.keys_rope, cached),
                         _as_cached(heads.values, cached))  # (kv, T, hd)
            context = _prefill_context(spec, i, heads.queries_rope, cache)  # (T, heads · hd)
            del heads
            release_freed()  # the attention's stages go back before the feed-forward's come
            attn_out = linear(read, f"layers.{i}.self_attn.o_proj", context)  # (T, d_model)
            x = finish_block(read, spec, i, x, attn_out)  # (T, d_model)
            del context, attn_out
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
