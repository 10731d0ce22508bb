"""The one-token kernels that make each weight in registers (_qmatmul_body.h, _qmatmul_avx2.h)
against the chunk path they replace (a row dequantized a chunk at a time, then dot64's lanes),
at each vector level that has them: the same weights, lanes and order of sums, so the same bits
(NaN where the chunk path gives NaN), on random blocks with any scale bits (inf, NaN, subnormal
halves) or sane ones, over odd and even counts of blocks and, for F16 and BF16, rows that end
past the last 64 values. One token's Q4_K and Q6_K are taken on integers instead (their own
test_gguf_qmatmul_fixed.py); every kernel is also held to the float64 reference's bound here.
Q4_0's, Q4_1's and Q8_0's kernels fuse every multiply-add, where the chunk path adds a row's
last 32 values after its last whole 64 with a product and a sum (dot64's tail): their bits are
compared on rows of an even count of blocks only (a model's rows are)."""

from __future__ import annotations

import numpy as np
import pytest
from gguf import GGMLQuantizationType
from hypothesis import given
from hypothesis import strategies as st

from attncli.models.sources.gguf import qmatmul
from tests.models.gguf.test_gguf_dequant import any_halves, sane_halves
from tests.models.gguf.test_gguf_qmatmul import (
    PROPERTY,
    assert_within_bound,
    cases,
    dequantized,
    product,
)

Q = GGMLQuantizationType
IN_REGISTERS = (Q.F16, Q.BF16, Q.Q4_0, Q.Q4_1, Q.Q8_0, Q.Q5_K)
BLOCK32 = (Q.Q4_0, Q.Q4_1, Q.Q8_0)


def _at(level: int, registers: bool) -> None:
    native = qmatmul._native
    assert native is not None
    if native.use_level(level, registers) != level:
        native.use_level(-1)
        pytest.skip(f"this CPU cannot run level {level}")


def assert_same_bits(got: np.ndarray, ref: np.ndarray) -> None:
    """got equals ref bit for bit where ref is a number, and is NaN where ref is NaN."""
    nan = np.isnan(ref)
    assert np.array_equal(np.isnan(got), nan)
    assert np.array_equal(got[~nan].view(np.uint32), ref[~nan].view(np.uint32))


@pytest.mark.slow
@pytest.mark.parametrize("level", [1, 2], ids=["avx2", "avx512"])
@pytest.mark.parametrize("qtype", IN_REGISTERS, ids=lambda q: q.name)
@PROPERTY
@given(data=st.data())
def test_one_token_in_registers_gives_the_chunk_paths_bits(level: int, qtype: Q,
                                                           data: st.DataObject) -> None:
    _at(level, True)
    try:
        halves = any_halves if data.draw(st.booleans()) else sane_halves  # F16 rows of numbers too
        blocks, cols, x = data.draw(cases(qtype, halves))
        weights = dequantized(blocks, qtype)
        for token in x:
            _at(level, True)
            fast = product(blocks, qtype, cols, token[None])
            _at(level, False)
            chunks = product(blocks, qtype, cols, token[None])
            if qtype not in BLOCK32 or cols // 32 % 2 == 0:  # (see the top)
                assert_same_bits(fast, chunks)
            assert_within_bound(fast, weights, token[None])
    finally:
        qmatmul._native.use_level(-1)  # type: ignore[union-attr]


@pytest.mark.parametrize("d", [-1.0, 2.0**-24, 65504.0, float("inf"), float("-inf"), float("nan")])
def test_q5_k_at_the_scales_edges(d: float) -> None:
    # The smallest subnormal and the largest half as d and dmin, and both infinite or NaN
    # (inf·0 is NaN). Every row's bits as the chunk path's.
    qtype = Q.Q5_K
    rng = np.random.default_rng(int(abs(d)) % 1000 if np.isfinite(d) else 3)
    rows, cols = 5, 512
    blocks = rng.integers(0, 256, (rows * cols // 256, 176), dtype=np.uint8)
    half = np.array([d], np.float16).view(np.uint8)
    blocks[:, 0:2] = half
    blocks[:, 2:4] = half
    blocks = blocks.reshape(rows, -1)
    x = rng.standard_normal((1, cols)).astype(np.float32)
    native = qmatmul._native
    assert native is not None
    levels = [level for level in (1, 2) if level <= native.use_level(-1)]
    if not levels:
        pytest.skip("this CPU runs no vector level with these kernels")
    try:
        for level in levels:
            _at(level, True)
            fast = product(blocks, qtype, cols, x)
            _at(level, False)
            assert_same_bits(fast, product(blocks, qtype, cols, x))
            assert_within_bound(fast, dequantized(blocks, qtype), x)
    finally:
        qmatmul._native.use_level(-1)  # type: ignore[union-attr]
