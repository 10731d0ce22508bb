"""The unembedding read as the causal metrics need it, one tile of rows × vocabulary at a time:
each row's log-normaliser log Σ_v exp(logit_v), the logits of the tokens a metric asks for, and
a dot of each row's logits with a reference distribution (for a KL divergence). So the logits
of hundreds of edited passes (SmolLM2's 270 ablations × 26 rows × 49,152: 1.4 GB) never exist
at once, and each tile's product writes a buffer that stays in the cache."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from attncli.models.unembed import Head

ROW_TILE = 256  # rows of a tile: with VOCAB_TILE, 2 MB of float32 logits
VOCAB_TILE = 2048  # unembedding rows dequantized at once, and a tile's columns


@dataclass(frozen=True)
class Readout:
    """What the metrics read at some positions of a pass: tokens (P, K) whose logits they take
    at each position, and a reference distribution (vocab,) whose dot with the logits they
    take (None: none)."""

    rows: list[int]  # the P positions read
    tokens: Tensor  # (P, K) vocabulary ids
    reference: Tensor | None = None  # (vocab,) float64 probabilities


@dataclass(frozen=True)
class Read:
    """A pass's logits at a readout's rows, as far as the metrics read them (float64)."""

    log_z: Tensor  # (P,) log Σ_v exp(logit_v), the softmax's normaliser
    picked: Tensor  # (P, K) the logits of the readout's tokens
    mixed: Tensor | None  # (P,) Σ_v p_v · logit_v for the reference p; None without one

    def log_probs(self, k: int = 0) -> Tensor:
        """log p(tokens[:, k]) at each row: (P,)."""
        return self.picked[:, k] - self.log_z

    def kl_from(self, row: int, reference_log_probs: Tensor) -> float:
        """KL(p ‖ q) at row, p the reference (its log-probabilities (vocab,)), q this pass's:
        Σ p log p − Σ p · logit + log Z, since Σ p = 1."""
        assert self.mixed is not None
        p_log_p = (reference_log_probs.exp() * reference_log_probs).sum()  # ()
        return float(p_log_p - self.mixed[row] + self.log_z[row])


def read(head: Head, final: Tensor, tokens: Tensor, reference: Tensor | None = None) -> Read:
    """final streams (N, d_model) through head, read tile by tile: each row's log Z, the logits
    of its tokens (N, K) and its logits' dot with reference (vocab,)."""
    normed = head.norm(final)  # (N, d_model)
    n, vocab = normed.shape[0], head.vocab
    log_z = torch.full((n,), -torch.inf, dtype=torch.float64, device=normed.device)  # (N,)
    picked = torch.zeros(tokens.shape, dtype=torch.float64, device=normed.device)  # (N, K)
    mixed = None if reference is None else torch.zeros_like(log_z)  # (N,)
    tokens = tokens.to(normed.device)
    buffer = normed.new_empty(min(ROW_TILE, n), VOCAB_TILE)  # one tile's logits, reused
    for start in range(0, vocab, VOCAB_TILE):
        table = head.rows(start, min(start + VOCAB_TILE, vocab)).to(normed.device)  # (c, d)
        width = table.shape[0]
        local = tokens - start  # (N, K) each token's column in this tile
        inside = (local >= 0) & (local < width)  # (N, K)
        for top in range(0, n, ROW_TILE):
            rows = slice(top, min(top + ROW_TILE, n))
            tile = torch.mm(normed[rows], table.T, out=buffer[:rows.stop - top, :width])
            logits = head.capped(tile).double()  # (r, c)
            log_z[rows] = torch.logaddexp(log_z[rows], torch.logsumexp(logits, dim=-1))
            found = logits.gather(-1, local[rows].clamp(0, width - 1))  # (r, K)
            picked[rows] = torch.where(inside[rows], found, picked[rows])
            if mixed is not None and reference is not None:
                mixed[rows] += logits @ reference[start:start + width].to(normed.device)
    return Read(log_z, picked, mixed)


def split(whole: Read, count: int) -> list[Read]:
    """A read of count passes' rows, one after another, as one Read each."""
    parts = [t.chunk(count) if t is not None else [None] * count
             for t in (whole.log_z, whole.picked, whole.mixed)]
    return [Read(z, p, m) for z, p, m in zip(*parts, strict=True)]
