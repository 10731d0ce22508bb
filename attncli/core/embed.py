"""Seeded token + positional embeddings, as in the book's chapter 2.

torch.nn.Embedding draws its table with normal_ from torch's seeded Mersenne Twister: for GPT-2
at 768 wide that is 38.6 M numbers (0.3-0.6 s, 154 MB), of which a text uses a few rows. normal_
turns each block of 16 uniform draws into 16 normals on its own, so when a row's width is a
multiple of 16, row r is what normal_ makes of the stream from draw r·emb_dim on. numpy's
MT19937, the same generator, skips ahead without making the numbers, and torch then draws just
the rows the text uses: the same bits, in a fraction of the time and memory.
"""

from __future__ import annotations

import ctypes

import numpy as np
import torch
from torch import Tensor

from attncli.core.request import check_dims
from attncli.core.sizes import check_embedding
from attncli.errors import AttnCliError

MT_N = 624  # words of Mersenne Twister state
# torch's CPU generator state (torch.get_rng_state): the_initial_seed u64, left i32, seeded i32,
# next u64, state u64[624], then the normal caches. left: draws until the state is twisted.
_LEFT, _NEXT, _WORDS = slice(8, 12), slice(16, 24), slice(24, 24 + MT_N * 8)
STATE_BYTES = 5056  # and 40 bytes of normal caches after the words
NORMAL_BLOCK = 16  # normal_ makes its numbers 16 at a time, each block from its own 16 draws
SPAN_COST = 4096  # numbers it costs to draw a span on its own: nearer rows share one span
SKIP_SHARE = 0.5  # skip ahead only when the spans drawn are under half the table


class _Stream:
    """torch's default generator right after torch.manual_seed, mirrored in numpy's MT19937 to
    skip ahead; generator_at(n) is a torch generator n draws further on. ok: the state has the
    size and reads as a freshly seeded one should (left = 1, first word = the seed), so the layout
    assumed here is torch's; otherwise the caller draws the whole table."""

    def __init__(self, state: Tensor) -> None:
        self.raw = state.clone()  # (5056,) uint8
        self.view = self.raw.numpy()
        self.mt = np.random.MT19937()
        # numpy's mt19937_state is {uint32 key[624]; int pos}: read it in place, not as a dict.
        address = self.mt.ctypes.state_address
        self.key = np.ctypeslib.as_array((ctypes.c_uint32 * MT_N).from_address(address))
        self.pos = ctypes.c_int.from_address(address + MT_N * 4)
        self.drawn = 0
        self.generator = torch.Generator()
        self.ok = False
        if self.view.dtype != np.uint8 or self.view.size != STATE_BYTES:
            return
        left = int(self.view[_LEFT].view(np.int32)[0])
        words = self.view[_WORDS].view(np.uint64)
        seed = int(self.view[:8].view(np.uint64)[0])  # the_initial_seed; the state starts with it
        if left != 1 or not (words < 2**32).all() or int(words[0]) != seed & 0xFFFFFFFF:
            return
        self.mt.state = {"bit_generator": "MT19937",
                         "state": {"key": words.astype(np.uint32), "pos": MT_N}}
        public = self.mt.state["state"]
        self.ok = self.pos.value == public["pos"] and bool(np.array_equal(self.key, public["key"]))

    def generator_at(self, draws: int) -> torch.Generator:
        """The torch generator after `draws` draws from the seeded start (never backwards)."""
        self.mt.random_raw(draws - self.drawn, output=False)
        self.drawn = draws
        pos = self.pos.value  # draws taken from the current state, 1..624
        self.view[_LEFT] = np.array([MT_N + 1 - pos], np.int32).view(np.uint8)
        self.view[_NEXT] = np.array([pos], np.uint64).view(np.uint8)
        self.view[_WORDS].view(np.uint64)[:] = self.key
        self.generator.set_state(self.raw)
        return self.generator


