"""block.rms_norm's one C call (_rows.c) against torch's F.rms_norm, bit for bit (the same
float32 operations, the sum in torch's order), on rows of widths below, at and past its vector
widths and a model's, and against the float64 formula within the house bound; the cases it
leaves to torch (a gradient asked for, strided rows, short rows) still give torch's values."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attncli.models.llama import block
from tests.tolerance import assert_near

WIDTHS = [8, 9, 15, 16, 17, 31, 64, 100, 127, 576, 960, 1536, 2048, 4096, 4100, 8192]
native_built = pytest.mark.skipif(not block.NATIVE_NORM, reason="_rows.c is not built here")


def _rows(rows: int, d: int, size: float, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, d, generator=generator) * size  # (rows, d)
    return x, torch.randn(d, generator=generator)  # (rows, d), (d,)


@native_built
@pytest.mark.parametrize("d", WIDTHS)
@pytest.mark.parametrize("size", [1e-3, 1.0, 300.0])
def test_the_c_call_gives_torchs_bits(d: int, size: float) -> None:
    x, scale = _rows(24, d, size, seed=d)
    assert block._native_rows(x, scale) is not None  # the C call is the one tested
    got = block.rms_norm(x, scale, 1e-6)  # (24, d)
    assert torch.equal(got, F.rms_norm(x, scale.shape, scale, 1e-6))
    exact = scale.double() * x.double() * torch.rsqrt(
        x.double().pow(2).mean(-1, keepdim=True) + 1e-6)  # (24, d) float64
    assert_near(got, exact)


@native_built
def test_leading_dimensions_and_one_row_take_it_too() -> None:
    x, scale = _rows(6, 576, 1.0, seed=3)
    shaped = x.view(2, 3, 576)  # (2, 3, 576)
    assert torch.equal(block.rms_norm(shaped, scale, 1e-5),
                       F.rms_norm(shaped, scale.shape, scale, 1e-5))
    assert torch.equal(block.rms_norm(x[:1], scale, 1e-5),
                       F.rms_norm(x[:1], scale.shape, scale, 1e-5))
    assert block.rms_norm(x[:0], scale, 1e-5).shape == (0, 576)


def test_what_it_leaves_to_torch() -> None:
    x, scale = _rows(4, 64, 1.0, seed=5)
    strided = x.t().contiguous().t()  # (4, 64), not contiguous
    assert block._native_rows(strided, scale) is None
    assert torch.equal(block.rms_norm(strided, scale, 1e-5),
                       F.rms_norm(strided, scale.shape, scale, 1e-5))
    short, short_scale = _rows(3, 7, 1.0, seed=6)
    assert block._native_rows(short, short_scale) is None
    leaf = x.clone().requires_grad_()
    assert block._native_rows(leaf, scale) is None  # autograd needs torch's graph
    block.rms_norm(leaf, scale, 1e-5).sum().backward()
    assert leaf.grad is not None and leaf.grad.shape == (4, 64)
    with torch.no_grad():
        assert block._native_rows(leaf, scale) == block._native_rows(x, scale)


@native_built
@pytest.mark.parametrize("default", ["float64", "meta"])
def test_the_width_is_found_whatever_torchs_defaults(default: str) -> None:
    """The check that finds the vector width makes its rows float32 on the CPU itself: under
    torch.set_default_dtype(torch.float64) it handed the float32 C code float64 buffers (and
    left the C call off for the process), under set_default_device("meta") buffers at 0 (a
    ValueError at a model's first norm)."""
    found = block._lanes()
    block._lanes.cache_clear()
    try:
        if default == "float64":
            torch.set_default_dtype(torch.float64)
        else:
            torch.set_default_device("meta")
        assert block._lanes() == found
    finally:
        torch.set_default_dtype(torch.float32)
        torch.set_default_device(None)
        block._lanes.cache_clear()
