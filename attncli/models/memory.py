"""What a model run holds at once, from the checkpoint's shapes alone: one layer's weights as
float32 and a block of unembedding rows, never the whole file.

Blocks run one after another and each reads its own tensors, which are dropped before the next
block's are read; the embedding is read by rows and the unembedding VOCAB_CHUNK rows at a time.
So a run's memory is about its largest layer, whatever the file's size or quantization
(Llama 3.1 8B: 0.9 GB a layer; 70B: 3.4 GB), plus what Python and torch hold already.
"""

from __future__ import annotations

import math
import re

from attncli.core.sizes import FLOAT_BYTES, check_fits
from attncli.models.sources.base import WeightSource
from attncli.models.unembed import VOCAB_CHUNK

_LAYER = re.compile(r"(?:^|\.)(?:layers|h|layer|blocks|blk)\.(\d+)\.")


def layer_weights(shapes: dict[str, tuple[int, ...]]) -> dict[int, int]:
    """Bytes of each numbered layer's tensors as float32, by layer index."""
    layers: dict[int, int] = {}
    for name, shape in shapes.items():
        found = _LAYER.search(name)
        if found is not None:
            index = int(found.group(1))
            layers[index] = layers.get(index, 0) + math.prod(shape) * FLOAT_BYTES
    return layers


def run_bytes(shapes: dict[str, tuple[int, ...]]) -> int:
    """What a run holds at once beside its activations: the largest layer's float32 weights
    and the largest block of rows read from a tensor outside the layers (the unembedding)."""
    layers = layer_weights(shapes)
    rows = max((min(shape[0], VOCAB_CHUNK) * math.prod(shape[1:]) * FLOAT_BYTES
                for name, shape in shapes.items() if len(shape) == 2
                and not _LAYER.search(name)), default=0)
    return max(layers.values(), default=0) + rows


def check_model_fits(source: WeightSource, model: str) -> None:
    """Refuse, in one line, a model whose largest layer could not be held in the memory
    available now (before any of its weights is read)."""
    check_fits(run_bytes(source.shapes()), f"--model {model} needs one layer's weights as "
               "float32 at a time", "free memory, or pick a smaller model")
