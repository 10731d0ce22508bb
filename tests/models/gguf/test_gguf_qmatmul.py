"""The quantized matmul (gguf/_qmatmul.c through gguf/qmatmul.py) against dequantize-then-matmul
on random blocks of every type it takes, at every vector level this CPU runs.

The reference: the gguf package's numpy dequantizer (the float32 weights the kernels must
reproduce bit for bit) and the product summed in float64. The kernels sum the same float32
products in another order (_qmatmul_body.h: 64 lanes for one token, 16 lanes per 1,024-value
chunk for several, then a fixed tree): a float32 sum of n terms in a tree of depth k is within
k·2⁻²⁴·Σ|w·x| of the exact sum, and k ≤ cols/64 + 6 or 64 + 4 + cols/1,024 (cols ≤ 1,280 here:
at most 4.2·10⁻⁶·Σ|w·x|; one token's Q4_K and Q6_K sum exact integers of x in fixed point,
within 2⁻²⁹ of each block's largest |x|, test_gguf_qmatmul_fixed.py). So each output is held to
1e-5·Σ|w·x| (+1e-30 for underflow), not to 1e-5·|ref|: where the products cancel, |ref| is far
smaller than the sums' rounding. Non-finite weights (any scale bits: inf, NaN) give NaN where
the reference is NaN, and its infinities.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType
from gguf.quants import dequantize as gguf_dequantize
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attncli.models.sources.gguf import qmatmul
from tests.models.gguf.test_gguf_dequant import SCALES, any_halves, sane_halves
from tests.tolerance import assert_near

Q = GGMLQuantizationType
PLAIN = (Q.F32, Q.F16, Q.BF16)
KERNELS = (*PLAIN, Q.Q8_0, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q4_K, Q.Q5_K, Q.Q6_K)
PROPERTY = settings(max_examples=40, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.differing_executors])
BOUND = 1e-5  # of Σ|w·x| (see the top)
OVERFLOW = 1e36  # Σ|w·x| past which float32 partial sums may overflow where float64 does not


@pytest.fixture(params=[0, 1, 2], ids=["baseline", "avx2", "avx512"])
def level(request: pytest.FixtureRequest):  # noqa: ANN201
    """The kernels at each vector level this CPU runs (the module picks the widest)."""
    native = qmatmul._native
    assert native is not None
    if native.use_level(request.param) != request.param:
        native.use_level(-1)
        pytest.skip(f"this CPU cannot run level {request.param}")
    yield request.param
    native.use_level(-1)


def weights_of(draw: st.DrawFn, qtype: Q, rows: int, cols: int,
               halves: st.SearchStrategy[int]) -> np.ndarray:
    """(rows, row_bytes) random blocks, their f16 scales (or F16 values) drawn from halves."""
    block, size = GGML_QUANT_SIZES[qtype]
    seed = draw(st.integers(0, 2**32 - 1))
    data = np.random.default_rng(seed).integers(0, 256, (rows * cols // block, size),
                                                dtype=np.uint8)
    for offset in SCALES.get(qtype, ()):
        scales = draw(st.lists(halves, min_size=len(data), max_size=len(data)))
        data[:, offset:offset + 2] = np.array(scales, dtype="<u2").view(np.uint8).reshape(-1, 2)
    if qtype == Q.F16:
        values = draw(st.lists(halves, min_size=data.size // 2, max_size=data.size // 2))
        data = np.array(values, dtype="<u2").view(np.uint8).reshape(data.shape)
    if qtype in (Q.F32, Q.BF16) and draw(st.booleans()):  # plain numbers, not random bits
        values = np.random.default_rng(seed).standard_normal(rows * cols).astype(np.float32)
        if qtype == Q.BF16:
            values = (values.view(np.uint32) >> 16).astype(np.uint16)
        data = values.view(np.uint8)
    return data.reshape(rows, -1)


def dequantized(blocks: np.ndarray, qtype: Q) -> np.ndarray:
    with warnings.catch_warnings():  # inf·0 and NaN in hostile blocks: the values are the test
        warnings.simplefilter("ignore", RuntimeWarning)
        return gguf_dequantize(blocks, qtype)


def product(blocks: np.ndarray, qtype: Q, cols: int, x: np.ndarray,
            threads: int = 1) -> np.ndarray:
    """out (T, rows) from the C kernels."""
    assert qmatmul._native is not None
    out = np.full((x.shape[0], blocks.shape[0]), np.nan, dtype=np.float32)
    qmatmul._native.matmul(int(qtype), blocks, cols, x, out, threads)
    return out


def assert_within_bound(out: np.ndarray, weights: np.ndarray, x: np.ndarray) -> None:
    """out (T, rows) against x @ weightsᵀ in float64, within BOUND·Σ|w·x| (see the top)."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        w64, x64 = weights.astype(np.float64), x.astype(np.float64)
        ref = x64 @ w64.T  # (T, rows)
        magnitude = np.abs(x64) @ np.abs(w64).T  # (T, rows) Σ|w·x|
        # Σ|w·x| over the finite weights: past OVERFLOW a float32 partial sum may overflow
        # to ±inf beside an infinite weight's product, giving NaN where float64 gives ±inf.
        finite_part = np.abs(x64) @ np.where(np.isfinite(w64), np.abs(w64), 0.0).T
    plain = np.isfinite(magnitude) & (magnitude < OVERFLOW)
    assert np.all(np.abs(out[plain] - ref[plain]) <= BOUND * magnitude[plain] + 1e-30)
    special = ~np.isfinite(magnitude) & (finite_part < OVERFLOW)  # an inf or NaN weight
    assert np.array_equal(np.isnan(out[special]), np.isnan(ref[special]))
    infinite = special & ~np.isnan(ref)
    assert np.array_equal(out[infinite], ref[infinite])


