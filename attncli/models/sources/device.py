"""A weight source whose tensors arrive on a device (a GPU) as they are read.

The family never knows: every tensor() and rows() is moved as the family reads it, one layer's
weights at a time as on the CPU; everything else (config, shapes, tokenizer) is the source's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from attncli.models.sources.base import WeightSource


class OnDevice:
    """source, its tensors moved to device as they are read; everything else as source has."""

    def __init__(self, source: WeightSource, device: torch.device) -> None:
        self._source, self.device = source, device

    def __getattr__(self, name: str) -> Any:
        return getattr(self._source, name)  # path, label, config(), shapes(), header, ...

    def tensor(self, name: str) -> Tensor:
        return self._source.tensor(name).to(self.device)

    def rows(self, name: str, indices: Sequence[int]) -> Tensor:
        return self._source.rows(name, indices).to(self.device)

    def quantized(self, name: str, into: object = None, held: bool = False) -> None:
        """None: on a device every matrix is dequantized as it is read (the CPU's kernels
        compute on quantized blocks)."""
        return None
