"""The tiled readout equals the whole logits' numbers: each row's log Z and the asked tokens'
logits as log_softmax in float64 gives them, the reference's dot and the KL divergence, on a
float32 table and on a Q4_K one, with a soft cap, across several tiles of rows and tokens."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType as Q

from attncli.models.causal import readout
from attncli.models.causal.metrics import kl_divergence
from attncli.models.sources.gguf.qmatmul import QuantizedMatrix
from attncli.models.unembed import Head
from tests.tolerance import assert_near


def _table(kind: str) -> torch.Tensor | QuantizedMatrix:
    if kind == "float32":
        return torch.randn(70, 512, generator=torch.Generator().manual_seed(1)) / 8
    blocks = np.random.default_rng(2).integers(0, 256, (70, 2 * 144), dtype=np.uint8)
    blocks.reshape(-1, 144)[:, 0:4] = [0x00, 0x20, 0x00, 0x1C]  # Q4_K's d, dmin: sane scales
    return QuantizedMatrix(blocks, Q.Q4_K, 512)


@pytest.mark.parametrize("kind", ["float32", "Q4_K"])
@pytest.mark.parametrize("softcap", [None, 3.0])
def test_a_tiled_read_is_the_whole_logits(kind: str, softcap: float | None,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(readout, "ROW_TILE", 4)  # 11 rows: tiles of 4, 4, 3
    monkeypatch.setattr(readout, "VOCAB_TILE", 16)  # 70 tokens: 16 · 4 + 6
    table = _table(kind)
    head = Head(lambda h: torch.nn.functional.rms_norm(h, (512,)), table, softcap)
    final = torch.randn(11, 512, generator=torch.Generator().manual_seed(3))  # (N, d)
    dense = table if isinstance(table, torch.Tensor) else table.dequantized()  # (vocab, d)
    logits = head.norm(final) @ dense.T  # (N, vocab)
    logits = logits if softcap is None else torch.tanh(logits / softcap) * softcap
    tokens = torch.tensor([[i * 7 % 70, 69 - i] for i in range(11)])  # (N, 2)
    before = torch.randn(70, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    reference = torch.softmax(before, dim=-1)  # (vocab,) the distribution KL starts from
    found = readout.read(head, final, tokens, reference)
    log_probs = torch.log_softmax(logits.double(), dim=-1)  # (N, vocab)
    assert_near(found.log_probs(0), log_probs.gather(-1, tokens[:, :1])[:, 0])
    assert_near(found.log_probs(1), log_probs.gather(-1, tokens[:, 1:])[:, 0])
    assert_near(found.picked, logits.double().gather(-1, tokens))
    assert found.mixed is not None
    assert_near(found.mixed, logits.double() @ reference)
    for row in (0, 10):
        ref = kl_divergence(before, logits[row])
        assert_near(found.kl_from(row, torch.log_softmax(before, dim=-1)), ref)
    parts = readout.split(found, 11)
    assert len(parts) == 11 and torch.equal(parts[4].picked[0], found.picked[4])
