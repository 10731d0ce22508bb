"""The dense path of QuantizedMatrix.linear (a prompt's DENSE_FROM rows or more, or within
dense_rows): its memory, a result and one piece at a time, under an address-space limit, and its
values where threads make products side by side, against torch's F.linear on the dequantized
matrix."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType as Q

from attncli.models.sources.gguf import qmatmul
from tests.conftest import ROOT
from tests.models.gguf.test_gguf_qmatmul import assert_within_bound

# The child: a Q8_0 matrix of ROWS x 32 whose product with TOKENS rows (128 MB of float32
# results) is made in pieces of 2,048 rows, under RLIMIT_AS of the result and MARGIN past what
# the process holds once one small product has made the scratch and started BLAS.
CHILD = """
import resource, sys
import numpy as np, torch
from attncli.models.sources.gguf import qmatmul
rows, tokens, margin = (int(a) for a in sys.argv[1:4])
qmatmul.DENSE_PIECE = 2048 * 32
blocks = np.random.default_rng(0).integers(0, 256, (rows, 34), dtype=np.uint8)
blocks[:, 0:2] = [0x00, 0x20]  # d: 2^-15 (1 + 1/4), finite
matrix = qmatmul.QuantizedMatrix(blocks, qmatmul.GGMLQuantizationType.Q8_0, 32)
x = torch.randn(tokens, 32, generator=torch.Generator().manual_seed(0))
qmatmul.QuantizedMatrix(blocks[:4096], matrix.qtype, 32).linear(x)  # scratch, BLAS, pieces
held = next(int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith("VmSize"))
result = rows * tokens * 4
resource.setrlimit(resource.RLIMIT_AS, (held + result + margin, resource.RLIM_INFINITY))
y = matrix.linear(x)
print(tuple(y.shape), float(y[:, -1].abs().sum()))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS and /proc: Linux")
def test_a_product_in_pieces_holds_its_result_once() -> None:
    """128 pieces' products written into the one result: within the result's bytes and 48 MB
    (the pieces kept apart and joined at the end need the result's bytes twice)."""
    rows, tokens = 262_144, 128  # 128 MB of float32 results
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MALLOC_ARENA_MAX": "2"}
    done = subprocess.run([sys.executable, "-c", CHILD, str(rows), str(tokens),
                           str(48 * 2**20)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith(f"({tokens}, {rows})")


@pytest.mark.usefixtures("dequantized_pieces")
def test_threads_making_prompt_products_side_by_side_each_get_their_own() -> None:
    """Four threads, each with its own matrix and rows (DENSE_FROM of them: the per-thread
    scratch), each product within the kernels' bound of F.linear's on the dequantized matrix (a
    scratch shared between threads would mix one matrix's pieces into another's product)."""
    rng = np.random.default_rng(11)
    matrices, inputs = [], []
    for _ in range(4):
        blocks = rng.integers(0, 256, (40, 2 * 144), dtype=np.uint8)
        blocks.reshape(-1, 144)[:, 0:4] = [0x00, 0x20, 0x00, 0x1C]  # d, dmin
        matrices.append(qmatmul.QuantizedMatrix(blocks, Q.Q4_K, 512))
        inputs.append(torch.from_numpy(rng.standard_normal(
            (qmatmul.DENSE_FROM, 512)).astype(np.float32)))
    def product(i: int) -> torch.Tensor:
        return torch.stack([matrices[i].linear(inputs[i]) for _ in range(20)])

    with ThreadPoolExecutor(4) as pool:
        together = list(pool.map(product, range(4)))
    for m, x, many in zip(matrices, inputs, together, strict=True):
        for y in many:
            assert_within_bound(y.numpy(), m.dequantized().numpy(), x.numpy())
