"""Seeded token + positional embeddings, as in the book's chapter 2."""

from __future__ import annotations

import torch
from torch import Tensor

from attncli.core.request import check_dims
from attncli.core.sizes import check_embedding
from attncli.errors import AttnCliError


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
    torch.manual_seed(seed)
    # Draw the tables exactly as torch.nn.Embedding does (normal_ in construction order),
    # without building modules: the seeded numbers are the same.
    token_table = torch.empty(vocab_size, emb_dim).normal_()  # (vocab, emb_dim)
    pos_table = torch.empty(context_length, emb_dim).normal_()  # (context_length, emb_dim)
    ids = torch.tensor(token_ids, dtype=torch.long)  # (T,)
    token_embeddings = token_table[ids]  # (T, emb_dim)
    if not positions:
        # The table is still drawn, so the token embeddings are the same either way.
        return token_embeddings  # (T, emb_dim)
    pos_embeddings = pos_table[:num_tokens]  # (T, emb_dim)
    return token_embeddings + pos_embeddings  # (T, emb_dim)
