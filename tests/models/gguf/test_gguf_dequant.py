"""The C dequantizers (gguf/_dequant.c through gguf/dequant.py) against the gguf package's numpy
ones, on random blocks of every type they take.

Bit-exact throughout: every float32 equal bit for bit, NaN where gguf gives NaN (a NaN's payload
may differ: numpy converts halves to floats with the CPU's instructions, which quiet signalling
NaNs, and C's products propagate whichever NaN operand the hardware picks). The f16 scale fields
are drawn both as sane finite values and as any 16 bits (infinities, NaNs, subnormals, -0).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import warnings
from pathlib import Path

import numpy as np
import pytest
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType
from gguf.quants import dequantize as gguf_dequantize
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attncli.models.sources.gguf import dequant

Q = GGMLQuantizationType
# Where each type keeps its f16 scales (d, and dmin or m), in bytes from its block's start.
SCALES = {Q.Q4_0: (0,), Q.Q4_1: (0, 2), Q.Q5_0: (0,), Q.Q5_1: (0, 2), Q.Q8_0: (0,),
          Q.Q2_K: (80, 82), Q.Q3_K: (108,), Q.Q4_K: (0, 2), Q.Q5_K: (0, 2), Q.Q6_K: (208,),
          Q.IQ4_NL: (0,), Q.IQ4_XS: (0,)}
PLAIN = (Q.F32, Q.F16, Q.BF16)  # every value its own bits
PROPERTY = settings(max_examples=60, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])
# Halves that are not plain numbers: ±0, the smallest and largest subnormals, the largest
# finite, ±inf, a quiet and a signalling NaN with and without a sign.
SPECIAL_HALVES = [0x0000, 0x8000, 0x0001, 0x83FF, 0x7BFF, 0x7C00, 0xFC00, 0x7E00, 0x7C01, 0xFE01]
sane_halves = st.floats(-1e3, 1e3, width=16).map(
    lambda f: int(np.array(f, dtype=np.float16).view(np.uint16)))
any_halves = st.integers(0, 0xFFFF) | st.sampled_from(SPECIAL_HALVES)


def _gguf(blocks: np.ndarray, qtype: Q) -> np.ndarray:
    with warnings.catch_warnings():  # numpy's warnings on inf·0 and NaN: the values are the test
        warnings.simplefilter("ignore", RuntimeWarning)
        return gguf_dequantize(blocks, qtype)


def assert_same_bits(ours: np.ndarray, theirs: np.ndarray) -> None:
    assert ours.dtype == theirs.dtype == np.float32 and ours.shape == theirs.shape
    nan = np.isnan(theirs)
    assert np.array_equal(np.isnan(ours), nan)
    assert np.array_equal(np.where(nan, 0, ours).view(np.uint32),
                          np.where(nan, 0, theirs).view(np.uint32))


@st.composite
def blocks_of(draw: st.DrawFn, qtype: Q, halves: st.SearchStrategy[int]) -> np.ndarray:
    """(rows, row_bytes) of random bytes in whole blocks, the f16 scale fields from halves."""
    rows, per_row = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    size = GGML_QUANT_SIZES[qtype][1]
    seed = draw(st.integers(0, 2**32 - 1))
    data = np.random.default_rng(seed).integers(0, 256, (rows * per_row, size), dtype=np.uint8)
    for offset in SCALES.get(qtype, ()):
        scales = draw(st.lists(halves, min_size=len(data), max_size=len(data)))
        data[:, offset:offset + 2] = np.array(scales, dtype="<u2").view(np.uint8).reshape(-1, 2)
    if qtype == Q.F16:  # every value is a half
        values = draw(st.lists(halves, min_size=data.size // 2, max_size=data.size // 2))
        data = np.array(values, dtype="<u2").view(np.uint8).reshape(data.shape)
    return data.reshape(rows, per_row * size)


def test_the_extension_is_built() -> None:
    # make installs the package with a C compiler at hand; a build without one would silently
    # leave every tensor to the gguf package's numpy code.
    assert dequant._native is not None


def test_the_c_code_takes_every_type_people_hold_with_ggufs_layouts() -> None:
    assert dequant._native is not None
    layouts = dequant._native.layouts()
    assert {Q(code) for code in layouts} == set(SCALES) | set(PLAIN)
    assert all(layouts[code] == GGML_QUANT_SIZES[Q(code)] for code in layouts)
    assert dequant.NATIVE_TYPES == set(SCALES) | set(PLAIN)


@pytest.mark.parametrize("qtype", [*SCALES, *PLAIN], ids=lambda q: q.name)
@PROPERTY
@given(data=st.data())
def test_bit_exact_with_sane_scales(qtype: Q, data: st.DataObject) -> None:
    blocks = data.draw(blocks_of(qtype, sane_halves))
    ours, theirs = dequant.dequantize(blocks, qtype), _gguf(blocks, qtype)
    if qtype in SCALES:
        assert np.isfinite(theirs).all()  # sane scales make plain numbers, compared bit for bit
    assert_same_bits(ours, theirs)


@pytest.mark.parametrize("qtype", [*SCALES, *PLAIN], ids=lambda q: q.name)
@PROPERTY
@given(data=st.data())
def test_bit_exact_with_any_scale_bits(qtype: Q, data: st.DataObject) -> None:
    blocks = data.draw(blocks_of(qtype, any_halves))
    assert_same_bits(dequant.dequantize(blocks, qtype), _gguf(blocks, qtype))


@pytest.mark.parametrize("halves", [SPECIAL_HALVES], ids=["special"])
def test_every_special_half_in_every_scale_field(halves: list[int]) -> None:
    for qtype, offsets in SCALES.items():
        size = GGML_QUANT_SIZES[qtype][1]
        data = np.random.default_rng(1).integers(0, 256, (len(halves) ** 2, size), dtype=np.uint8)
        pairs = np.array([(a, b) for a in halves for b in halves], dtype="<u2")
        for column, offset in enumerate(offsets):
            data[:, offset:offset + 2] = pairs[:, column].copy().view(np.uint8).reshape(-1, 2)
        assert_same_bits(dequant.dequantize(data, qtype), _gguf(data, qtype))


@pytest.mark.parametrize("qtype", [Q.Q8_0, Q.Q4_K, Q.F16], ids=lambda q: q.name)
@pytest.mark.parametrize("workers", [2, 3, 8])
def test_blocks_split_across_threads_give_the_same_values(
        qtype: Q, workers: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dequant, "SHARE", 1)  # split even a small tensor: 7 blocks a row
    size = GGML_QUANT_SIZES[qtype][1]
    blocks = np.random.default_rng(workers).integers(0, 256, (5, 7 * size), dtype=np.uint8)
    blocks[:, 0:2] = 0x3C  # a finite scale (1.0078125) in the first block of each row
    split = dequant.dequantize(blocks, qtype, workers=workers)
    assert_same_bits(split, dequant.dequantize(blocks, qtype, workers=1))
    assert_same_bits(split, _gguf(blocks, qtype))


def test_picked_rows_and_empty_tensors() -> None:
    blocks = np.random.default_rng(2).integers(0, 256, (6, 4 * 34), dtype=np.uint8)
    blocks[:, ::34] = 0  # d's low byte: the halves stay finite where the high byte allows
    picked = blocks[np.array([4, 0, 4])]
    assert_same_bits(dequant.dequantize(picked, Q.Q8_0), _gguf(picked, Q.Q8_0))
    empty = dequant.dequantize(np.zeros((0, 34), dtype=np.uint8), Q.Q8_0)
    assert empty.shape == (0, 32) and empty.dtype == np.float32


def test_types_without_c_code_go_to_the_gguf_package() -> None:
    blocks = np.random.default_rng(3).integers(0, 256, (2, GGML_QUANT_SIZES[Q.TQ2_0][1]),
                                               dtype=np.uint8)
    assert not dequant.native(Q.TQ2_0)
    assert_same_bits(dequant.dequantize(blocks, Q.TQ2_0), _gguf(blocks, Q.TQ2_0))


@pytest.mark.parametrize("qtype", [Q.Q4_K, Q.Q6_K], ids=lambda q: q.name)
def test_without_the_extension_the_gguf_package_gives_the_same(
        qtype: Q, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = np.random.default_rng(4).integers(0, 256, (3, 2 * GGML_QUANT_SIZES[qtype][1]),
                                               dtype=np.uint8)
    fast = dequant.dequantize(blocks, qtype)
    monkeypatch.setattr(dequant, "ENABLED", False)
    monkeypatch.setattr(dequant, "_native", None)
    assert not dequant.native(qtype)
    assert_same_bits(dequant.dequantize(blocks, qtype), fast)


def test_attncli_fused_0_turns_the_c_code_off() -> None:
    code = "from attncli.models.sources.gguf import dequant; print(dequant.ENABLED)"
    env = {"ATTNCLI_FUSED": "0", "PATH": "/usr/bin:/bin"}
    off = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert off.stdout.strip() == "False", off.stderr
    assert dequant.ENABLED


def test_wrong_sizes_are_refused() -> None:
    assert dequant._native is not None
    with pytest.raises(ValueError, match="not whole Q8_0 blocks"):
        dequant.dequantize(np.zeros((2, 35), dtype=np.uint8), Q.Q8_0)
    with pytest.raises(ValueError, match="not whole blocks"):
        dequant._native.dequantize(int(Q.Q8_0), np.zeros(35, np.uint8), np.zeros(32, np.float32))
    with pytest.raises(ValueError, match="not whole blocks"):
        dequant._native.dequantize(int(Q.Q8_0), np.zeros(34, np.uint8), np.zeros(31, np.float32))
    with pytest.raises(ValueError, match="no dequantizer for GGML type 15"):
        dequant._native.dequantize(int(Q.Q8_K), np.zeros(0, np.uint8), np.zeros(0, np.float32))
    with pytest.raises(TypeError, match="read-write"):
        dequant._native.dequantize(int(Q.F32), np.zeros(4, np.uint8),
                                   np.frombuffer(bytes(4), dtype=np.float32))


@pytest.mark.parametrize(("setting", "expected"), [("3", 3), ("1", 1), ("0", None), ("x", None),
                                                   ("", None)])
def test_threads_follow_omp_num_threads_else_every_core(
        setting: str, expected: int | None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", setting)
    assert dequant.threads() == (expected or len(os.sched_getaffinity(0)))


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_a_fast_math_build_refuses_to_compile() -> None:
    # -ffast-math could reorder or fuse the products and sums; the source refuses, so setuptools'
    # optional build leaves the work to the gguf package instead of giving other numbers.
    source = Path(dequant.__file__).with_name("_dequant.c")
    include = sysconfig.get_paths()["include"]
    plain = subprocess.run(["gcc", "-fsyntax-only", f"-I{include}", str(source)],
                           capture_output=True, text=True)
    fast = subprocess.run(["gcc", "-fsyntax-only", "-ffast-math", f"-I{include}", str(source)],
                          capture_output=True, text=True)
    assert plain.returncode == 0, plain.stderr
    assert fast.returncode != 0 and "strict float32" in fast.stderr


NUMPY_ONLY = [Q.IQ2_XXS, Q.IQ2_XS, Q.IQ2_S, Q.IQ3_XXS, Q.IQ3_S, Q.IQ1_S, Q.IQ1_M, Q.TQ1_0,
              Q.TQ2_0]


@pytest.mark.parametrize("qtype", [*SCALES, *NUMPY_ONLY], ids=lambda q: q.name)
def test_the_gguf_packages_dequantizers_warn_nothing_on_hostile_scales(
        qtype: Q, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every type the C code lacks, and every type with it off: numpy's overflow and invalid
    warnings (inf·0, NaN) are not printed before attncli's one line, and the values are the
    C code's, bit for bit, or gguf's own where there is no C code."""
    size = GGML_QUANT_SIZES[qtype][1]
    blocks = np.random.default_rng(5).integers(0, 256, (len(SPECIAL_HALVES), size), dtype=np.uint8)
    halves = np.array(SPECIAL_HALVES, dtype="<u2").view(np.uint8).reshape(-1, 2)
    blocks[:, 0:2] = halves  # d, where every one of these types but TQ keeps it
    blocks[:, size - 2:] = halves  # TQ1_0's and TQ2_0's d: their last two bytes
    if qtype == Q.IQ1_M:  # d is the top nibbles of the last four u16 scales: a NaN here
        blocks[:, size - 8:] = 0xFF
    fast = dequant.dequantize(blocks, qtype) if dequant.native(qtype) else _gguf(blocks, qtype)
    monkeypatch.setattr(dequant, "ENABLED", False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning fails the test
        slow = dequant.dequantize(blocks, qtype)
    assert not np.isfinite(slow).all()  # the hostile scales reached the values
    assert_same_bits(slow, fast)
