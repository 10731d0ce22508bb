"""Peak bytes of the tensors a computation allocates, tracked as torch creates and frees them."""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import Tensor
from torch.utils._python_dispatch import TorchDispatchMode  # no public path: a test pins it


def _tensors(out: Any) -> Iterable[Any]:
    """The tensors an op returned: itself, or those inside its tuples, lists and dicts."""
    if isinstance(out, tuple | list):
        return [t for item in out for t in _tensors(item)]
    if isinstance(out, dict):
        return [t for item in out.values() for t in _tensors(item)]
    return [out] if isinstance(out, Tensor) else []


class AllocationTracker(TorchDispatchMode):
    """Sees every tensor each torch op returns (in this thread) and counts its storage once.

    A storage is live while any tensor returned by an op still refers to it (views included);
    storages of the given foreign tensors (inputs made before) are not counted.
    """

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # Nothing here is compiled: without this, the first call imports torch._dynamo (seconds).
        # A private hook of TorchDispatchMode's, pinned by tests/lessons/test_memory.py.
        return False

    def __init__(self, foreign: Iterable[Tensor] = ()) -> None:
        super().__init__()
        self.foreign = {t.untyped_storage().data_ptr() for t in foreign}
        self.sizes: dict[int, int] = {}  # storage address → bytes
        self.owners: dict[int, set[int]] = {}  # storage address → ids of live tensors on it
        self.live = 0
        self.peak = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        for tensor in _tensors(out):
            self._track(tensor)
        return out

    def _track(self, tensor: Tensor) -> None:
        storage = tensor.untyped_storage()
        address = storage.data_ptr()
        if address in self.foreign or id(tensor) in self.owners.get(address, ()):
            return  # an input's storage, or an in-place op returning a tensor already counted
        if address not in self.sizes:
            self.sizes[address] = storage.nbytes()
            self.owners[address] = set()
            self.live += storage.nbytes()
            self.peak = max(self.peak, self.live)
        self.owners[address].add(id(tensor))
        weakref.finalize(tensor, self._release, address, id(tensor))

    def _release(self, address: int, tensor_id: int) -> None:
        self.owners[address].discard(tensor_id)
        if not self.owners[address]:
            self.live -= self.sizes.pop(address)
            del self.owners[address]


def peak_bytes(work: Callable[[], object], foreign: Iterable[Tensor],
               one_thread: bool = False) -> tuple[int, float]:
    """The most bytes work's tensors held at once, and its seconds; its result is dropped.

    one_thread: one torch thread, so that work which hands tasks to worker threads (the tiled
    path) runs them in this tracked thread.
    """
    threads = torch.get_num_threads()
    if one_thread:
        torch.set_num_threads(1)
    try:
        with torch.no_grad(), AllocationTracker(foreign) as tracker:
            start = time.perf_counter()
            result = work()
            seconds = time.perf_counter() - start
            del result
        return tracker.peak, seconds
    finally:
        torch.set_num_threads(threads)
