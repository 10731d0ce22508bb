"""GGUF tensors to float32 at memory speed: _dequant.c over whole blocks, split across threads.

The C code computes what the gguf package's numpy dequantizers compute, bit for bit
(tests/models/gguf/test_gguf_dequant.py holds every type to them on random blocks, hostile scales
included), in one pass over the bytes where numpy makes a dozen temporaries of the tensor. A type
the C code lacks, a build without a C compiler, or ATTNCLI_FUSED=0 in the environment (the switch
long/fused.py reads too) leaves the work to gguf.quants.dequantize.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from types import ModuleType

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType
from gguf.quants import dequantize as gguf_dequantize

_native: ModuleType | None
try:
    import attncli.models.sources.gguf._dequant as _native
except ImportError:  # built without a C compiler: the gguf package does it all
    _native = None

ENABLED = _native is not None and os.environ.get("ATTNCLI_FUSED", "1") != "0"
# The C code's types whose block layout is the one the gguf package gives (all of them, unless
# a future gguf changes one: that type then goes back to gguf's own dequantizer).
NATIVE_TYPES = frozenset(
    qtype for qtype in GGMLQuantizationType
    if _native is not None and _native.layouts().get(int(qtype)) == GGML_QUANT_SIZES.get(qtype))
SHARE = 1 << 18  # the fewest values (1 MB of float32) worth a thread of their own


def threads() -> int:
    """OMP_NUM_THREADS's first number where the user set one in ASCII digits (as OpenMP reads
    "4,2"), else every core this process may run on; never an error of its own."""
    setting = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip().removeprefix("+")
    if setting.isascii() and setting.isdigit() and int(setting) > 0:
        return int(setting)
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS and Windows have no affinity masks
        return os.cpu_count() or 1


def native(qtype: GGMLQuantizationType) -> bool:
    """Whether the C code dequantizes this type here."""
    return ENABLED and qtype in NATIVE_TYPES


def dequantize(blocks: np.ndarray, qtype: GGMLQuantizationType, workers: int | None = None,
               empty: Callable[[tuple[int, ...]], np.ndarray] | None = None) -> np.ndarray:
    """Bytes (..., row_bytes) of whole blocks as float32 (..., values), as
    gguf.quants.dequantize returns them, on up to workers threads (default: threads()); empty
    makes the float32 array written into (default: a new one)."""
    if not native(qtype):
        # inf·0 and NaN from hostile scales: the values carry them, as the C code's do (a run
        # refuses them in one line); numpy's RuntimeWarnings would print before that line.
        with np.errstate(all="ignore"):
            return gguf_dequantize(blocks, qtype)
    assert _native is not None
    block, size = GGML_QUANT_SIZES[qtype]
    if blocks.shape[-1] % size:
        raise ValueError(f"rows of {blocks.shape[-1]} bytes are not whole {qtype.name} blocks "
                         f"of {size} bytes")
    data = np.ascontiguousarray(blocks).view(np.uint8).reshape(-1)  # (blocks·size,)
    shape = (*blocks.shape[:-1], blocks.shape[-1] // size * block)
    out = np.empty(shape, dtype=np.float32) if empty is None else empty(shape)
    values = out.reshape(-1)  # (blocks·block,), a view
    count = data.size // size
    parts = max(1, min(workers or threads(), values.size // SHARE))
    edges = [count * i // parts for i in range(parts + 1)]  # each part's first block

    def part(i: int) -> None:
        start, end = edges[i], edges[i + 1]
        _native.dequantize(int(qtype), data[start * size:end * size],
                           values[start * block:end * block])

    if parts == 1:
        part(0)
    else:  # the C code releases the GIL: the parts run side by side
        with ThreadPoolExecutor(parts) as pool:
            list(pool.map(part, range(parts)))
    return out
