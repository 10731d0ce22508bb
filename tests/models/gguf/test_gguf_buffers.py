"""The GGUF source's recycled buffers: a buffer anything still holds (a tensor, a view, an array
made from it) is never handed out again; idle ones are; the kept bytes stay within the bound; and
every tensor read through recycled buffers equals a read through fresh ones, held or not."""

from __future__ import annotations

import threading
from pathlib import Path

import gguf
import numpy as np
import pytest
import torch

from attncli.models.sources.gguf import buffers
from attncli.models.sources.gguf.buffers import Recycler, layer_bytes
from attncli.models.sources.gguf.qmatmul import QuantizedMatrix
from attncli.models.sources.gguf.source import open_gguf
from attncli.models.sources.named import Named
from attncli.models.unembed import held_unembedding
from tests.gguf_fixtures import D, write_model

MB = 1 << 20


def _base(array: np.ndarray) -> int:
    return id(array.base)


HOLDERS = {"tensor": torch.from_numpy, "torch view": lambda a: torch.from_numpy(a)[::2],
           "numpy view": lambda a: a.reshape(2, -1)[1], "dtype view": lambda a: a.view(np.int32),
           "tensor's numpy": lambda a: torch.from_numpy(a).numpy()}


@pytest.mark.parametrize("holder", HOLDERS)
def test_a_held_buffer_is_never_handed_out_and_an_idle_one_is(holder: str) -> None:
    recycler = Recycler(64 * MB)
    array = recycler.empty((MB,), np.float32)  # 4 MB
    kept = _base(array)
    held = HOLDERS[holder](array)
    del array
    other = recycler.empty((MB,), np.float32)
    assert _base(other) != kept  # still held through held
    del other, held
    again = recycler.empty((2 * MB,), np.uint16)  # the same bytes, another shape and dtype
    assert _base(again) == kept  # the least recently used idle one


def test_the_kept_bytes_stay_within_the_cap_and_small_arrays_are_fresh() -> None:
    recycler = Recycler(10 * MB)
    held = [recycler.empty((MB,), np.float32) for _ in range(4)]  # 16 MB asked, 10 MB the cap
    assert recycler.kept_bytes() <= 10 * MB
    assert len({_base(a) for a in held}) == 4  # all distinct: none handed out twice
    small = recycler.empty((100,), np.float32)
    assert small.base is None  # made fresh, never kept
    del held
    for _ in range(10):  # idle buffers of other sizes give way to new ones
        recycler.empty((3 * MB,), np.uint8)
        assert recycler.kept_bytes() <= 10 * MB


@pytest.fixture
def small_buffers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(buffers, "SMALL", 0)  # the fixtures' tensors are kilobytes


@pytest.mark.parametrize("arch", ["llama", "gpt2"])  # q/k un-permuted; Conv1D transposed
@pytest.mark.parametrize("qtype", [gguf.GGMLQuantizationType.Q8_0, gguf.GGMLQuantizationType.F32,
                                   gguf.GGMLQuantizationType.F16])
