"""Embeddings equal the book's chapter-2 recipe built with torch.nn.Embedding."""

from __future__ import annotations

import random

import pytest
import torch

from attncli.core.embed import embed
from attncli.errors import AttnCliError


@pytest.mark.parametrize(("emb_dim", "context_length"), [(8, None), (3, 10), (16, 4)])
def test_matches_nn_embedding(emb_dim: int, context_length: int | None) -> None:
    ids = [40, 367, 2885, 1464]
    x = embed(ids, 50257, emb_dim, context_length, seed=123)
    torch.manual_seed(123)
    token_layer = torch.nn.Embedding(50257, emb_dim)
    pos_layer = torch.nn.Embedding(context_length or len(ids), emb_dim)
    expected = token_layer(torch.tensor(ids)) + pos_layer(torch.arange(len(ids)))
    assert torch.equal(x, expected)


def test_context_length_and_dims_checked() -> None:
    with pytest.raises(AttnCliError, match="4 tokens, more than --context-length 3"):
        embed([1, 2, 3, 4], 50257, 8, 3, seed=1)
    with pytest.raises(AttnCliError, match=r"emb-dim must be a positive integer \(got 0\)"):
        embed([1], 50257, 0, None, seed=1)


def _reference(ids: list[int], vocab: int, emb_dim: int, context_length: int,
               seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The token rows and positional table of nn.Embedding's draws, and the generator after."""
    torch.manual_seed(seed)
    token_layer = torch.nn.Embedding(vocab, emb_dim)
    pos_layer = torch.nn.Embedding(context_length, emb_dim)
    return (token_layer.weight.detach()[torch.tensor(ids)], pos_layer.weight.detach(),
            torch.get_rng_state())


@pytest.mark.parametrize(("vocab", "emb_dim", "ids", "seed"), [
    (50257, 768, [40] * 300, 123),  # one row, far into the table
    (50257, 768, [50256, 0, 1, 17, 5000, 5003, 50255], 7),  # the ends, and nearby rows
    (100277, 32, list(range(90000, 90040, 3)), 2**40 + 5),  # a seed wider than 32 bits
    (5000, 16, [4999, 3, 3, 2500], 0),
])
def test_skipping_ahead_draws_the_same_bits(vocab: int, emb_dim: int, ids: list[int],
                                            seed: int) -> None:
    from attncli.core.embed import _skipped

    rows, pos, state = _reference(ids, vocab, emb_dim, len(ids) + 3, seed)
    torch.manual_seed(seed)
    drawn = _skipped(torch.tensor(ids), vocab, emb_dim, len(ids) + 3)
    assert drawn is not None, "this case should take the skipping path"
    assert torch.equal(drawn[0], rows) and torch.equal(drawn[1], pos)
    # The global generator is left where drawing both whole tables leaves it.
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.equal(embed(ids, vocab, emb_dim, len(ids) + 3, seed), rows + pos[:len(ids)])


@pytest.mark.parametrize("seed", range(6))
def test_embed_equals_nn_embedding_either_way(seed: int) -> None:
    """Random widths (multiples of 16 or not), vocabularies and ids: whichever way the rows are
    drawn, they are nn.Embedding's, and so is the generator's state afterwards."""
    rng = random.Random(seed)
    vocab = rng.choice([64, 5000, 50257])
    emb_dim = rng.choice([8, 16, 24, 48, 64, 768])
    ids = [rng.randrange(vocab) for _ in range(rng.choice([1, 9, 400]))]
    rows, pos, state = _reference(ids, vocab, emb_dim, len(ids), seed)
    x = embed(ids, vocab, emb_dim, None, seed)
    assert torch.equal(x, rows + pos[:len(ids)])
    assert torch.equal(torch.get_rng_state(), state)


def test_token_ids_outside_the_vocabulary_are_refused() -> None:
    with pytest.raises(AttnCliError, match="outside the vocabulary of 100"):
        embed([3, 100], 100, 16, None, seed=1)


def test_skipping_ahead_trusts_only_a_freshly_seeded_state() -> None:
    """A state it cannot read as torch.manual_seed's leaves the whole table to be drawn."""
    from attncli.core.embed import _Stream

    torch.manual_seed(5)
    assert _Stream(torch.get_rng_state()).ok
    torch.rand(3)  # no longer fresh: left is not 1
    assert not _Stream(torch.get_rng_state()).ok
    assert not _Stream(torch.zeros(100, dtype=torch.uint8)).ok  # not the layout at all
    state = torch.manual_seed(5).get_state()
    state[24] ^= 1  # the first word no longer the seed
    assert not _Stream(state).ok
