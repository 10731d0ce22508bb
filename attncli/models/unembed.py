"""The way back from the residual stream to the vocabulary: a checkpoint's final norm and its
unembedding, checked before they are read (a headless checkpoint has neither)."""

from __future__ import annotations

from torch import Tensor

from attncli.errors import AttnCliError
from attncli.models.sources.named import Named, where

LM_HEAD = "lm_head.weight"  # outside the model's prefix ("model.", "transformer.") in every family


def need(weights: Named, shapes: dict[str, tuple[int, ...]], what: str) -> None:
    """Each tensor (unprefixed name → shape) is in the checkpoint and so shaped, or one line
    naming the first that is not."""
    for name, shape in shapes.items():
        if name not in weights:
            raise AttnCliError(f"{where(weights.source)} lacks {weights.prefix}{name}, which "
                               f"{what} need (a checkpoint saved without its head)")
        if tuple(weights.shape(name)) != shape:
            raise AttnCliError(f"tensor {weights.prefix}{name} in {where(weights.source)} has "
                               f"shape {tuple(weights.shape(name))}, expected {shape}")


def unembedding(weights: Named, embedding: str, vocab: int, d_model: int,
                head: str = LM_HEAD) -> Tensor:
    """(vocab, d_model): the head (lm_head.weight; GPT-NeoX's embed_out.weight) where the
    checkpoint has one, else the token embedding (tie_word_embeddings); its shape checked."""
    source = weights.source
    shapes = source.shapes()
    if head in shapes:
        if tuple(shapes[head]) != (vocab, d_model):
            raise AttnCliError(f"tensor {head} in {where(source)} has shape "
                               f"{tuple(shapes[head])}, expected {(vocab, d_model)}")
        return source.tensor(head)
    return weights[embedding]
