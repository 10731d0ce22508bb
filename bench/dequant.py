"""GGUF dequantization (#37): attncli's C dequantizers beside the gguf package's numpy ones.

    .venv/bin/python bench/dequant.py                     # every type, 1..N threads
    .venv/bin/python bench/dequant.py --types Q8_0 Q4_K   # some types only
    .venv/bin/python bench/dequant.py --no-gguf           # skip gguf's (seconds a type)

One tensor of an 8B model's ffn shape (14336 × 4096, Llama 3.1 8B's gate/up/down) of random
blocks with finite scales, per type. Each time is the fastest of --repeat runs into a fresh
output, as source.py calls it. GB/s counts the float32 written (235 MB); "× copy" divides the
time by a plain copy of that float32 array on one thread into fresh memory (numpy's copy), the
memory-speed floor of anything that returns a new array: the kernel's first touch of each fresh
page is most of it (a copy into memory already touched, numpy's copyto, is printed too).
Threads run 1..N (N: dequant.threads(), every core unless OMP_NUM_THREADS says otherwise), with
torch's float32 matmul of 50 tokens through the same weight beside them for the matmuls' scaling.
Prints a table and writes bench/results/dequant.json.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType
from gguf.quants import dequantize as gguf_dequantize

from attncli.models.sources.gguf import dequant

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "dequant.json"
ROWS, COLS, TOKENS = 14336, 4096, 50
# Where each type keeps its f16 scales, as tests/models/gguf/test_gguf_dequant.py lists them.
SCALES = {"Q4_0": (0,), "Q4_1": (0, 2), "Q5_0": (0,), "Q5_1": (0, 2), "Q8_0": (0,),
          "Q2_K": (80, 82), "Q3_K": (108,), "Q4_K": (0, 2), "Q5_K": (0, 2), "Q6_K": (208,),
          "IQ4_NL": (0,), "IQ4_XS": (0,)}
TYPES = ["Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K",
         "IQ4_NL", "IQ4_XS", "F16", "BF16", "F32"]


def fastest(work: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - start)
    return best


def tensor_bytes(name: str) -> np.ndarray:
    """(ROWS, row_bytes) of random blocks whose scales are finite halves in [1e-3, 1e-1]."""
    qtype = GGMLQuantizationType[name]
    block, size = GGML_QUANT_SIZES[qtype]
    rng = np.random.default_rng(0)
    if name in ("F16", "BF16", "F32"):
        values = rng.standard_normal((ROWS, COLS), dtype=np.float32)
        kind = {"F16": np.float16, "F32": np.float32}.get(name)
        return (values.astype(kind) if kind else (values.view(np.uint32) >> 16).astype(np.uint16)
                ).view(np.uint8)
    data = rng.integers(0, 256, (ROWS * COLS // block, size), dtype=np.uint8)
    for offset in SCALES[name]:
        scales = rng.uniform(1e-3, 1e-1, len(data)).astype(np.float16)
        data[:, offset:offset + 2] = scales.view(np.uint8).reshape(-1, 2)
    return data.reshape(ROWS, -1)


def measure(name: str, counts: list[int], repeat: int, with_gguf: bool) -> dict[str, Any]:
    qtype = GGMLQuantizationType[name]
    data = tensor_bytes(name)
    row: dict[str, Any] = {"type": name, "bytes": data.nbytes, "threads": {}}
    for count in counts:
        row["threads"][count] = fastest(lambda n=count: dequant.dequantize(data, qtype, n), repeat)
    if with_gguf:
        row["gguf_s"] = fastest(lambda: gguf_dequantize(data, qtype), 1)
    return row


def matmul_times(counts: list[int], repeat: int) -> dict[int, float]:
    """50 tokens through a float32 (14336, 4096) weight, as a layer's ffn takes them."""
    weight = torch.randn(ROWS, COLS)
    tokens = torch.randn(TOKENS, COLS)
    before = torch.get_num_threads()
    times = {}
    for count in counts:
        torch.set_num_threads(count)
        times[count] = fastest(lambda: tokens @ weight.T, repeat)
    torch.set_num_threads(before)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--types", nargs="+", default=TYPES, choices=TYPES)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-gguf", dest="gguf", action="store_false")
    args = parser.parse_args()
    counts = list(range(1, dequant.threads() + 1))
    values = ROWS * COLS
    source = np.random.default_rng(1).standard_normal(values, dtype=np.float32)
    target = np.empty_like(source)
    copyto_s = fastest(lambda: np.copyto(target, source), args.repeat)
    copy_s = fastest(source.copy, args.repeat)
    gb = values * 4 / 1e9
    print(f"{ROWS} × {COLS} float32 ({gb * 1e3:.0f} MB); copy to fresh memory "
          f"{copy_s * 1e3:.1f} ms ({gb / copy_s:.1f} GB/s), to touched memory "
          f"{copyto_s * 1e3:.1f} ms; C code: {dequant.ENABLED}")
    heads = " ".join(f"{f'{n} thr':>16}" for n in counts)
    print(f"{'type':<7} {'gguf s':>7} {heads}   (ms, GB/s, × copy)  gguf/ours")
    rows = []
    for name in args.types:
        row = measure(name, counts, args.repeat, args.gguf)
        rows.append(row)
        cells = " ".join(f"{t * 1e3:5.0f} {gb / t:4.1f} {t / copy_s:4.1f}"
                         for t in row["threads"].values())
        ggufs = f"{row['gguf_s']:7.2f}" if "gguf_s" in row else f"{'-':>7}"
        ratio = f"{row['gguf_s'] / min(row['threads'].values()):6.0f}×" if "gguf_s" in row else ""
        print(f"{name:<7} {ggufs} {cells}  {ratio}", flush=True)
    matmul = matmul_times(counts, args.repeat)
    print("matmul (50 × 4096) @ (4096 × 14336):",
          ", ".join(f"{n} thr {t * 1e3:.1f} ms" for n, t in matmul.items()))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"shape": [ROWS, COLS], "copy_s": copy_s,
                                   "copyto_s": copyto_s, "types": rows, "matmul_s": matmul},
                                  indent=1))


if __name__ == "__main__":
    main()
