"""llama.cpp's numerics in the quantized matmul (gguf/_qmatmul_q8.h): the 8-bit activation
quantizers against the gguf package's Q8_0 and numpy transcriptions of ggml's Q8_1 and Q8_K
reference quantizers, and the integer dot products against numpy.

The dot products' reference: each weight block's integers (gguf's dequantizer run on the block
with d = 1 and the min scale 0, so it returns scale·q exactly; with d = 0 and dmin = 1, -m),
multiplied by the activations' int8 in int64, exact, then the float32 terms the kernel adds
summed in float64. The K-types' terms are each block's d_w·d_x·isum, added block after block;
the legacy types' are each block's 8 lanes d_w·d_x·Σ(4 values) (and m_w·s_x), added in 8
accumulators and a tree of 3 levels, as ggml's AVX2 code adds them. Either way at most 4
roundings a term and one per add, so the kernel is within (blocks + 4)·2⁻²⁴·Σ|term| of the
exact sum (blocks ≤ 40 here: under 2.7·10⁻⁶·Σ|term|), held to 1e-5·Σ|term|. The legacy types'
order itself is pinned bit for bit by a transcription of ggml's AVX2 code (exact fractions,
each fma rounded once to float32).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType
from gguf.quants import dequantize as gguf_dequantize
from gguf.quants import quantize as gguf_quantize
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attncli.models.sources.gguf import qmatmul
from tests.models.gguf.test_gguf_dequant import SCALES, any_halves, sane_halves
from tests.models.gguf.test_gguf_qmatmul import level, weights_of  # noqa: F401
from tests.tolerance import assert_near

Q = GGMLQuantizationType
PROPERTY = settings(max_examples=30, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.differing_executors,
                                           HealthCheck.function_scoped_fixture])
Q8_0, Q8_1, Q8_K = 0, 1, 2  # the C code's activation kinds
ACTIVATION = {Q.Q8_0: Q8_0, Q.Q4_0: Q8_0, Q.Q5_0: Q8_0, Q.Q4_1: Q8_1, Q.Q5_1: Q8_1,
              Q.Q4_K: Q8_K, Q.Q5_K: Q8_K, Q.Q6_K: Q8_K}
BYTES = {Q8_0: 34, Q8_1: 36, Q8_K: 292}
BLOCK = {Q8_0: 32, Q8_1: 32, Q8_K: 256}
BOUND = 1e-5  # of Σ|term| (see the top)


def quantized(kind: int, x: np.ndarray) -> np.ndarray:
    """x (n,) float32 as the C code's Q8 blocks: (n / block, bytes)."""
    assert qmatmul._native is not None
    out = np.zeros((x.size // BLOCK[kind], BYTES[kind]), dtype=np.uint8)
    qmatmul._native.quantize(kind, np.ascontiguousarray(x, dtype=np.float32), out)
    return out


@st.composite
def activations(draw: st.DrawFn, block: int, blocks: int | None = None) -> np.ndarray:
    """Whole blocks of float32 (blocks of them, or 1-8): normal values at any scale, zero
    blocks, exact ties, outliers."""
    seed = draw(st.integers(0, 2**32 - 1))
    blocks = blocks or draw(st.integers(1, 8))
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(blocks * block) * draw(st.sampled_from([1.0, 1e-6, 1e3, 1e-30]))
    kind = draw(st.sampled_from(["plain", "zeros", "ties", "outlier"]))
    if kind == "zeros":
        x[:block] = 0.0
    elif kind == "ties":  # values k + 0.5 after scaling by 127 / 127.0: rounding's halfway cases
        x = rng.integers(-126, 127, x.size) + 0.5 * rng.integers(0, 2, x.size)
        x[::block] = 127.0
    elif kind == "outlier":
        x[rng.integers(0, x.size)] = -1e4
    return x.astype(np.float32)


def q8_k_reference(x: np.ndarray) -> np.ndarray:
    """ggml's quantize_row_q8_K_ref in numpy float32: d = 1 / (-127 / max), q = nearest even
    of (-127 / max)·x capped at 127, and each 16's sum."""
    out = []
    for block in x.reshape(-1, 256):
        amax_at = int(np.argmax(np.abs(block)))  # the first of equal magnitudes, as ggml's >
        if block[amax_at] == 0:
            d, q = np.float32(0), np.zeros(256, np.int8)
        else:
            iscale = np.float32(-127.0) / block[amax_at]
            q = np.minimum(np.rint(iscale * block), 127).astype(np.int8)
            d = np.float32(1.0) / iscale
        sums = q.astype(np.int16).reshape(16, 16).sum(axis=1).astype("<i2")
        out.append(np.concatenate([np.array([d], "<f4").view(np.uint8), q.view(np.uint8),
                                   sums.view(np.uint8)]))
    return np.stack(out)


@pytest.mark.usefixtures("level")
@PROPERTY
@given(x=activations(32))
def test_q8_0_is_the_gguf_packages_quantizer_bit_for_bit(x: np.ndarray) -> None:
    expected = gguf_quantize(x.reshape(-1, 32), Q.Q8_0).reshape(-1, 34)
    assert np.array_equal(quantized(Q8_0, x), expected)


@pytest.mark.usefixtures("level")
@PROPERTY
@given(x=activations(32))
def test_q8_1_is_q8_0_with_the_sum_of_its_quants_times_d(x: np.ndarray) -> None:
    got, q8_0 = quantized(Q8_1, x), gguf_quantize(x.reshape(-1, 32), Q.Q8_0).reshape(-1, 34)
    assert np.array_equal(got[:, :2], q8_0[:, :2]) and np.array_equal(got[:, 4:], q8_0[:, 2:])
    d = q8_0[:, :2].copy().view("<f2")[:, 0].astype(np.float32)
    d32 = np.abs(x.reshape(-1, 32)).max(axis=1) / np.float32(127)  # d before its f16 rounding
    sums = q8_0[:, 2:].view(np.int8).astype(np.int32).sum(axis=1).astype(np.float32)
    assert np.array_equal(got[:, 2:4].copy().view("<f2")[:, 0],
                          (sums * d32).astype(np.float16))
    assert d.shape == sums.shape


@pytest.mark.usefixtures("level")
@PROPERTY
@given(x=activations(256))
def test_q8_k_is_ggmls_reference_quantizer(x: np.ndarray) -> None:
    assert np.array_equal(quantized(Q8_K, x), q8_k_reference(x))


def _with_scales(blocks: np.ndarray, qtype: Q, first: float, second: float) -> np.ndarray:
    """The blocks with their f16 d (and dmin or m) set to first (and second)."""
    out = blocks.copy()
    for offset, value in zip(SCALES[qtype], (first, second), strict=False):
        out[:, offset:offset + 2] = np.array([value], "<f2").view(np.uint8)
    return out


def _halves(blocks: np.ndarray, offset: int) -> np.ndarray:
    return blocks[:, offset:offset + 2].copy().view("<f2")[:, 0].astype(np.float64)


LEGACY = (Q.Q8_0, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1)  # 8 lanes of 4 values a block


def _integers(blocks: np.ndarray, qtype: Q, xq: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One row's exact integer sums against one token's Q8 blocks, (blocks, lanes) int64: the
    legacy types' 8 lanes of 4 values, the K-types' one isum a block; and the activations' d."""
    kind = ACTIVATION[qtype]
    per = BLOCK[kind] if kind != Q8_K else 256
    n = blocks.shape[0] * GGML_QUANT_SIZES[qtype][0] // per  # activation blocks
    if kind == Q8_K:
        dx = xq[:, :4].copy().view("<f4")[:, 0].astype(np.float64)
        qx = xq[:, 4:260].view(np.int8).astype(np.int64)
    else:
        dx = _halves(xq, 0)
        qx = xq[:, 4 if kind == Q8_1 else 2:].view(np.int8).astype(np.int64)
    scaled = gguf_dequantize(_with_scales(blocks, qtype, 1.0, 0.0), qtype)  # scale·q, exact
    products = scaled.astype(np.int64).reshape(n, -1) * qx  # (blocks, values)
    lanes = 8 if qtype in LEGACY else 1
    return products.reshape(n, lanes, -1).sum(axis=2), dx


def reference(blocks: np.ndarray, qtype: Q, xq: np.ndarray) -> tuple[float, float]:
    """One row (blocks, bytes) · one token's Q8 blocks: the exact sum and Σ|term| (float64)."""
    isum, dx = _integers(blocks, qtype, xq)  # (blocks, lanes)
    d = _halves(blocks, SCALES[qtype][-1] if qtype == Q.Q6_K else 0) * dx  # (blocks,)
    terms = [(d[:, None] * isum).ravel()]
    if qtype in (Q.Q4_K, Q.Q5_K):  # − dmin·d_x·Σ m·q_x
        n = isum.shape[0]
        mins = -gguf_dequantize(_with_scales(blocks, qtype, 0.0, 1.0), qtype)
        qx = xq[:, 4:260].view(np.int8).astype(np.int64)
        imin = (mins.astype(np.int64).reshape(n, -1) * qx).sum(axis=1)
        terms.append(-_halves(blocks, 2) * dx * imin)
    if qtype in (Q.Q4_1, Q.Q5_1):  # + m·s_x
        terms.append(_halves(blocks, 2) * _halves(xq, 2))
    every = np.concatenate(terms)
    return float(every.sum()), float(np.abs(every).sum())


def _float32(q: Fraction) -> np.float32:
    """The exact q rounded once to float32, to nearest even (+0 for 0; inf past the range)."""
    if q == 0:
        return np.float32(0.0)
    size = abs(q)
    e = size.numerator.bit_length() - size.denominator.bit_length()  # 2^(e-1) < size < 2^(e+1)
    e = e - 1 if size < Fraction(2) ** e else e  # now 2^e <= size < 2^(e+1)
    quantum = Fraction(2) ** (max(e, -126) - 23)  # the spacing of float32 at size
    m = size / quantum
    whole = m.numerator // m.denominator
    rest = m - whole
    whole += rest > Fraction(1, 2) or (rest == Fraction(1, 2) and whole % 2 == 1)
    value = whole * quantum
    out = np.float32(np.inf) if value >= Fraction(2) ** 128 else np.float32(float(value))
    return out if q > 0 else -out


def ggml_avx2(blocks: np.ndarray, qtype: Q, xq: np.ndarray) -> np.float32:
    """One legacy row · one token as ggml-cpu's AVX2 vec_dot_*_q8_* adds it: acc = fma(d_w·d_x,
    lanes, acc) block after block, hsum_float_8, + Σ m_w·s_x (float32 block after block)."""
    lanes, _ = _integers(blocks, qtype, xq)  # (blocks, 8)
    d = (_halves(blocks, 0).astype(np.float32) * _halves(xq, 0).astype(np.float32))  # (blocks,)
    acc = [np.float32(0.0)] * 8
    for b in range(lanes.shape[0]):
        acc = [_float32(Fraction(float(d[b])) * int(lanes[b, j]) + Fraction(float(acc[j])))
               for j in range(8)]
    f32 = np.float32
    total = f32(f32(f32(acc[0] + acc[4]) + f32(acc[2] + acc[6]))
                + f32(f32(acc[1] + acc[5]) + f32(acc[3] + acc[7])))
    if qtype in (Q.Q4_1, Q.Q5_1):
        summs = np.float32(0.0)
        for m, s in zip(_halves(blocks, 2), _halves(xq, 2), strict=True):
            summs = f32(summs + f32(np.float32(m) * np.float32(s)))
        total = f32(total + summs)
    return total


@pytest.mark.usefixtures("level")
@pytest.mark.parametrize("qtype", list(ACTIVATION), ids=lambda q: q.name)
@PROPERTY
@given(data=st.data())
def test_the_integer_dot_products(qtype: Q, data: st.DataObject) -> None:
    block = GGML_QUANT_SIZES[qtype][0]
    cols = block * data.draw(st.integers(1, 2 if block == 256 else 40))
    rows, tokens = data.draw(st.integers(1, 5)), data.draw(st.integers(1, 4))
    blocks = weights_of(data.draw, qtype, rows, cols, sane_halves)
    x = np.stack([data.draw(activations(cols, 1)) for _ in range(tokens)])  # (T, cols)
    assert qmatmul._native is not None
    out = np.full((tokens, rows), np.nan, dtype=np.float32)
    qmatmul._native.matmul(int(qtype), blocks, cols, x, out, 1, True)
    for t in range(tokens):
        xq = quantized(ACTIVATION[qtype], x[t])
        for r in range(rows):
            exact, magnitude = reference(blocks[r].reshape(cols // block, -1), qtype, xq)
            # the kernels' bound, relative to Σ|w·x| (the sums' order differs), not to |ref|
            assert_near(float(out[t, r]), exact, atol=BOUND * magnitude + 1e-30, rtol=0)


@pytest.mark.usefixtures("level")
@pytest.mark.parametrize("qtype", LEGACY, ids=lambda q: q.name)
@PROPERTY
@given(data=st.data())
def test_the_legacy_types_add_as_ggmls_avx2_code_does(qtype: Q, data: st.DataObject) -> None:
    block = GGML_QUANT_SIZES[qtype][0]
    cols = block * data.draw(st.integers(1, 12))
    rows = data.draw(st.integers(1, 6))  # 4-row groups and the rows after them
    blocks = weights_of(data.draw, qtype, rows, cols, sane_halves)
    x = data.draw(activations(cols, 1))[None, :]  # (1, cols)
    assert qmatmul._native is not None
    out = np.full((1, rows), np.nan, dtype=np.float32)
    qmatmul._native.matmul(int(qtype), blocks, cols, x, out, 1, True)
    xq = quantized(ACTIVATION[qtype], x[0])
    expected = [ggml_avx2(blocks[r].reshape(cols // block, -1), qtype, xq) for r in range(rows)]
    assert np.array_equal(out[0], np.array(expected, dtype=np.float32))


@pytest.mark.parametrize("qtype", list(ACTIVATION), ids=lambda q: q.name)
def test_threads_split_rows_to_the_same_bits(qtype: Q) -> None:
    block, size = GGML_QUANT_SIZES[qtype]
    rng = np.random.default_rng(int(qtype))
    rows, cols = 300, block * (4 if block == 256 else 40)
    blocks = rng.integers(0, 256, (rows, cols // block * size), dtype=np.uint8)
    blocks = _finite_scales(blocks, qtype, cols)
    x = rng.standard_normal((3, cols)).astype(np.float32)
    assert qmatmul._native is not None
    one, four = (np.zeros((3, rows), np.float32) for _ in range(2))
    qmatmul._native.matmul(int(qtype), blocks, cols, x, one, 1, True)
    qmatmul._native.matmul(int(qtype), blocks, cols, x, four, 4, True)
    assert np.array_equal(one, four) and np.isfinite(one).all()


def _finite_scales(blocks: np.ndarray, qtype: Q, cols: int) -> np.ndarray:
    """Every block's f16 scales set to small random finite values."""
    block, size = GGML_QUANT_SIZES[qtype]
    flat = blocks.reshape(-1, size).copy()
    rng = np.random.default_rng(7)
    for offset in SCALES[qtype]:
        flat[:, offset:offset + 2] = (rng.random(len(flat)) * 0.01).astype("<f2")[:, None] \
            .view(np.uint8)
    return flat.reshape(blocks.shape[0], cols // block * size)


@pytest.mark.parametrize("qtype", list(ACTIVATION), ids=lambda q: q.name)
@PROPERTY
@given(data=st.data())
def test_every_vector_level_gives_the_baselines_bits(qtype: Q, data: st.DataObject) -> None:
    """The integer dot products at each level (AVX2's vpmaddubsw and vpmaddwd, the scales and
    mins widened in registers) take the same exact integer sums and the same float32 steps as
    the portable code, so their outputs are its bits, any scale bits (a NaN is any NaN)."""
    native = qmatmul._native
    assert native is not None
    block = GGML_QUANT_SIZES[qtype][0]
    cols = block * data.draw(st.integers(1, 4 if block == 256 else 24))
    rows, tokens = data.draw(st.integers(1, 6)), data.draw(st.integers(1, 3))
    blocks = weights_of(data.draw, qtype, rows, cols, data.draw(st.sampled_from(
        [sane_halves, any_halves])))
    x = np.stack([data.draw(activations(cols, 1)) for _ in range(tokens)])  # (T, cols)
    outs = []
    try:
        for level in range(native.use_level(-1) + 1):
            assert native.use_level(level) == level
            out = np.full((tokens, rows), 7.0, dtype=np.float32)
            native.matmul(int(qtype), blocks, cols, x, out, 1, True)
            outs.append(out)
    finally:
        native.use_level(-1)
    for out in outs[1:]:
        assert np.array_equal(out, outs[0], equal_nan=True)


@pytest.mark.usefixtures("level")
@pytest.mark.parametrize("qtype", list(ACTIVATION), ids=lambda q: q.name)
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_a_non_finite_activation_makes_its_tokens_products_nan(qtype: Q, bad: float) -> None:
    # ggml's reference quantizers skip a NaN (fmaxf, >): the token's products came out finite,
    # made without it, so a hostile file's NaN scale gave an answer its float32 run refuses.
    block, size = GGML_QUANT_SIZES[qtype]
    rng = np.random.default_rng(int(qtype))
    rows, cols = 7, block * (2 if block == 256 else 4)
    blocks = _finite_scales(rng.integers(0, 256, (rows, cols // block * size), np.uint8),
                            qtype, cols)
    x = rng.standard_normal((2, cols)).astype(np.float32)  # (T, cols)
    x[0, cols - 3] = bad
    assert qmatmul._native is not None
    out, alone = np.zeros((2, rows), np.float32), np.zeros((1, rows), np.float32)
    qmatmul._native.matmul(int(qtype), blocks, cols, x, out, 1, True)
    qmatmul._native.matmul(int(qtype), blocks, cols, x[1:], alone, 1, True)
    assert np.isnan(out[0]).all()
    assert np.array_equal(out[1], alone[0]) and np.isfinite(alone).all()  # the other token's



def test_a_nan_makes_its_blocks_scale_nan_as_the_gguf_packages_q8_0_does() -> None:
    x = np.tile(np.linspace(-1, 1, 256, dtype=np.float32), 2)  # (512,): two Q8_K blocks
    x[300] = np.nan  # in the second Q8_K block, the tenth Q8_0 block
    expected = gguf_quantize(x.reshape(-1, 32), Q.Q8_0).reshape(-1, 34)  # d from np.max: NaN
    for kind in (Q8_0, Q8_1):
        d = quantized(kind, x)[:, :2].copy().view("<f2")[:, 0]  # (16,)
        assert np.array_equal(np.isnan(d), np.isnan(expected[:, :2].copy().view("<f2")[:, 0]))
        assert np.isnan(d).sum() == 1
    d_k = quantized(Q8_K, x)[:, :4].copy().view("<f4")[:, 0]  # (2,)
    assert np.isfinite(d_k[0]) and np.isnan(d_k[1])
