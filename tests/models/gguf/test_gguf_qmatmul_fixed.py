"""One token's Q4_K and Q6_K products on integers (gguf/_qmatmul_fixed.h), at every vector level
this CPU runs: exact where the numbers allow it, within its stated bound where x's block has an
outlier, and x's inf or NaN left to the float32 kernel (the reference's inf or NaN). The
property tests of every kernel (test_gguf_qmatmul.py) hold it to 1e-5·Σ|w·x| as well."""

from __future__ import annotations

import numpy as np
import pytest
from gguf import GGMLQuantizationType

from tests.models.gguf.test_gguf_qmatmul import assert_within_bound, dequantized, level, product

Q = GGMLQuantizationType
pytestmark = pytest.mark.usefixtures("level")
__all__ = ["level"]  # the fixture: every vector level this CPU runs


TYPES = pytest.mark.parametrize("qtype", [Q.Q4_K, Q.Q6_K], ids=lambda q: q.name)


def k_blocks(rng: np.random.Generator, qtype: Q, rows: int, cols: int, d: float,
             dmin: float) -> np.ndarray:
    """(rows, row_bytes) Q4_K or Q6_K blocks: random scales (and Q4_K's mins) and values; d
    (and Q4_K's dmin) as given."""
    size = 144 if qtype == Q.Q4_K else 210
    blocks = rng.integers(0, 256, (rows * cols // 256, size), dtype=np.uint8)
    if qtype == Q.Q4_K:
        blocks[:, 0:2] = np.array([d], np.float16).view(np.uint8)
        blocks[:, 2:4] = np.array([dmin], np.float16).view(np.uint8)
    else:
        blocks[:, 208:210] = np.array([d], np.float16).view(np.uint8)
    return blocks.reshape(rows, -1)


@TYPES
@pytest.mark.parametrize("seed", range(4))
def test_small_integers_give_the_exact_product_rounded_once(qtype: Q, seed: int) -> None:
    # d = 2⁻¹⁰ (Q4_K's dmin 2⁻⁸): every weight a multiple of 2⁻¹⁰ below 4, exact in float32,
    # and x integers up to 100: the float64 product is exact, so an integer kernel whose sums
    # are exact gives it rounded once to float32, bit for bit (float32 sums round each add).
    rng = np.random.default_rng(seed)
    rows, cols = 40, 1024
    blocks = k_blocks(rng, qtype, rows, cols, 2.0**-10, 2.0**-8)
    x = rng.integers(-100, 101, (1, cols)).astype(np.float32)
    weights = dequantized(blocks, qtype).astype(np.float64)
    exact = (x.astype(np.float64) @ weights.T).astype(np.float32)  # (1, rows)
    assert np.array_equal(product(blocks, qtype, cols, x), exact)


@TYPES
@pytest.mark.parametrize("outlier", [1e3, 1e6, 1e12])
def test_a_block_with_an_outlier_stays_within_the_fixed_points_bound(qtype: Q,
                                                                    outlier: float) -> None:
    # Each value of x is on its block's grid of 2^(E−30) (E: the exponent of the block's
    # largest), so a value beside an outlier may move by half a step: the product within
    # 1e-5·Σ|w·x| plus, per block, 2^(E−30)·Σ|w| over the block (_qmatmul_fixed.h's bound).
    rng = np.random.default_rng(7)
    rows, cols = 24, 768
    blocks = k_blocks(rng, qtype, rows, cols, 2.0**-12, 2.0**-13)
    x = rng.standard_normal((1, cols)).astype(np.float32)
    x[0, ::256] = outlier  # one outlier in each block, the first value
    weights = dequantized(blocks, qtype).astype(np.float64)
    x64 = x.astype(np.float64)
    ref = x64 @ weights.T  # (1, rows)
    grid = np.repeat(2.0 ** (np.frexp(np.abs(x64).reshape(-1, 256).max(axis=1))[1] - 30), 256)
    bound = 1e-5 * (np.abs(x64) @ np.abs(weights).T) + (np.abs(weights) @ grid)[None]
    assert np.all(np.abs(product(blocks, qtype, cols, x) - ref) <= bound)


@TYPES
@pytest.mark.parametrize("special", [np.inf, -np.inf, np.nan])
def test_an_inf_or_nan_in_x_gives_the_references_inf_or_nan(qtype: Q, special: float) -> None:
    rng = np.random.default_rng(3)
    rows, cols = 12, 512
    blocks = k_blocks(rng, qtype, rows, cols, 2.0**-12, 2.0**-13)
    x = rng.standard_normal((1, cols)).astype(np.float32)
    x[0, 300] = special
    weights = dequantized(blocks, qtype).astype(np.float64)
    with np.errstate(all="ignore"):
        ref = x.astype(np.float64) @ weights.T  # (1, rows)
    out = product(blocks, qtype, cols, x)
    assert np.array_equal(np.isnan(out), np.isnan(ref))
    assert np.array_equal(out[np.isinf(ref)], ref[np.isinf(ref)])


@TYPES
def test_tiny_values_keep_their_digits(qtype: Q) -> None:
    # A block of subnormal float32 values: its grid is 2^(E−30) of their own size, not 0.
    rng = np.random.default_rng(5)
    rows, cols = 8, 256
    blocks = k_blocks(rng, qtype, rows, cols, 1.0, 0.5)
    x = (rng.standard_normal((1, cols)) * 1e-39).astype(np.float32)
    weights = dequantized(blocks, qtype).astype(np.float64)
    x64 = x.astype(np.float64)
    ref = x64 @ weights.T
    out = product(blocks, qtype, cols, x)
    assert np.all(np.abs(out - ref) <= 1e-5 * (np.abs(x64) @ np.abs(weights).T) + 1e-45)
    assert np.any(out != 0)


@TYPES
@pytest.mark.parametrize("d", [-1.0, 2.0**-24, 65504.0, np.inf, -np.inf, np.nan])
def test_the_scales_edges(qtype: Q, d: float) -> None:
    # The smallest subnormal and the largest half as d (and Q4_K's dmin); d infinite or NaN
    # (the block then dequantized and added in float32: inf·0 is NaN, as the reference's); Q6_K's
    # values of 0 − 32 and of q = 32 (weights 0, −0 for a negative d).
    rng = np.random.default_rng(int(abs(d)) % 1000 if np.isfinite(d) else 3)
    rows, cols = 5, 512
    blocks = k_blocks(rng, qtype, rows, cols, d, d).reshape(rows * cols // 256, -1)
    if qtype == Q.Q6_K:
        blocks[::2, :192] = 0  # q = 0 | 0 << 4: every value 0 − 32
        blocks[1::4, :128] = 0x00
        blocks[1::4, 128:192] = 0xAA  # high bits 2: q = 32, weights 0
    blocks = blocks.reshape(rows, -1)
    x = rng.standard_normal((1, cols)).astype(np.float32)
    assert_within_bound(product(blocks, qtype, cols, x), dequantized(blocks, qtype), x)