def test_tensors_read_through_recycled_buffers_equal_fresh_reads(
        tmp_path: Path, qtype: gguf.GGMLQuantizationType, arch: str, small_buffers: None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "m.gguf"
    write_model(path, arch, qtype)
    source = open_gguf(path)
    names = sorted(source.shapes())
    held = {name: source.tensor(name) for name in names}  # every one held at once
    dropped = {name: source.tensor(name).clone() for name in names for _ in range(2)}
    monkeypatch.setattr(buffers, "SMALL", 1 << 62)  # a fresh source on fresh arrays only
    fresh = open_gguf(path)
    for name in names:
        want = fresh.tensor(name)
        assert torch.equal(held[name], want), name
        assert torch.equal(dropped[name], want), name
    assert source._buffers.kept_bytes() <= layer_bytes(source.header)


def test_threads_reading_one_source_get_their_own_buffers(tmp_path: Path,
                                                          small_buffers: None) -> None:
    path = tmp_path / "m.gguf"
    write_model(path, "llama", gguf.GGMLQuantizationType.Q8_0)
    source = open_gguf(path)
    names = sorted(source.shapes())
    want = {name: source.tensor(name).clone() for name in names}
    wrong: list[str] = []

    def read() -> None:
        for _ in range(5):
            for name in names:
                if not torch.equal(source.tensor(name), want[name]):
                    wrong.append(name)

    workers = [threading.Thread(target=read) for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert wrong == []


@pytest.mark.parametrize("qtype", [gguf.GGMLQuantizationType.Q8_0, gguf.GGMLQuantizationType.F16])
def test_a_held_stack_is_read_straight_into_its_rows_and_equals_its_parts_concatenated(
        tmp_path: Path, qtype: gguf.GGMLQuantizationType, small_buffers: None) -> None:
    path = tmp_path / "m.gguf"
    write_model(path, "llama", qtype)  # q and k un-permuted on the way in, v as stored
    held = Named(open_gguf(path), "model.", keep=True)
    fresh = open_gguf(path)
    for names in (["q_proj", "k_proj", "v_proj"], ["gate_proj", "up_proj"]):
        group = "self_attn" if len(names) == 3 else "mlp"
        full = [f"layers.1.{group}.{n}.weight" for n in names]
        stack = held.stacked(full)
        assert stack is not None and stack.qtype == qtype
        parts = [fresh.quantized(f"model.{name}") for name in full]
        want = np.concatenate([p.blocks for p in parts if p is not None])  # (Σ rows, bytes)
        assert None not in parts and np.array_equal(stack.blocks, want)
        assert not any(np.shares_memory(stack.blocks, kept)  # its own, not a recycled buffer
                       for kept in held.source._buffers._kept)  # type: ignore[attr-defined]
        assert held.stacked(full) is stack  # read once
        assert all(name not in held._kept_blocks for name in full)  # the stack holds them


def test_held_matrices_and_stacks_make_populated_pages_for_what_they_keep_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A held decoder's view (reading_once(held=True)) reads each matrix onto pages of its own
    (buffers.populated) and keeps it, as held_unembedding does an untied table; a layer's view
    (reading_once(), dropped after its layer) keeps its matrices in recycled buffers that the
    next layer's reuses; a stack makes pages for its rows alone: its first matrix, copied in and
    dropped, is read as a streamed one is, not onto pages made and unmapped at once."""
    from attncli.models.sources.gguf import source as source_module

    path = tmp_path / "m.gguf"
    write_model(path, "llama", gguf.GGMLQuantizationType.Q8_0)
    made: list[tuple[int, ...]] = []
    populated = buffers.populated

    def counted(shape: tuple[int, ...]) -> np.ndarray:
        made.append(tuple(shape))
        return populated(shape)

    monkeypatch.setattr(buffers, "populated", counted)
    monkeypatch.setattr(source_module, "populated", counted)
    layer = Named(open_gguf(path), "model.").reading_once()
    o_proj = layer.quantized("layers.0.self_attn.o_proj.weight")
    assert o_proj is not None and made == []  # a recycled buffer
    assert layer.quantized("layers.0.self_attn.o_proj.weight") is o_proj  # kept for the layer
    held = Named(open_gguf(path), "model.").reading_once(held=True)
    o_proj = held.quantized("layers.0.self_attn.o_proj.weight")
    assert o_proj is not None and made == [o_proj.blocks.shape]
    assert held.quantized("layers.0.self_attn.o_proj.weight") is o_proj  # kept
    made.clear()
    stack = held.stacked([f"layers.0.mlp.{n}.weight" for n in ("gate_proj", "up_proj")])
    assert stack is not None and made == [stack.blocks.shape]
    made.clear()
    source = open_gguf(path)  # its own lm_head, untied: held_unembedding reads it from source
    table = held_unembedding(Named(source, "model."), "embed_tokens.weight",
                             source.shapes()["lm_head.weight"][0], D)
    assert isinstance(table, QuantizedMatrix) and made == [table.blocks.shape]
    made.clear()
    assert Named(open_gguf(path), "model.").quantized("layers.0.mlp.up_proj.weight") is not None
    assert made == []  # streamed: a recycled buffer


def test_no_stack_where_finite_values_are_asked_for(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    write_model(path, "llama", gguf.GGMLQuantizationType.Q8_0)
    checked = Named(open_gguf(path), "model.", finite=True, keep=True)
    assert checked.stacked([f"layers.0.mlp.{n}.weight" for n in ("gate_proj", "up_proj")]) is None


@pytest.mark.parametrize("has_populate", [True, False])
def test_populated_pages_are_writable_zeros_with_or_without_map_populate(
        has_populate: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if not has_populate:
        monkeypatch.delattr(buffers.mmap, "MAP_POPULATE", raising=False)
    array = buffers.populated((3, 5000))
    assert array.shape == (3, 5000) and array.dtype == np.uint8 and array.flags.writeable
    if has_populate and hasattr(buffers.mmap, "MAP_POPULATE"):
        assert not array.any()  # an anonymous mapping's pages are zeros
    array[0], array[1:], array[1:2] = 0, 0, 7  # rows are read into in place
    assert int(array.sum()) == 7 * 5000
    assert buffers.populated((0, 8)).shape == (0, 8)
