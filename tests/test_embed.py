"""Embeddings equal the book's chapter-2 recipe built with torch.nn.Embedding."""

from __future__ import annotations

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
