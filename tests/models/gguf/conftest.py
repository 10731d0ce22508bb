"""What the GGUF tests share."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from gguf import GGMLQuantizationType as Q

from attncli.models.sources.gguf import qmatmul


@pytest.fixture
def dequantized_pieces(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The rows of each piece qmatmul dequantizes, in order, with pieces of 16 rows of 512
    values (a 40-row matrix: 16, 16, 8)."""
    monkeypatch.setattr(qmatmul, "DENSE_PIECE", 512 * 16)
    pieces: list[int] = []
    original = qmatmul.dequantize

    def counted(blocks: np.ndarray, qtype: Q, **options: Any) -> np.ndarray:
        pieces.append(blocks.shape[0])
        return original(blocks, qtype, **options)

    monkeypatch.setattr(qmatmul, "dequantize", counted)
    return pieces
