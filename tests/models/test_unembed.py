"""The unembedding read a chunk of rows at a time: the same logits as one product with the
whole matrix, and never the whole matrix read at once."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import pytest
import torch

from attncli.errors import AttnCliError
from attncli.models import unembed as unembed_module
from attncli.models.sources.gguf import dequant, open_gguf, qmatmul
from attncli.models.sources.named import Named
from attncli.models.unembed import held_unembedding, unembed, unembedding
from tests.gguf_fixtures import D, write_model
from tests.tolerance import assert_near


@pytest.mark.parametrize("chunk", [1, 7, 64, 100_000])
@pytest.mark.parametrize("qtype", [gguf.GGMLQuantizationType.Q8_0, gguf.GGMLQuantizationType.F32])
def test_chunked_logits_equal_one_product_with_the_whole_table(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int,
        qtype: gguf.GGMLQuantizationType) -> None:
    """A chunk of rows at a time, never the whole table: from the file's blocks, each chunk
    dequantized from them (Q8_0), or row reads (F32, which the kernels do not hold as blocks)."""
    path = tmp_path / "m.gguf"
    write_model(path, "llama", qtype)
    source = open_gguf(path)
    whole = source.tensor("lm_head.weight")  # (vocab, d) the unembedding
    vocab = whole.shape[0]
    read: list[int] = []

    def tensor(name: str) -> torch.Tensor:
        raise AssertionError(f"{name} read whole")

    monkeypatch.setattr(source, "tensor", tensor)
    rows = source.rows
    monkeypatch.setattr(source, "rows", lambda name, idx: read.append(len(idx)) or rows(name, idx))
    original = dequant.dequantize

    def counted(blocks: np.ndarray, *args: object, **options: object) -> np.ndarray:
        read.append(blocks.shape[0])
        return original(blocks, *args, **options)

    monkeypatch.setattr(dequant, "dequantize", counted)
    monkeypatch.setattr(unembed_module, "VOCAB_CHUNK", chunk)
    hidden = torch.randn(5, D, generator=torch.Generator().manual_seed(0))  # (T, d)
    lm_head = unembedding(Named(source, "model."), "embed_tokens.weight", vocab, D)
    logits = unembed(hidden, lm_head, vocab)  # (T, vocab)
    assert_near(logits, hidden @ whole.T)
    assert sum(read) == vocab and max(read) == min(chunk, vocab)


def test_a_held_table_is_the_rows_read_whole_and_its_product_the_chunked_logits(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """held_unembedding reads the table whole (one tensor read, no row reads): the very rows
    the chunks read, and with one chunk covering the vocabulary the very same logits."""
    path = tmp_path / "m.gguf"
    write_model(path, "llama", gguf.GGMLQuantizationType.Q8_0)
    source = open_gguf(path)
    vocab = source.shapes()["lm_head.weight"][0]
    rows = unembedding(Named(source, "model."), "embed_tokens.weight", vocab, D)
    monkeypatch.setattr(qmatmul, "ENABLED", False)  # the float32 table
    table = held_unembedding(Named(source, "model."), "embed_tokens.weight", vocab, D)
    assert isinstance(table, torch.Tensor) and table.dtype == torch.float32
    assert torch.equal(table, rows(range(vocab)))
    hidden = torch.randn(3, D, generator=torch.Generator().manual_seed(1))  # (T, d)
    assert torch.equal(unembed(hidden, table, vocab), unembed(hidden, rows, vocab))


def test_a_held_gguf_table_is_its_blocks_and_gives_the_chunked_logits(tmp_path: Path) -> None:
    """On the CPU the kernels compute on a GGUF's blocks: the held table is the file's bytes,
    the very rows the chunks read once dequantized, and logits within the kernels' bound
    (1e-5·Σ|w·x|: the order of the sums differs, tests/models/gguf/test_gguf_qmatmul.py)."""
    path = tmp_path / "m.gguf"
    write_model(path, "llama", gguf.GGMLQuantizationType.Q8_0)
    source = open_gguf(path)
    vocab = source.shapes()["lm_head.weight"][0]
    rows = unembedding(Named(source, "model."), "embed_tokens.weight", vocab, D)
    table = held_unembedding(Named(source, "model."), "embed_tokens.weight", vocab, D)
    assert isinstance(table, qmatmul.QuantizedMatrix)
    assert table.qtype == gguf.GGMLQuantizationType.Q8_0
    dense = rows(range(vocab))  # (vocab, d)
    assert torch.equal(table.dequantized(), dense)
    hidden = torch.randn(3, D, generator=torch.Generator().manual_seed(1))  # (T, d)
    # The kernel's bound: float32 sums in another order differ by 1e-5 of Σ|w·x|, not of |Σ w·x|.
    bound = 1e-5 * (hidden.abs() @ dense.abs().T)  # (T, vocab)
    difference = unembed(hidden, table, vocab) - unembed(hidden, rows, vocab)  # (T, vocab)
    assert torch.all(difference.abs() <= bound)


@pytest.mark.parametrize("chunk", [7, 16_384])
def test_under_llama_cpp_numerics_the_chunks_give_the_held_tables_logits(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    """A streamed decoder's unembedding (its rows a chunk at a time) is the held table's
    product under llama.cpp's numerics too, bit for bit: the chunks dequantized to float32 gave
    float32 products where the held table's kernels quantize the activations as llama.cpp
    does (SmolLM2 held and streamed, the same answer 0.045 nats apart at its first token)."""
    path = tmp_path / "m.gguf"
    write_model(path, "llama", gguf.GGMLQuantizationType.Q8_0)
    source = open_gguf(path)
    vocab = source.shapes()["lm_head.weight"][0]
    monkeypatch.setattr(unembed_module, "VOCAB_CHUNK", chunk)
    hidden = torch.randn(3, D, generator=torch.Generator().manual_seed(2))  # (T, d)
    with qmatmul.llama_cpp_numerics():
        rows = unembedding(Named(source, "model."), "embed_tokens.weight", vocab, D)
        table = held_unembedding(Named(source, "model."), "embed_tokens.weight", vocab, D)
        assert isinstance(table, qmatmul.QuantizedMatrix)
        streamed = unembed(hidden, rows, vocab)  # (T, vocab)
        assert torch.equal(streamed, unembed(hidden, table, vocab))
    # and within the kernels' bound of the float32 product on the dequantized rows
    dense = table.dequantized()  # (vocab, d)
    assert_near(streamed, hidden @ dense.T, atol=0.05 * float((hidden.abs() @ dense.abs().T).max()))


def test_a_held_table_of_the_wrong_shape_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    write_model(path, "llama", gguf.GGMLQuantizationType.Q8_0)
    source = open_gguf(path)
    vocab = source.shapes()["lm_head.weight"][0]
    with pytest.raises(AttnCliError, match=r"lm_head.weight .* has shape"):
        held_unembedding(Named(source, "model."), "embed_tokens.weight", vocab + 1, D)


def test_a_held_gguf_head_is_read_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """held_unembedding checks the head's shape without reading it, then reads its blocks once
    (into pages held for the run): checking it through unembedding() read them into a buffer
    of their own first, and an 8B's output (0.43 GB) stood twice in memory after a step."""
    path = tmp_path / "m.gguf"
    write_model(path, "llama", gguf.GGMLQuantizationType.Q8_0)
    source = open_gguf(path)
    vocab = source.shapes()["lm_head.weight"][0]
    reads: list[str] = []
    quantized = source.quantized

    def counted(name: str, *args: object, **kwargs: object) -> qmatmul.QuantizedMatrix | None:
        reads.append(name)
        return quantized(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(source, "quantized", counted)
    table = held_unembedding(Named(source, "model."), "embed_tokens.weight", vocab, D)
    assert isinstance(table, qmatmul.QuantizedMatrix) and reads == ["lm_head.weight"]