@st.composite
def cases(draw: st.DrawFn, qtype: Q,
          halves: st.SearchStrategy[int]) -> tuple[np.ndarray, int, np.ndarray]:
    """Blocks (rows, row_bytes), cols, and activations (T, cols): tiles and their tails."""
    block = GGML_QUANT_SIZES[qtype][0]
    cols = block * draw(st.integers(1, 4 if block == 256 else 20 if block == 32 else 300))
    rows, tokens = draw(st.integers(1, 9)), draw(st.integers(1, 6))
    blocks = weights_of(draw, qtype, rows, cols, halves)
    scale = draw(st.sampled_from([1.0, 1e-3, 1e4]))
    seed = draw(st.integers(0, 2**32 - 1))
    x = (np.random.default_rng(seed).standard_normal((tokens, cols)) * scale).astype(np.float32)
    return blocks, cols, x


def test_the_extension_is_built_and_takes_ggufs_layouts() -> None:
    assert qmatmul._native is not None
    kinds = qmatmul._native.kinds()
    assert {Q(code) for code in kinds} == set(KERNELS)
    assert all(kinds[code] == GGML_QUANT_SIZES[Q(code)] for code in kinds)
    assert qmatmul.KERNEL_TYPES == set(KERNELS)


@pytest.mark.slow
@pytest.mark.usefixtures("level")
@pytest.mark.parametrize("qtype", KERNELS, ids=lambda q: q.name)
@PROPERTY
@given(data=st.data())
def test_the_product_with_sane_scales(qtype: Q, data: st.DataObject) -> None:
    blocks, cols, x = data.draw(cases(qtype, sane_halves))
    weights = dequantized(blocks, qtype)
    assert_within_bound(product(blocks, qtype, cols, x), weights, x)


@pytest.mark.slow
@pytest.mark.usefixtures("level")
@pytest.mark.parametrize("qtype", KERNELS, ids=lambda q: q.name)
@PROPERTY
@given(data=st.data())
def test_the_product_with_any_scale_bits(qtype: Q, data: st.DataObject) -> None:
    blocks, cols, x = data.draw(cases(qtype, any_halves))
    weights = dequantized(blocks, qtype)
    assert_within_bound(product(blocks, qtype, cols, x), weights, x)


@pytest.mark.slow
@pytest.mark.usefixtures("level")
@pytest.mark.parametrize("qtype", KERNELS, ids=lambda q: q.name)
@PROPERTY
@given(data=st.data())
def test_one_token_at_a_time_with_any_scale_bits(qtype: Q, data: st.DataObject) -> None:
    # Decode's matrix × vector kernels alone (one token a call; on AVX2 every type but F32,
    # Q5_0 and Q5_1 makes each weight in registers), over odd and even counts of blocks in a row.
    blocks, cols, x = data.draw(cases(qtype, any_halves))
    weights = dequantized(blocks, qtype)
    for token in x:
        assert_within_bound(product(blocks, qtype, cols, token[None]), weights, token[None])


