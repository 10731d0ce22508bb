"""A GGUF file as a weight source: HF names, float32 tensors in HF layout, read lazily.

A tensor's bytes are read with pread into a buffer of their own, and dequantized
(gguf.quants.dequantize, llama.cpp's own numerics) only when asked for; rows() of an embedding
reads and dequantizes only the rows asked for (every row of a GGUF tensor is whole quantization
blocks). Nothing of the file stays in memory once a tensor is dropped: a mapped file kept every
page it had read resident, so a run's peak memory grew with the file (8B Q8_0: 7.9 GB).

No on-disk cache of dequantized tensors: all 272 tensors of SmolLM2-135M Q4_1 take 0.8-1.4 s on
the 2-core test machine (embedding plus one layer 0.1 s), while their float32 copy would be 538 MB
on disk (5.5 times the file) and took 0.48 s to read back even from a warm page cache.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Sequence
from functools import cache, cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

from attncli.core.sizes import FLOAT_BYTES
from attncli.errors import AttnCliError
from attncli.machine import check_fits
from attncli.models.sources.gguf.buffers import Recycler, layer_bytes, populated, read_into
from attncli.models.sources.gguf.config import architecture, build_config
from attncli.models.sources.gguf.dequant import dequantize
from attncli.models.sources.gguf.header import GgufHeader, TensorInfo, open_header
from attncli.models.sources.gguf.names import (
    hf_to_gguf,
    interleave_heads,
    stored_layout,
    unpermute,
)
from attncli.models.sources.gguf.recipe import RECIPES
from attncli.models.sources.gguf.tokenizer import tokenizer_json as build_tokenizer_json
from attncli.models.sources.identity import Opened, changed, identity_of

if TYPE_CHECKING:
    from torch import Tensor

    from attncli.models.sources.gguf.qmatmul import QuantizedMatrix


@cache
def can_dequantize(qtype: GGMLQuantizationType) -> bool:
    """Whether dequant.py (its C code, else gguf.quants) dequantizes this type (tried on zero
    blocks)."""
    try:
        dequantize(np.zeros((1, GGML_QUANT_SIZES[qtype][1]), dtype=np.uint8), qtype)
    except (NotImplementedError, ValueError, KeyError, TypeError):
        return False
    return True


FREQ_FACTORS = "rope_freqs.weight"
LONGROPE = ("rope_factors_long.weight", "rope_factors_short.weight")  # Phi-3's su/longrope
MAX_PAIRS = 65_536  # rotated pairs a head may have (head_dim is checked again by the family)


class GgufSource:
    """A checkpoint's config, tensors and tokenizer, read from one .gguf file."""

    def __init__(self, header: GgufHeader, fd: int | None = None) -> None:
        self.path = header.path
        self.label = header.path.name  # its tokenizer is in its own metadata
        self.vocabulary_inside = True
        self.config_name = f"{header.path} (its metadata as config.json's keys)"
        self.header = header
        self.arch = architecture(header)
        self._layout = RECIPES.of(self.arch, header.path).layout
        self._config = build_config(header)
        self._fd: int | None = None  # the header's (or opened at the first read), closed with us
        self._opened = Opened()
        self._opened.record(self.path, header.identity)
        if FREQ_FACTORS in header.tensors:
            self._check_freq_factors()  # from the header; its values are read by config()
        if any(name in header.tensors for name in LONGROPE):
            self._check_longrope()
        layers = int(self._config.get("num_hidden_layers", self._config.get("n_layer", 0)))
        self._names = {hf: gg for hf, gg in hf_to_gguf(self._layout, layers).items()
                       if gg in header.tensors}
        self._buffers = Recycler(layer_bytes(header))  # read and dequantized into, reused
        if fd is not None:  # last: a source that failed to build leaves the caller its fd
            self._keep(fd)

    def config(self) -> dict[str, Any]:
        config = dict(self._config)
        if FREQ_FACTORS in self.header.tensors:
            config["rope_scaling"] = {"rope_type": "freq_factors",
                                      "freq_factors": list(self._freq_factors)}
        if LONGROPE[0] in self.header.tensors:  # as Phi-3's config.json holds them
            long, short = (list(self._factors(name)) for name in LONGROPE)
            config["rope_scaling"] = {"rope_type": "longrope", "long_factor": long,
                                      "short_factor": short}
        return config

    def shapes(self) -> dict[str, tuple[int, ...]]:
        return {hf: self._info(hf).shape[::-1] if self._undo(hf) == "transposed"
                else self._info(hf).shape for hf in self._names}

    def dtype_name(self, name: str) -> str:
        return self._info(name).qtype.name

    def tensor(self, name: str) -> Tensor:
        import torch

        info = self._info(name)
        blocks, undo = self._blocks(info), self._undo(name)  # (rows, row_bytes)
        if undo in ("q", "k", "qkv_heads") and len(info.shape) == 2:
            # A matrix's rows are reordered as quantized bytes, before they are dequantized:
            # each row is whole blocks, so the float32 values are the same, for a 7th of the copy.
            blocks, undo = self._reordered(blocks, undo), ""
        values = self._dequantize(info, blocks)  # (rows, cols) as stored
        # Each reordering is written into a recycled buffer (values' own goes back to it).
        if undo == "transposed":  # Conv1D's (in, out)
            out = self._float32(values.T.shape)
            np.copyto(out, values.T)
            values = out
        elif undo == "norm":
            values = values - np.float32(1.0)  # a norm stored as 1 + w, back to w
        elif undo:  # a bias: one row
            values = self._reordered(values, undo)
        return torch.from_numpy(_owned(values))  # HF layout

    def quantized(self, name: str, into: np.ndarray | None = None,
                  held: bool = False) -> QuantizedMatrix | None:
        """A matrix as the file holds it (rows reordered to HF's order as bytes), for the
        quantized matmul; None where the kernels do not take its type or layout. into: the
        (rows, row_bytes) bytes to hold it (a held stack's rows), not a recycled buffer; held:
        kept for the run, on pages made in one call (buffers.populated), as a stack's are."""
        from attncli.models.sources.gguf.qmatmul import QuantizedMatrix, computes  # torch: lazy

        info, undo = self._info(name), self._undo(name)
        if len(info.shape) != 2 or undo not in ("", "q", "k", "qkv_heads") or \
                not computes(info.qtype):
            return None
        check_fits(info.nbytes, f"{self.path}: {info.name} as the file holds it")
        if into is not None and into.shape != (info.shape[0], info.row_bytes):
            raise ValueError(f"{into.shape} bytes cannot hold {info.name}")
        if held and into is None:
            into = populated((info.shape[0], info.row_bytes))
        blocks = self._blocks(info, into=None if undo else into)  # (rows, row_bytes)
        return QuantizedMatrix(self._reordered(blocks, undo, into) if undo else blocks, info.qtype,
                               info.shape[1], lambda: self.quantized(name))

    def _reordered(self, rows: np.ndarray, undo: str, into: np.ndarray | None = None
                   ) -> np.ndarray:
        """rows (along the first axis) in HF's order: Q/K's rotary halves un-interleaved, or
        NeoX's query_key_value regrouped per head; into a recycled buffer (or into)."""
        out = self._buffers.empty(rows.shape, rows.dtype) if into is None else into
        if undo == "qkv_heads":
            return interleave_heads(rows, int(self._config["num_attention_heads"]), out)
        heads = self._config["num_attention_heads" if undo == "q" else "num_key_value_heads"]
        return unpermute(rows, int(heads), out)

    def rows(self, name: str, indices: Sequence[int]) -> Tensor:
        import torch

        info = self._info(name)
        if len(info.shape) != 2 or self._undo(name):
            return self.tensor(name)[list(indices)]
        count = info.shape[0]
        bad = [i for i in indices if not 0 <= i < count]
        if bad:
            raise AttnCliError(f"{self.path}: rows {bad[:8]} are outside {name}'s {count:,} rows")
        picked = self._blocks(info, indices)  # (n, row_bytes)
        return torch.from_numpy(_owned(self._dequantize(info, picked)))  # (n, ne0)

    def tokenizer_json(self) -> str | None:
        return build_tokenizer_json(self.header)

    def _check_freq_factors(self) -> None:
        """rope_freqs.weight holds one factor per rotated pair, as its shape says."""
        info = self.header.tensors[FREQ_FACTORS]
        config = self._config
        heads = config.get("num_attention_heads")
        if not isinstance(heads, int) or heads < 1 or "hidden_size" not in config:
            raise AttnCliError(f"{self.path}: a {FREQ_FACTORS} tensor in a {self.arch} file, "
                               "whose attention attncli does not rotate")
        head_dim = config.get("head_dim") or int(config["hidden_size"]) // heads
        if len(info.shape) != 1 or info.shape[0] != head_dim // 2 or info.shape[0] > MAX_PAIRS:
            raise AttnCliError(f"{self.path}: {FREQ_FACTORS} has shape {list(info.shape)}, not "
                               f"one factor per rotated pair ({head_dim // 2})")

    def _check_longrope(self) -> None:
        """Both longrope tensors, one factor per rotated pair each."""
        infos = [self.header.tensors.get(name) for name in LONGROPE]
        heads, hidden = self._config.get("num_attention_heads"), self._config.get("hidden_size")
        pairs = None
        if isinstance(heads, int) and heads > 0 and isinstance(hidden, int):
            rotary = float(self._config.get("partial_rotary_factor", 1.0))
            pairs = int(rotary * (self._config.get("head_dim") or hidden // heads)) // 2
        for name, info in zip(LONGROPE, infos, strict=True):
            shape = list(info.shape) if info is not None else "absent"
            if info is None or pairs is None or info.shape != (pairs,):
                raise AttnCliError(f"{self.path}: {name} is {shape}, not one factor per rotated "
                                   f"pair ({pairs}), as Phi-3's longrope needs both of "
                                   f"{' and '.join(LONGROPE)}")

    @cached_property
    def _freq_factors(self) -> tuple[float, ...]:
        """rope_freqs.weight, read once: what llama.cpp divides each rotated pair's angular speed
        by (Llama 3.1's long-context scaling, written by its converter as one factor per pair)."""
        return self._factors(FREQ_FACTORS)

    def _factors(self, name: str) -> tuple[float, ...]:
        """A 1-D tensor of positive finite rotary factors."""
        info = self.header.tensors[name]
        factors = self._dequantize(info, self._blocks(info)).reshape(-1)  # (pairs,)
        if not (np.isfinite(factors).all() and (factors > 0).all()):
            raise AttnCliError(f"{self.path}: {name} holds a factor that is not a "
                               "positive finite number")
        return tuple(float(f) for f in factors)

    def _info(self, name: str) -> TensorInfo:
        if name not in self._names:
            raise AttnCliError(f"{self.path} has no tensor for {name} (a {self.arch} GGUF)")
        return self.header.tensors[self._names[name]]

    def _undo(self, name: str) -> str:
        return stored_layout(self._layout, self._names[name])

    def _blocks(self, info: TensorInfo, rows: Sequence[int] | None = None,
                into: np.ndarray | None = None) -> np.ndarray:
        """The tensor's bytes, one row per line: (rows, row_bytes), read from the file into a
        new writable array (or into, every row); rows: only those rows, in that order."""
        count = info.nbytes // info.row_bytes if info.row_bytes else 0
        picked = range(count) if rows is None else rows
        blocks = self._buffers.empty((len(picked), info.row_bytes), np.uint8) if into is None \
            else into
        fd = self._descriptor()
        if rows is None:
            read_into(fd, blocks.reshape(-1), info.start, self.path, self.header.size)
        else:
            for line, row in zip(blocks, picked, strict=True):
                read_into(fd, line, info.start + int(row) * info.row_bytes, self.path,
                          self.header.size)
        self.unchanged()  # the bytes are the header's version's: still the file at this path
        return blocks

    def unchanged(self) -> None:
        """One line where the file was renamed over or rewritten since its header was read."""
        self._opened.check()

    def _descriptor(self) -> int:
        """The file, opened once and kept open while the source lives: every tensor comes from
        the version whose header was read (one line where the path holds another by now)."""
        if self._fd is None:
            try:
                fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO is not waited on
            except OSError as err:
                raise AttnCliError(f"cannot read {self.path}: {err.strerror or err}") from None
            if identity_of(os.fstat(fd)) != self.header.identity:
                os.close(fd)
                raise changed(self.path)
            self._keep(fd)
        assert self._fd is not None
        return self._fd

    def _keep(self, fd: int) -> None:
        self._fd = fd
        self._opened.record(self.path, self.header.identity, fd)
        weakref.finalize(self, os.close, fd)

    def _dequantize(self, info: TensorInfo, blocks: np.ndarray) -> np.ndarray:
        if not can_dequantize(info.qtype):
            raise AttnCliError(f"{self.path}: tensor {info.name} is stored as {info.qtype.name}, "
                               "which the gguf package cannot dequantize")
        check_fits(blocks.shape[0] * info.dims[0] * FLOAT_BYTES * 2,
                   f"{self.path}: {info.name} as float32")
        values = dequantize(blocks, info.qtype, empty=self._float32)  # (rows, ne0)
        whole = blocks.shape[0] * blocks.shape[1] == info.nbytes
        return values.reshape(info.shape) if whole else values  # the tensor, or (n, ne0) rows

    def _float32(self, shape: tuple[int, ...]) -> np.ndarray:
        return self._buffers.empty(shape, np.float32)


def _owned(values: np.ndarray) -> np.ndarray:
    """float32, C order and writable: a copy only where values is not (a transpose, a view of
    the read buffer as another dtype); dequantized arrays are used as they are."""
    return np.require(values, dtype=np.float32, requirements=["C", "W"])


def open_gguf(path: Path) -> GgufSource:
    """The GGUF file at path as a weight source, or one AttnCliError line naming it; its header
    and tensors are read through one descriptor, so from one version of the file."""
    header, fd = open_header(path)
    try:
        return GgufSource(header, fd)
    except BaseException:
        os.close(fd)
        raise
