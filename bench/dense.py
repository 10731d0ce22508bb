"""The products: the kernels' matrix path against dequantize-then-BLAS, by type and rows (the
prompt's), and the one-token kernel against the float32 floor (a decode step's).

For each type the kernels take, a matrix of random blocks (sane scales) is multiplied by rows of
random activations two ways, by CPU time (`time.thread_time`, best of --repeats, alternated):
QuantizedMatrix.linear on the kernels (llama.cpp's numerics off, outside any dense_rows) and the
same inside dense_rows(1) (a piece dequantized at a time, torch's F.linear). Prints one JSON
line per type: kernels' time over the dense path's at each row count (> 1: the dense path is
faster), the evidence for qmatmul.DENSE_FROM, and writes them to bench/results/dense.json (--out).
One thread unless --threads.

A decode step multiplies one row: there each type's one-token kernel (weights read from memory,
made in registers) is timed against torch's float32 matrix × vector on weights that are float32
already and sit in the second-level cache (FLOOR_ROWS × size: no dequantizing and no memory
traffic, one multiply-add per weight), per weight: `floor_over_kernel` is the kernels' speed as
a share of that floor (1: as fast as torch's float32 arithmetic goes on this CPU). A float32
kernel does one multiply-add per weight, so none goes far past the floor (torch's product is
not at the CPU's peak: Q4_0's and Q8_0's kernels measured 1.05 and 1.21); llama.cpp's integer
products (32 multiply-adds an instruction) do, and --numerics llama.cpp with them.

    python bench/dense.py --size 4096 --rows 8,16,32,64,128
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType
from options import thread_count

from attncli.models.sources.gguf import qmatmul
from attncli.models.sources.gguf.qmatmul import QuantizedMatrix, dense_rows

RESULTS = Path(__file__).resolve().parents[1] / "bench" / "results" / "dense.json"
Q = GGMLQuantizationType
TYPES = (Q.Q4_0, Q.Q4_1, Q.Q5_K, Q.Q8_0, Q.F16, Q.BF16, Q.Q4_K, Q.Q6_K)
# where each type's f16 scales sit in its block, and a sane value for them (2⁻¹⁵·1.25, 2⁻¹⁵·1.0)
SCALES = {Q.Q4_K: (0, 2), Q.Q5_K: (0, 2), Q.Q6_K: (-2,), Q.Q8_0: (0,), Q.Q4_0: (0,),
          Q.Q4_1: (0, 2)}


def random_matrix(qtype: GGMLQuantizationType, rows: int, cols: int,
                  rng: np.random.Generator) -> QuantizedMatrix:
    """rows × cols of random blocks of qtype, their scales sane."""
    block, size = GGML_QUANT_SIZES[qtype]
    if qtype == Q.F16:
        data = rng.standard_normal((rows, cols)).astype(np.float16).view(np.uint8)
    elif qtype == Q.BF16:
        top = rng.standard_normal((rows, cols)).astype(np.float32).view(np.uint32) >> 16
        data = top.astype(np.uint16).view(np.uint8)
    else:
        data = rng.integers(0, 256, (rows, cols // block * size), dtype=np.uint8)
        cells = data.reshape(-1, size)
        for offset in SCALES[qtype]:
            start = offset % size
            cells[:, start:start + 2] = [0x00, 0x20]
    return QuantizedMatrix(data, qtype, cols)


def best(run: Callable[[], object], repeats: int) -> float:
    """The least CPU time of repeats runs (after one untimed)."""
    run()
    times = []
    for _ in range(repeats):
        start = time.thread_time()
        run()
        times.append(time.thread_time() - start)
    return min(times)


def _product(matrix: QuantizedMatrix, x: torch.Tensor, at_least: int) -> torch.Tensor:
    """matrix · xᵀ inside dense_rows(at_least): the dense path from at_least rows, else the
    kernels (a context of its own: DENSE_FROM does not apply)."""
    with dense_rows(at_least):
        return matrix.linear(x)


FLOOR_ROWS = 48  # float32 rows of the floor's matrix: 48 × 4,096 × 4 bytes = 768 KB, in cache


def per_weight(run: Callable[[], object], weights: int, repeats: int, calls: int = 20) -> float:
    """CPU seconds per weight of run (calls of it, best of repeats)."""
    return best(lambda: [run() for _ in range(calls)], repeats) / (calls * weights)


def one_row(qtype: GGMLQuantizationType, matrix: QuantizedMatrix, size: int,
            repeats: int) -> dict[str, float]:
    """The one-token kernel and the float32 floor: seconds per weight of each, and their ratio."""
    x = torch.randn(1, size)  # (1, cols)
    floor = torch.randn(FLOOR_ROWS, size)  # (FLOOR_ROWS, cols): float32 weights, in cache
    with qmatmul.llama_cpp_numerics(False):
        kernel = per_weight(lambda: matrix.linear(x), matrix.shape[0] * size, repeats, 2)
    dense = per_weight(lambda: torch.nn.functional.linear(x, floor), FLOOR_ROWS * size, repeats,
                       200)
    return {"kernel_ns_per_weight": round(kernel * 1e9, 4),
            "floor_ns_per_weight": round(dense * 1e9, 4),
            "floor_over_kernel": round(dense / kernel, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=4096, help="rows and columns")
    parser.add_argument("--rows", default="8,16,32,64,128", help="activation rows timed")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=thread_count, default=1)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    lines = []
    for qtype in TYPES:
        if not qmatmul.computes(qtype):
            continue
        matrix = random_matrix(qtype, args.size, args.size, rng)
        ratios = {}
        for count in (int(r) for r in args.rows.split(",")):
            x = torch.randn(count, args.size)  # (T, cols)
            kernels = best(lambda m=matrix, x=x, n=count: _product(m, x, n + 1), args.repeats)
            dense = best(lambda m=matrix, x=x: _product(m, x, 1), args.repeats)
            ratios[count] = round(kernels / dense, 3)
        lines.append({"type": qtype.name, "kernels_over_dense": ratios,
                      "one_row": one_row(qtype, matrix, args.size, args.repeats)})
        print(json.dumps(lines[-1]), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"size": args.size, "threads": args.threads,
                                    "types": lines}, indent=1) + "\n")


if __name__ == "__main__":
    main()
