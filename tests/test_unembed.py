"""The unembedding read a chunk of rows at a time: the same logits as one product with the
whole matrix, and never the whole matrix read at once."""

from __future__ import annotations

from pathlib import Path

import gguf
import pytest
import torch

from attncli.models import unembed as unembed_module
from attncli.models.sources.gguf import open_gguf
from attncli.models.sources.named import Named
from attncli.models.unembed import unembed, unembedding
from tests.gguf_fixtures import D, write_model


@pytest.mark.parametrize("chunk", [1, 7, 64, 100_000])
def test_chunked_logits_equal_one_product_with_the_whole_table(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    path = tmp_path / "m.gguf"
    write_model(path, "llama", gguf.GGMLQuantizationType.Q8_0)
    source = open_gguf(path)
    whole = source.tensor("lm_head.weight")  # (vocab, d) the unembedding
    vocab = whole.shape[0]
    read: list[int] = []

    def tensor(name: str) -> torch.Tensor:
        raise AssertionError(f"{name} read whole")

    monkeypatch.setattr(source, "tensor", tensor)
    rows = source.rows
    monkeypatch.setattr(source, "rows", lambda name, idx: read.append(len(idx)) or rows(name, idx))
    monkeypatch.setattr(unembed_module, "VOCAB_CHUNK", chunk)
    hidden = torch.randn(5, D, generator=torch.Generator().manual_seed(0))  # (T, d)
    lm_head = unembedding(Named(source, "model."), "embed_tokens.weight", vocab, D)
    logits = unembed(hidden, lm_head, vocab)  # (T, vocab)
    torch.testing.assert_close(logits, hidden @ whole.T, atol=1e-5, rtol=1e-5)
    assert sum(read) == vocab and max(read) == min(chunk, vocab)
