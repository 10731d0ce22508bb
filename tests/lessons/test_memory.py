"""lessons/memory.py: the peak bytes it counts, and the private torch it stands on (pinned)."""

from __future__ import annotations

import subprocess
import sys

import torch

from attncli.lessons.memory import AllocationTracker, _tensors, peak_bytes


def test_the_private_dispatch_mode_it_subclasses_is_there() -> None:
    """TorchDispatchMode lives in torch.utils._python_dispatch and asks _should_skip_dynamo
    (a classmethod) on entry: a torch that moves or renames either fails here, not in `cost`."""
    from torch.utils import _python_dispatch

    assert AllocationTracker.__mro__[1] is _python_dispatch.TorchDispatchMode
    assert callable(_python_dispatch.TorchDispatchMode._should_skip_dynamo)
    assert AllocationTracker._should_skip_dynamo() is False


def test_entering_the_tracker_imports_no_dynamo() -> None:
    """The override does what it is for: tracking a computation leaves torch._dynamo unloaded."""
    code = ("import sys, torch; from attncli.lessons.memory import peak_bytes; "
            "peak_bytes(lambda: torch.ones(1000) * 2, ()); print('torch._dynamo' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"


def test_it_counts_every_tensor_an_op_returns() -> None:
    a, b = torch.ones(3), torch.zeros(2)
    assert _tensors((a, [b, 1], {"x": a})) == [a, b, a] and _tensors(1.0) == []
    peak, _ = peak_bytes(lambda: torch.ones(1000, dtype=torch.float32).sort(), ())
    assert peak >= 1000 * 4 + 1000 * 8  # the values and their int64 indices, both counted
