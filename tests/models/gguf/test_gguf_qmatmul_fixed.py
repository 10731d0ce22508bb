"""One token's Q4_K and Q6_K products on integers (gguf/_qmatmul_fixed.h), at every vector level
this CPU runs: exact where the numbers allow it, within its stated bound where x's block has an
outlier, and x's inf or NaN left to the float32 kernel (the reference's inf or NaN). The
property tests of every kernel (test_gguf_qmatmul.py) hold it to 1e-5·Σ|w·x| as well."""

from __future__ import annotations

import numpy as np
import pytest
from gguf import GGMLQuantizationType

from attncli.models.sources.gguf import qmatmul
from tests.models.gguf.test_gguf_qmatmul import assert_within_bound, dequantized, product

Q = GGMLQuantizationType
# (vector level, VNNI's instructions where the CPU has them): AVX-512 with and without
KERNELS = [(0, True), (1, True), (2, True), (2, False)]


@pytest.fixture(autouse=True, params=KERNELS, ids=["baseline", "avx2", "avx512", "avx512-madd"])
def kernel(request: pytest.FixtureRequest):  # noqa: ANN201
    """Each kernel this CPU runs: every vector level, and AVX-512 both with VNNI's vpdpwssd
    (where the CPU has it) and with vpmaddwd and an add."""
    native = qmatmul._native
    assert native is not None
    level, vnni = request.param
    if native.use_level(level, True, vnni) != level:
        native.use_level(-1)
        pytest.skip(f"this CPU cannot run level {level}")
    yield request.param
    native.use_level(-1)


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


def assert_exact(blocks: np.ndarray, qtype: Q, cols: int, x: np.ndarray) -> None:
    """The kernel's product equals the float64 product (exact for the cases given) rounded
    once to float32, bit for bit (float32 sums would round each add)."""
    weights = dequantized(blocks, qtype).astype(np.float64)
    exact = (x.astype(np.float64) @ weights.T).astype(np.float32)  # (1, rows)
    assert np.array_equal(product(blocks, qtype, cols, x), exact)


@TYPES
@pytest.mark.parametrize("outlier", [1e3, 1e6, 1e12])
def test_a_block_with_an_outlier_stays_within_the_fixed_points_bound(qtype: Q,
                                                                    outlier: float) -> None:
    # Each value of x is on its block's grid of 2^(E−29) (E: the exponent of the block's
    # largest), so a value beside an outlier may move by half a step, 2^(E−30): the product within
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
    # A block of subnormal float32 values: its grid is 2^(E−29) of their own size, not 0.
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


@TYPES
@pytest.mark.parametrize("grid", ["integers", "digits"])
@pytest.mark.parametrize("seed", range(3))
def test_the_exact_product_rounded_once(qtype: Q, grid: str, seed: int) -> None:
    # d = 2⁻¹⁰ (Q4_K's dmin 2⁻⁸): every weight a multiple of 2⁻¹⁰ below 16, exact in float32.
    # integers: x up to 100, K = x·2²² (D0 = 0); digits: a block whose largest value is 0.5
    # puts x on the grid 2⁻²⁹, values n·2⁻²⁹ (|n| < 2²³) are K = n, both digits in use. Either
    # way the float64 product is exact (multiples of 2⁻³⁹ below 2⁴⁸): a digit misplaced or
    # dropped anywhere shows.
    rng = np.random.default_rng(seed)
    rows, cols = 24, 768
    blocks = k_blocks(rng, qtype, rows, cols, 2.0**-10, 2.0**-8)
    if grid == "integers":
        x = rng.integers(-100, 101, (1, cols)).astype(np.float32)
    else:
        x = (rng.integers(-(2**23) + 1, 2**23, (1, cols)) * 2.0**-29).astype(np.float32)
        x[0, ::256] = 0.5
    assert_exact(blocks, qtype, cols, x)


@TYPES
def test_the_int32_lanes_at_their_largest(qtype: Q) -> None:
    # Every weight at its type's largest integer (Q4_K: sc 63 by q 15; Q6_K: sc −128 by
    # q − 32 = −32, 4,096) against D0 = 32,767 everywhere but each block's largest value: a lane
    # sums to 2,147,418,112 (Q6_K), 65,535 below int32's largest; still the exact product.
    rows, cols = 4, 512
    size = 144 if qtype == Q.Q4_K else 210
    blocks = np.zeros((rows * cols // 256, size), dtype=np.uint8)
    if qtype == Q.Q4_K:
        blocks[:, 0:2] = np.array([2.0**-10], np.float16).view(np.uint8)
        # scale_min_k's bytes: groups 0..3's scales 63 with groups 4..7's top bits, every min
        # 0, groups 4..7's low scale bits 15: every scale 63
        blocks[:, 4:16] = [0xFF] * 4 + [0x00] * 4 + [0x0F] * 4
        blocks[:, 16:] = 0xFF  # q 15
    else:
        blocks[:, 192:208] = 0x80  # sc −128; ql = qh = 0: q − 32 = −32
        blocks[:, 208:210] = np.array([2.0**-10], np.float16).view(np.uint8)
    blocks = blocks.reshape(rows, -1)
    weights = dequantized(blocks, qtype).astype(np.float64)
    assert np.all(np.abs(weights) == (945 if qtype == Q.Q4_K else 4096) * 2.0**-10)
    x = np.full((1, cols), 32767 * 2.0**-29, dtype=np.float32)
    x[0, ::256] = 0.5  # the grid 2⁻²⁹: K = 32,767 (D0 = 32,767, D1 = 0)
    assert_exact(blocks, qtype, cols, x)


@TYPES
def test_a_row_of_finite_and_infinite_scales(qtype: Q) -> None:
    # Blocks with an inf or NaN d beside finite ones in the same row: the finite ones on the
    # integers, the others dequantized and added in float32, the row the reference's inf or NaN.
    rng = np.random.default_rng(11)
    rows, cols = 6, 1024
    blocks = k_blocks(rng, qtype, rows, cols, 2.0**-12, 2.0**-13).reshape(rows * 4, -1)
    offset = 0 if qtype == Q.Q4_K else 208
    blocks[1::8, offset:offset + 2] = np.array([np.inf], np.float16).view(np.uint8)
    blocks[6::8, offset:offset + 2] = np.array([np.nan], np.float16).view(np.uint8)
    blocks = blocks.reshape(rows, -1)
    x = rng.standard_normal((1, cols)).astype(np.float32)
    assert_within_bound(product(blocks, qtype, cols, x), dequantized(blocks, qtype), x)


@TYPES
def test_values_near_the_largest_float32(qtype: Q) -> None:
    # A block whose largest value is 3e38 (E = 128, beside FLT_MAX's 3.4e38): its grid 2⁹⁹.
    rng = np.random.default_rng(13)
    rows, cols = 6, 512
    blocks = k_blocks(rng, qtype, rows, cols, 2.0**-24, 2.0**-24)
    x = rng.standard_normal((1, cols)).astype(np.float32)
    x[0, :256] *= np.float32(1e37)
    x[0, 7] = np.float32(3e38)
    weights = dequantized(blocks, qtype).astype(np.float64)
    assert_within_bound(product(blocks, qtype, cols, x), weights, x)
