"""The quantized matmul under AddressSanitizer and UndefinedBehaviorSanitizer: _qmatmul.c built
with both into a temporary folder and run in a child process (the sanitizer's runtime preloaded)
over every type, vector level, tile tail and thread count, one token with and without the
kernels that make their weights in registers, and under llama.cpp's numerics (the 8-bit
quantizers and integer dot products), each buffer ending where its allocation ends, so
that a read or write one byte past any of them stops the child."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from attncli.models.sources.gguf import qmatmul

SOURCE = Path(qmatmul.__file__).with_name("_qmatmul.c")
ROOT = Path(__file__).resolve().parents[3]

CHILD = r"""
import importlib.util, sys, warnings
import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType as Q
from gguf.quants import dequantize
spec = importlib.util.spec_from_file_location("_qmatmul", sys.argv[1])
native = importlib.util.module_from_spec(spec)
spec.loader.exec_module(native)

def at_end(n, dtype):
    # n items ending exactly where a malloc'd block ends (numpy caches blocks under 1 KB).
    size = np.dtype(dtype).itemsize
    whole = np.empty(max(n * size, 1024) // size, dtype)
    return whole[len(whole) - n:]

rng = np.random.default_rng(0)
checked = 0
for level in (0, 1, 2):
    if native.use_level(level) != level:
        continue
    for code, (block, size) in sorted(native.kinds().items()):
        qtype = Q(code)
        widths = (block, 2 * block, 5 * block) if block > 1 else (1, 15, 17, 64, 65, 300)
        for cols in widths:
            for rows in (1, 3, 4, 9, 66):
                for tokens in (1, 2, 4, 5, 130):
                    for threads in (1, 3):
                        nbytes = rows * cols // block * size
                        w = at_end(nbytes, np.uint8)
                        w[:] = rng.integers(0, 256, nbytes, dtype=np.uint8)
                        blocks = w.reshape(rows, -1)
                        if qtype not in (Q.F32, Q.F16, Q.BF16):
                            for b in blocks.reshape(-1, size):
                                b[:2] = (0x00, 0x20)  # d finite; the rest stays random
                        x = at_end(tokens * cols, np.float32)
                        x[:] = rng.standard_normal(tokens * cols)
                        out = at_end(tokens * rows, np.float32)
                        native.matmul(code, w, cols, x, out, threads)
                        with warnings.catch_warnings(), np.errstate(all="ignore"):
                            warnings.simplefilter("ignore")
                            W = dequantize(blocks, qtype).astype(np.float64)
                            X = x.reshape(tokens, cols).astype(np.float64)
                            ref, mag = X @ W.T, np.abs(X) @ np.abs(W).T
                        ok = ~np.isfinite(mag) | (mag > 1e36) | (
                            np.abs(out.reshape(tokens, rows) - ref) <= 1e-5 * mag + 1e-30)
                        assert ok.all(), (level, qtype.name, cols, rows, tokens, threads)
                        checked += 1
                        if qtype not in (Q.F32, Q.F16, Q.BF16):  # llama.cpp's numerics
                            native.matmul(code, w, cols, x, out, threads, True)
                            checked += 1
                        if tokens == 1:  # one token through the chunk path as well
                            native.use_level(level, False)
                            native.matmul(code, w, cols, x, out, threads)
                            native.use_level(level)
                            checked += 1
    for kind, (block, size) in enumerate(((32, 34), (32, 36), (256, 292))):
        for blocks in (1, 3):
            x = at_end(blocks * block, np.float32)
            x[:] = rng.standard_normal(x.size)
            native.quantize(kind, x, at_end(blocks * size, np.uint8))
print("checked", checked)
"""


def _sanitizer_runtime() -> str | None:
    """libasan's path as gcc knows it, or None where gcc has none."""
    if shutil.which("gcc") is None:
        return None
    found = subprocess.run(["gcc", "-print-file-name=libasan.so"], capture_output=True,
                           text=True, check=False).stdout.strip()
    return found if os.path.isabs(found) and os.path.exists(found) else None


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="gcc's sanitizers: Linux")
@pytest.mark.skipif(_sanitizer_runtime() is None, reason="needs gcc with libasan")
def test_every_kernel_under_address_and_undefined_behaviour_sanitizers(tmp_path: Path) -> None:
    runtime = _sanitizer_runtime()
    assert runtime is not None
    include = sysconfig.get_paths()["include"]
    built = tmp_path / "_qmatmul.so"
    compiled = subprocess.run(
        ["gcc", "-shared", "-fPIC", "-O1", "-g", "-ffp-contract=off", "-pthread",
         "-fsanitize=address,undefined", "-fno-sanitize-recover=all",
         "-fno-omit-frame-pointer", f"-I{include}", str(SOURCE), "-o", str(built)],
        capture_output=True, text=True, check=False)
    assert compiled.returncode == 0, compiled.stderr
    env = {**os.environ, "LD_PRELOAD": runtime, "PYTHONMALLOC": "malloc",
           "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=0:exitcode=99",
           "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1:exitcode=98",
           "OMP_NUM_THREADS": "1"}
    run = subprocess.run([sys.executable, "-c", CHILD, str(built)], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=900, check=False)
    assert run.returncode == 0, run.stderr[-4000:]
    assert "ERROR: AddressSanitizer" not in run.stderr and "runtime error" not in run.stderr
    assert int(run.stdout.split()[-1]) > 1000  # every case ran
