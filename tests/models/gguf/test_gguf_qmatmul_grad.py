"""A quantized matrix's product differentiated (attribution patching through a GGUF): the
gradient to x is autograd's through F.linear on the dequantized matrix, computed a piece of the
matrix at a time from blocks read again where the matrix can be, holding no float32 copy."""

from __future__ import annotations

import numpy as np
import torch
from gguf import GGMLQuantizationType as Q

from attncli.models.sources.gguf import qmatmul
from tests.tolerance import assert_near


def _matrix(rows: int, seed: int) -> np.ndarray:
    blocks = np.random.default_rng(seed).integers(0, 256, (rows, 2 * 144), dtype=np.uint8)
    blocks.reshape(-1, 144)[:, 0:4] = [0x00, 0x20, 0x00, 0x1C]  # Q4_K's d, dmin: sane scales
    return blocks


def test_the_gradient_to_x_is_f_linears_piece_by_piece(dequantized_pieces: list[int]) -> None:
    blocks = _matrix(40, 3)
    reads: list[int] = []

    def again() -> qmatmul.QuantizedMatrix:
        reads.append(1)
        return qmatmul.QuantizedMatrix(blocks.copy(), Q.Q4_K, 512)

    matrix = qmatmul.QuantizedMatrix(blocks, Q.Q4_K, 512, again)
    dense = matrix.dequantized()  # (40, 512)
    x = torch.randn(2, 5, 512, generator=torch.Generator().manual_seed(3), requires_grad=True)
    weights = torch.randn(2, 5, 40, generator=torch.Generator().manual_seed(4))  # (2, 5, 40)
    bias = torch.randn(40, generator=torch.Generator().manual_seed(5))
    pieces = dequantized_pieces  # pieces of 16 rows: 16, 16, 8
    pieces.clear()  # the reference's own dequantization above
    (matrix.linear(x, bias) * weights).sum().backward()
    got, x.grad = x.grad, None
    assert pieces == [16, 16, 8] and reads == [1]  # read again once, dequantized by pieces
    ref_x = x.detach().clone().requires_grad_(True)
    (torch.nn.functional.linear(ref_x, dense, bias) * weights).sum().backward()
    assert got is not None and ref_x.grad is not None
    assert_near(got, ref_x.grad)


def test_without_a_way_to_read_it_again_the_matrix_itself_is_kept() -> None:
    matrix = qmatmul.QuantizedMatrix(_matrix(8, 4), Q.Q4_K, 512)
    x = torch.randn(3, 512, generator=torch.Generator().manual_seed(6), requires_grad=True)
    matrix.linear(x).sum().backward()
    assert x.grad is not None
    assert_near(x.grad, matrix.dequantized().sum(0).expand(3, -1))  # ∂Σy/∂x = Σ_rows W
