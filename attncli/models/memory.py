"""What a model run holds at once, from the checkpoint's shapes alone: one layer's weights as
float32 and a block of unembedding rows, never the whole file.

Blocks run one after another and each reads its own tensors, which are dropped before the next
block's are read; the embedding is read by rows and the unembedding VOCAB_CHUNK rows at a time.
So a run's memory is about its largest layer, whatever the file's size or quantization
(Llama 3.1 8B: 0.9 GB a layer; 70B: 3.4 GB), plus what Python and torch hold already.

On a GPU (--device cuda or mps) the same bound holds on the device: each tensor moves there as
it is read (sources/device.py), tensors made inside the run (masks, RoPE tables) are made there
under torch's device context, and results come back to the CPU where they become plain data
(core/convert.plain), the one place tensors leave the pipeline.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Concatenate, ParamSpec, TypeVar

import torch

import attncli.machine as machine
from attncli.core.pipeline import resolve_device
from attncli.core.request import Request
from attncli.core.sizes import FLOAT_BYTES
from attncli.errors import AttnCliError
from attncli.machine import check_fits, size_text
from attncli.models.sources.base import WeightSource
from attncli.models.sources.device import OnDevice
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


def held_bytes(source: WeightSource) -> int | None:
    """Every tensor of a GGUF on the CPU held at once: a matrix the quantized kernels compute
    on as the file holds it, every other tensor as float32; None for other sources (what they
    hold is float32, as their decoders count it)."""
    from attncli.models.sources.gguf.qmatmul import computes

    header = None if isinstance(source, OnDevice) else getattr(source, "header", None)
    tensors = getattr(header, "tensors", None)
    if not isinstance(tensors, dict) or getattr(source, "quantized", None) is None:
        return None
    return sum(info.nbytes if len(info.shape) == 2 and computes(info.qtype)
               else math.prod(info.shape) * FLOAT_BYTES for info in tensors.values())


def check_model_fits(source: WeightSource, model: str) -> None:
    """Refuse, in one line, a model that fits the memory available now neither held (every
    weight as the file holds it, where the kernels compute on its blocks) nor streamed (one
    layer's weights as float32 at a time), before any of its weights is read."""
    streamed, held = run_bytes(source.shapes()), held_bytes(source)
    if held is None:  # float32, every tensor
        held = sum(math.prod(shape) for shape in source.shapes().values()) * FLOAT_BYTES
    if not machine.fits(min(streamed, held)):
        check_fits(streamed, f"--model {model} needs its weights held ({size_text(held)}) or "
                   "one layer's weights as float32 at a time", "free memory, or pick a "
                   "smaller model")


def on_device(source: WeightSource, device: torch.device, model: str) -> WeightSource:
    """source as it is on the CPU, or wrapped to read onto device, once one layer's weights
    are found to fit in the device's free memory."""
    if device.type == "cpu":
        return source
    free = device_free_bytes(device)
    need = run_bytes(source.shapes())
    if free is not None and need > free // 2:
        raise AttnCliError(f"--model {model} needs one layer's weights as float32 at a time "
                           f"({size_text(need)}) on {device.type}, more than half its "
                           f"{size_text(free)} free; use --device cpu, or a smaller model")
    wrapped: WeightSource = OnDevice(source, device)
    return wrapped


def device_free_bytes(device: torch.device) -> int | None:
    """Free bytes on a CUDA device (torch.cuda.mem_get_info); None where torch cannot say (MPS
    shares the machine's memory, which the CPU check already counts)."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free)
    return None


@contextmanager
def computing_on(device: torch.device) -> Iterator[None]:
    """Tensors made inside (masks, RoPE tables, scores' patterns) made on device."""
    if device.type == "cpu":
        yield
        return
    with device:
        yield


P = ParamSpec("P")
R = TypeVar("R")


def on_request_device(
        run: Callable[Concatenate[Request, P], R]) -> Callable[Concatenate[Request, P], R]:
    """run(req, ...) with the tensors it makes made on req.device (a model run's, else the CPU:
    the chapter-3 pipeline moves its own)."""

    @functools.wraps(run)
    def wrapper(req: Request, /, *args: P.args, **kwargs: P.kwargs) -> R:
        device = resolve_device(req.device) if req.model else torch.device("cpu")
        with computing_on(device):
            return run(req, *args, **kwargs)

    return wrapper