def _spans(rows: list[int], emb_dim: int) -> list[tuple[int, int]]:
    """Sorted distinct rows grouped into spans [first, last] drawn at once."""
    gap = max(1, SPAN_COST // emb_dim)
    spans = [(rows[0], rows[0])]
    for row in rows[1:]:
        if row - spans[-1][1] <= gap:
            spans[-1] = (spans[-1][0], row)
        else:
            spans.append((row, row))
    return spans


def _skipped(ids: Tensor, vocab_size: int, emb_dim: int,
             context_length: int) -> tuple[Tensor, Tensor] | None:
    """The token rows (T, emb_dim) and the positional table (context_length, emb_dim), drawn by
    skipping ahead; None where that would not give normal_'s bits or would not save time."""
    if emb_dim % NORMAL_BLOCK or not len(ids):
        return None
    rows = sorted(set(ids.tolist()))
    spans = _spans(rows, emb_dim)
    drawn = sum(last - first + 1 for first, last in spans) * emb_dim
    if drawn + len(spans) * SPAN_COST > SKIP_SHARE * vocab_size * emb_dim:
        return None
    stream = _Stream(torch.get_rng_state())
    if not stream.ok:
        return None
    parts = [torch.empty(last - first + 1, emb_dim).normal_(
        generator=stream.generator_at(first * emb_dim)) for first, last in spans]  # (n, emb_dim)
    table_rows = torch.cat(parts)  # (drawn rows, emb_dim)
    slot = torch.zeros(vocab_size, dtype=torch.long)  # (vocab,) each used id's row in table_rows
    start = 0
    for first, last in spans:
        slot[first:last + 1] = torch.arange(start, start + last - first + 1)  # (span rows,)
        start += last - first + 1
    generator = stream.generator_at(vocab_size * emb_dim)
    pos_table = torch.empty(context_length, emb_dim).normal_(generator=generator)  # (ctx, emb)
    torch.set_rng_state(generator.get_state())  # where drawing the whole tables leaves it
    return table_rows[slot[ids]], pos_table  # (T, emb_dim), (context_length, emb_dim)


def embed(token_ids: list[int], vocab_size: int, emb_dim: int, context_length: int | None,
          seed: int, positions: bool = True) -> Tensor:
    """Input embeddings (T, emb_dim): token embedding plus positional embedding (if positions)."""
    num_tokens = len(token_ids)
    context_length = num_tokens if context_length is None else context_length
    check_dims(emb_dim=emb_dim, context_length=context_length)
    if num_tokens > context_length:
        raise AttnCliError(
            f"the text has {num_tokens} tokens, more than --context-length {context_length}"
        )
    check_embedding(vocab_size, emb_dim, context_length)
    ids = torch.tensor(token_ids, dtype=torch.long)  # (T,)
    if len(ids) and not (0 <= int(ids.min()) and int(ids.max()) < vocab_size):
        raise AttnCliError(f"a token id lies outside the vocabulary of {vocab_size:,}")
    torch.manual_seed(seed)
    drawn = _skipped(ids, vocab_size, emb_dim, context_length)
    if drawn is None:
        # Draw the tables exactly as torch.nn.Embedding does (normal_ in construction order),
        # without building modules: the seeded numbers are the same.
        token_table = torch.empty(vocab_size, emb_dim).normal_()  # (vocab, emb_dim)
        pos_table = torch.empty(context_length, emb_dim).normal_()  # (context_length, emb_dim)
        token_embeddings = token_table[ids]  # (T, emb_dim)
    else:
        token_embeddings, pos_table = drawn  # (T, emb_dim), (context_length, emb_dim)
    if not positions:
        # The table is still drawn, so the token embeddings are the same either way.
        return token_embeddings  # (T, emb_dim)
    pos_embeddings = pos_table[:num_tokens]  # (T, emb_dim)
    return token_embeddings + pos_embeddings  # (T, emb_dim)