@pytest.mark.usefixtures("level")
@pytest.mark.parametrize("qtype", [Q.Q4_K, Q.Q6_K, Q.Q8_0, Q.Q4_1, Q.F16], ids=lambda q: q.name)
@pytest.mark.parametrize("tokens", [1, 2, 5, 130])
def test_a_wide_product_against_torch_float32(qtype: Q, tokens: int) -> None:
    # Past the chunks, panels and token tiles (KC 1,024, MC 16, NTILE 128): torch's float32
    # F.linear on the dequantized matrix, within the bound of the top.
    block, size = GGML_QUANT_SIZES[qtype]
    rng = np.random.default_rng(tokens)
    rows, cols = 150, 1280
    blocks = rng.integers(0, 256, (rows, cols // block * size), dtype=np.uint8)
    for offset in SCALES.get(qtype, ()):
        blocks.reshape(-1, size)[:, offset:offset + 2] = [0x00, 0x20]  # 2⁻¹⁵·(1 + 1/4)
    if qtype == Q.F16:
        blocks = rng.standard_normal((rows, cols)).astype(np.float16).view(np.uint8)
    x = rng.standard_normal((tokens, cols)).astype(np.float32)
    weights = torch.from_numpy(dequantized(blocks, qtype))  # (rows, cols)
    ref = torch.nn.functional.linear(torch.from_numpy(x), weights)  # (T, rows)
    magnitude = torch.from_numpy(np.abs(x)) @ weights.abs().T  # (T, rows)
    got = torch.from_numpy(product(blocks, qtype, cols, x))
    assert torch.all((got - ref).abs() <= 1e-5 + BOUND * magnitude)


@pytest.mark.usefixtures("level")
@pytest.mark.parametrize("qtype", [Q.Q4_K, Q.Q6_K, Q.Q8_0, Q.BF16], ids=lambda q: q.name)
@pytest.mark.parametrize("tokens", [1, 7])
@pytest.mark.parametrize("threads", [2, 3, 8])
def test_rows_split_across_threads_give_the_same_bits(qtype: Q, tokens: int,
                                                      threads: int) -> None:
    # Work enough for 2 parts (one token) or 14 (seven): 2¹⁸ multiply-adds a part at least.
    block, size = GGML_QUANT_SIZES[qtype]
    rng = np.random.default_rng(threads)
    rows, cols = 133, 4096  # 133 rows: parts of whole 4-row groups and a tail
    blocks = rng.integers(0, 256, (rows, cols // block * size), dtype=np.uint8)
    for offset in SCALES.get(qtype, ()):
        blocks.reshape(-1, size)[:, offset:offset + 2] = [0x00, 0x20]
    x = rng.standard_normal((tokens, cols)).astype(np.float32)
    alone = product(blocks, qtype, cols, x, threads=1)
    split = product(blocks, qtype, cols, x, threads=threads)
    assert np.array_equal(alone.view(np.uint32), split.view(np.uint32))
    assert_within_bound(split, dequantized(blocks, qtype), x)


@pytest.mark.usefixtures("level")
@pytest.mark.parametrize("d, dmin", [(1.0, 1.0), (1.0, 1.0009765625), (-1.0, -1.0009765625),
                                     (0.5, -0.25), (0.0, 3.0)])
@pytest.mark.parametrize("nibbles", ["ones", "near"])
def test_q4_k_where_the_scale_and_the_min_cancel(d: float, dmin: float, nibbles: str) -> None:
    # Every group's dl·q and ml nearly cancel (sc = m = 63, q about 1): weights of 0 or a few
    # hundredths beside products of 63. A float32 kernel that took dl·Σq·x − ml·Σx would round
    # at the size of the 63s, thousands of times the bound; one token's integer kernel takes
    # both sums exactly, and its float64 difference rounds at 2⁻⁵³ of them.
    rng = np.random.default_rng(abs(int(1000 * d + 10 * dmin)))
    rows, cols = 6, 1024
    blocks = np.zeros((rows * cols // 256, 144), dtype=np.uint8)
    blocks[:, 0:2] = np.array([d], np.float16).view(np.uint8)
    blocks[:, 2:4] = np.array([dmin], np.float16).view(np.uint8)
    blocks[:, 4:16] = 0xFF  # every six-bit scale and min 63
    if nibbles == "ones":
        blocks[:, 16:] = 0x11
    else:  # 0, 1 or 2 in each nibble
        blocks[:, 16:] = rng.integers(0, 3, (len(blocks), 128)) * 17
    blocks = blocks.reshape(rows, -1)
    weights = dequantized(blocks, Q.Q4_K)
    x = (rng.standard_normal((3, cols)) * [[1.0], [1e-3], [1e4]]).astype(np.float32)
    for token in x:
        out = product(blocks, Q.Q4_K, cols, token[None])
        assert_within_bound(out, weights, token[None])
        if nibbles == "ones" and d == dmin:  # every weight exactly 0
            assert np.all(out == 0)


def test_quantized_matrix_linear_is_f_linear_on_the_dequantized_matrix() -> None:
    rng = np.random.default_rng(5)
    blocks = rng.integers(0, 256, (12, 2 * 144), dtype=np.uint8)
    blocks.reshape(-1, 144)[:, 0:4] = [0x00, 0x20, 0x00, 0x1C]  # d, dmin
    matrix = qmatmul.QuantizedMatrix(blocks, Q.Q4_K, 512)
    assert matrix.shape == (12, 512) and matrix.nbytes == 12 * 288
    x = torch.randn(2, 3, 512, generator=torch.Generator().manual_seed(5))
    bias = torch.randn(12, generator=torch.Generator().manual_seed(6))
    dense = matrix.dequantized()  # (12, 512)
    # exact: the kernel's dequantizer and gguf's do the same float32 products per block
    assert_near(dense, torch.from_numpy(dequantized(blocks, Q.Q4_K)), atol=0, rtol=0)
    got, ref = matrix.linear(x, bias), torch.nn.functional.linear(x, dense, bias)
    assert got.shape == (2, 3, 12)
    magnitude = x.abs() @ dense.abs().T  # (2, 3, 12)
    assert torch.all((got - ref).abs() <= 1e-5 + BOUND * (magnitude + bias.abs()))


def test_dense_rows_takes_torchs_product_from_that_many_rows_piece_by_piece(
        dequantized_pieces: list[int]) -> None:
    """Within dense_rows(n): n rows or more are F.linear on the dequantized matrix (in pieces
    of DENSE_PIECE values, each piece's columns F.linear's own), fewer take the kernels."""
    rng = np.random.default_rng(7)
    blocks = rng.integers(0, 256, (40, 2 * 144), dtype=np.uint8)
    blocks.reshape(-1, 144)[:, 0:4] = [0x00, 0x20, 0x00, 0x1C]  # d, dmin
    matrix = qmatmul.QuantizedMatrix(blocks, Q.Q4_K, 512)
    dense = matrix.dequantized()  # (40, 512)
    x = torch.randn(2, 5, 512, generator=torch.Generator().manual_seed(7))
    bias = torch.randn(40, generator=torch.Generator().manual_seed(8))
    ref = torch.nn.functional.linear(x, dense, bias)  # (2, 5, 40)
    read = dequantized_pieces  # pieces of 16 rows: 16, 16, 8
    read.clear()  # the reference's own dequantization above
    with qmatmul.dense_rows(10):
        pieces = matrix.linear(x, bias)  # 10 rows
        kernel = matrix.linear(x[0], bias)  # 5 rows: the kernels
    assert read == [16, 16, 8]
    # torch's product of 16-row pieces and of the whole matrix sum in different orders (oneDNN
    # blocks by the matrix's shape and the thread count): both within the kernels' bound,
    # 1e-5·Σ|w·x|, of the float64 product (one against the other missed 1e-5 + 1e-5·|ref| by
    # 2.2e-5 on one thread).
    assert_within_bound((pieces - bias).reshape(-1, 40).numpy(), dense.numpy(),
                        x.reshape(-1, 512).numpy())
    assert_within_bound((ref - bias).reshape(-1, 40).numpy(), dense.numpy(),
                        x.reshape(-1, 512).numpy())
    assert torch.equal(kernel, matrix.linear(x[0], bias))  # outside: the kernels too
    assert_within_bound(kernel.numpy() - bias.numpy(), dense.numpy(), x[0].numpy())
    with qmatmul.dense_rows(10), qmatmul.llama_cpp_numerics():  # llama.cpp's: the kernels
        assert torch.equal(matrix.linear(x, bias), matrix.linear(x, bias))


def test_a_prompt_of_dense_from_rows_takes_torchs_product_outside_any_context(
        dequantized_pieces: list[int]) -> None:
    """Outside dense_rows: DENSE_FROM rows or more (a prompt) are F.linear on the dequantized
    matrix piece by piece, fewer (a decode step) take the kernels, and llama.cpp's numerics
    always take the kernels."""
    rng = np.random.default_rng(9)
    blocks = rng.integers(0, 256, (40, 2 * 144), dtype=np.uint8)
    blocks.reshape(-1, 144)[:, 0:4] = [0x00, 0x20, 0x00, 0x1C]  # d, dmin
    matrix = qmatmul.QuantizedMatrix(blocks, Q.Q4_K, 512)
    dense = matrix.dequantized()  # (40, 512)
    x = torch.randn(qmatmul.DENSE_FROM, 512, generator=torch.Generator().manual_seed(9))
    dequantized_pieces.clear()
    prompt = matrix.linear(x)  # (DENSE_FROM, 40)
    assert dequantized_pieces == [16, 16, 8]
    dequantized_pieces.clear()
    step = matrix.linear(x[:qmatmul.DENSE_FROM - 1])
    with qmatmul.llama_cpp_numerics():
        matrix.linear(x)
    assert dequantized_pieces == []  # the kernels read the blocks themselves
    for out, rows in ((prompt, x), (step, x[:-1])):
        assert_within_bound(out.numpy(), dense.numpy(), rows.numpy())
    assert torch.equal(step, torch.from_numpy(product(blocks, Q.Q4_K, 512, x[:-1].numpy())))


def test_a_matrix_that_is_not_whole_blocks_is_refused() -> None:
    with pytest.raises(ValueError, match="not rows of 100 Q4_K values"):
        qmatmul.QuantizedMatrix(np.zeros((2, 144), np.uint8), Q.Q4_K, 100)
    with pytest.raises(ValueError, match="not rows of 512 Q4_K values"):
        qmatmul.QuantizedMatrix(np.zeros((2, 144), np.uint8), Q.Q4_K, 512)


def test_wrong_sizes_are_refused_by_the_c_code() -> None:
    native = qmatmul._native
    assert native is not None
    x, out = np.zeros((1, 32), np.float32), np.zeros((1, 2), np.float32)
    native.matmul(int(Q.Q8_0), np.zeros(68, np.uint8), 32, x, out, 1)  # two rows: right
    with pytest.raises(ValueError, match="not whole blocks of 32 values"):
        native.matmul(int(Q.Q8_0), np.zeros(68, np.uint8), 33, x, out, 1)
    with pytest.raises(ValueError, match="not whole blocks"):
        native.matmul(int(Q.Q8_0), np.zeros(68, np.uint8), 0, x, out, 1)
    with pytest.raises(ValueError, match="not whole rows"):
        native.matmul(int(Q.Q8_0), np.zeros(69, np.uint8), 32, x, out, 1)
    with pytest.raises(ValueError, match="not whole"):
        native.matmul(int(Q.Q8_0), np.zeros(68, np.uint8), 32, np.zeros(33, np.float32), out, 1)
    with pytest.raises(ValueError, match="out holds 4 bytes"):
        native.matmul(int(Q.Q8_0), np.zeros(68, np.uint8), 32, x, np.zeros(1, np.float32), 1)
    with pytest.raises(ValueError, match="aligned"):
        unaligned = np.zeros(129, np.uint8)[1:]  # 128 bytes one past an aligned start
        native.matmul(int(Q.Q8_0), np.zeros(68, np.uint8), 32, unaligned, out, 1)
    with pytest.raises(ValueError, match="no quantized matmul for GGML type 15"):
        native.matmul(int(Q.Q8_K), np.zeros(0, np.uint8), 256, np.zeros(0, np.float32),
                      np.zeros(0, np.float32), 1)
    with pytest.raises(TypeError, match="read-write"):
        native.matmul(int(Q.Q8_0), np.zeros(68, np.uint8), 32, x, bytes(8), 1)


def test_nothing_to_multiply_writes_nothing() -> None:
    native = qmatmul._native
    assert native is not None
    native.matmul(int(Q.Q4_K), np.zeros(0, np.uint8), 256, np.zeros((3, 256), np.float32),
                  np.zeros((3, 0), np.float32), 4)
    native.matmul(int(Q.Q4_K), np.zeros(144, np.uint8), 256, np.zeros((0, 256), np.float32),
                  np.zeros((0, 1), np.float32), 4)


def test_types_without_kernels_and_the_switch_leave_matrices_to_dequantize(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert not qmatmul.computes(Q.IQ4_XS) and qmatmul.computes(Q.Q4_K)
    monkeypatch.setattr(qmatmul, "ENABLED", False)
    assert not qmatmul.computes(Q.Q4_K)
