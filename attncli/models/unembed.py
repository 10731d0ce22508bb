"""The way back from the residual stream to the vocabulary: a checkpoint's final norm and its
unembedding, checked before they are read (a headless checkpoint has neither)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from attncli.errors import AttnCliError
from attncli.models.sources.gguf.qmatmul import QuantizedMatrix, as_llama_cpp
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


VOCAB_CHUNK = 16_384  # unembedding rows read at once: 256 MB of float32 at d_model 4,096


def unembedding(weights: Named, embedding: str, vocab: int, d_model: int,
                head: str = LM_HEAD) -> Callable[[range], Table]:
    """Rows of the (vocab, d_model) unembedding: the head (lm_head.weight; GPT-NeoX's
    embed_out.weight) where the checkpoint has one, else the token embedding
    (tie_word_embeddings); its shape checked before any is read. Where the file holds it in
    blocks the kernels take (a GGUF on the CPU), the blocks are read once and each chunk of rows
    dequantized from them: the same float32 rows, without reading the table row by row on
    every call (SmolLM2's: 2.3 s a call, then 0.2 s)."""
    source = weights.source
    if _own_head(weights, head, vocab, d_model):
        reader = None if weights.finite else getattr(source, "quantized", None)
        blocks = None if reader is None else reader(head)
        return _chunks(blocks) if blocks is not None else lambda rows: source.rows(head, rows)
    blocks = weights.quantized(embedding)
    return _chunks(blocks) if blocks is not None else lambda rows: weights.rows(embedding, rows)


def _own_head(weights: Named, head: str, vocab: int, d_model: int) -> bool:
    """Whether the checkpoint has its own head (else the token embedding is read back), its
    shape checked: one line where it is not (vocab, d_model). Nothing is read."""
    shapes = weights.source.shapes()
    if head not in shapes:
        return False
    if tuple(shapes[head]) != (vocab, d_model):
        raise AttnCliError(f"tensor {head} in {where(weights.source)} has shape "
                           f"{tuple(shapes[head])}, expected {(vocab, d_model)}")
    return True


def _chunks(matrix: QuantizedMatrix) -> Callable[[range], Table]:
    """Rows of a matrix held as its blocks, dequantized as the source's tensor() does; under
    llama.cpp's numerics the rows' blocks, which unembed multiplies as a held table's."""
    from attncli.models.sources.gguf.dequant import dequantize

    if as_llama_cpp():  # the kernels' product, as a held table's (its 8-bit activations)
        return lambda rows: QuantizedMatrix(matrix.blocks[rows.start:rows.stop], matrix.qtype,
                                            matrix.cols)  # (len(rows), d_model)
    return lambda rows: torch.from_numpy(dequantize(matrix.blocks[rows.start:rows.stop],
                                                    matrix.qtype))  # (len(rows), d_model)


Table = Tensor | QuantizedMatrix  # a held unembedding: float32, or as the file holds it


def held_unembedding(weights: Named, embedding: str, vocab: int, d_model: int,
                     head: str = LM_HEAD) -> Table:
    """The whole (vocab, d_model) unembedding read once, its shape checked as unembedding()
    checks it: a decoder that holds its weights holds this too. As the file holds it where the
    quantized kernels take it (a GGUF on the CPU), else as float32, read whole, not row by row
    (49,152 row reads of SmolLM2's table cost 0.2 s). The head is read once: checking it
    through unembedding() read its blocks into a buffer of their own first (an 8B's output,
    0.43 GB, held twice after a step)."""
    source = weights.source
    if _own_head(weights, head, vocab, d_model):
        reader = None if weights.finite else getattr(source, "quantized", None)
        blocks = None if reader is None else reader(head, held=True)  # populated pages
        return blocks if blocks is not None else source.tensor(head).float()  # (vocab, d)
    blocks = weights.quantized(embedding)
    return blocks if blocks is not None else weights[embedding].float()  # (vocab, d_model)


def unembed(hidden: Tensor, rows: Callable[[range], Table] | Table, vocab: int) -> Tensor:
    """hidden (T, d_model) through the unembedding: logits (T, vocab). rows: a held table
    (held_unembedding), one product; else its rows read VOCAB_CHUNK at a time, so that its
    whole float32 copy (Llama 3's 128,256 × 4,096: 2.1 GB) never exists."""
    if isinstance(rows, (QuantizedMatrix, Tensor)):
        return _times(hidden, rows)  # (T, vocab)
    logits = hidden.new_empty(hidden.shape[0], vocab)  # (T, vocab)
    for start in range(0, vocab, VOCAB_CHUNK):
        stop = min(start + VOCAB_CHUNK, vocab)
        logits[:, start:stop] = _times(hidden, rows(range(start, stop)))  # (T, c)
    return logits


def _times(hidden: Tensor, table: Table) -> Tensor:
    """hidden (T, d_model) times a table's rows (c, d_model): (T, c); blocks through the
    kernels (under llama.cpp's numerics, a chunk's as a held table's)."""
    if isinstance(table, QuantizedMatrix):
        return table.linear(hidden)  # (T, c)
    return hidden @ table.to(hidden.device).T  # (T, c)


@dataclass(frozen=True)
class Head:
    """A decoder's way from its final streams to logits in parts, for reading the logits a
    tile at a time: its final norm, its held unembedding and the soft cap some put on them."""

    norm: Callable[[Tensor], Tensor]  # final streams (N, d_model) → normed (N, d_model)
    table: Table  # (vocab, d_model), held_unembedding's
    softcap: float | None = None  # Gemma 2's final_logit_softcapping

    @property
    def vocab(self) -> int:
        return int(self.table.shape[0])

    def rows(self, start: int, stop: int) -> Tensor:
        """Unembedding rows start..stop-1 as float32 (stop - start, d_model)."""
        if isinstance(self.table, QuantizedMatrix):
            return QuantizedMatrix(self.table.blocks[start:stop], self.table.qtype,
                                   self.table.cols).dequantized()
        return self.table[start:stop]

    def capped(self, logits: Tensor) -> Tensor:
        """logits soft-capped as the family does (Gemma 2: tanh(x / c) · c), else as they are."""
        if self.softcap is None:
            return logits
        return torch.tanh(logits / self.softcap) * self.softcap
