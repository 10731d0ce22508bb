"""Run a reader's class on one case: construct it, copy the book's weights in, call forward, and
keep its output or the one line that says why it cannot be compared."""

from __future__ import annotations

import contextlib
import warnings
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from attncli.checker.cases import Case
from attncli.checker.kinds import Constructor
from attncli.checker.load import class_name, said, theirs, yours
from attncli.checker.mistakes import CONTIGUOUS
from attncli.checker.outputs import usable
from attncli.checker.reference import Setting, Weights, make_weights
from attncli.checker.weights import Plan, plan_for
from attncli.errors import AttnCliError

Order = tuple[str, str, str]  # which guessed slot plays q, k and v


@dataclass
class Outcome:
    """One case's run of the reader's class."""

    case: Case
    weights: Weights
    plan: Plan
    output: Tensor | None = None  # (T, d_out) or (b, T, d_out)
    error: str | None = None  # what the reader's forward raised, or why its output is unusable
    contiguous: bool = False  # it raised torch's "use .contiguous()" error
    transposed: bool = False  # it took .T of a tensor of 3 or more dimensions
    reference: Tensor | None = None


_TRANSPOSE = vars(torch._C.TensorBase)["T"]  # torch's own .T


@contextlib.contextmanager
def _watching_T(seen: list[int]) -> Iterator[None]:  # noqa: N802  (the name is torch's .T)
    """While their forward runs, .T records the dimensions of a tensor of 3 or more (keys.T on
    a batched input reverses every dimension, a mistake torch only warns about once)."""

    def transpose(self: Tensor) -> Tensor:
        if self.dim() < 3:
            return _TRANSPOSE.__get__(self)
        seen.append(self.dim())
        with warnings.catch_warnings():  # torch's deprecation warning: the report names it
            warnings.simplefilter("ignore")
            return _TRANSPOSE.__get__(self)

    before = vars(Tensor).get("T")
    Tensor.T = property(transpose)  # type: ignore[assignment]
    try:
        yield
    finally:
        if before is None:
            del Tensor.T
        else:
            Tensor.T = before


def their_call(call: Callable[[], Any], what: str, settings: bool = False) -> Any:
    """Call the reader's code (with settings: under their file's globals): what it raises (even
    a BaseException) is one line of theirs."""
    try:
        with yours() if settings else contextlib.nullcontext():
            return call()
    except KeyboardInterrupt:
        raise
    except SystemExit as err:
        raise AttnCliError(f"{what} exited (SystemExit {said(err.code, as_repr=True)})") from None
    except AttnCliError:
        raise
    except BaseException as err:
        raise AttnCliError(f"{what} raised {theirs(err)}") from None


def _built(cls: type, ctor: Constructor, s: Setting) -> nn.Module:
    values = {"d_in": s.d_in, "d_out": s.d_out, "context_length": s.context_length,
              "dropout": s.dropout, "num_heads": s.num_heads}
    args, kwargs = ctor.arguments(values, s.qkv_bias)
    shown = ", ".join([*map(repr, args), *(f"{k}={v!r}" for k, v in kwargs.items())])
    module: nn.Module = their_call(lambda: cls(*args, **kwargs), f"your {class_name(cls)}({shown})",
                                   True)
    return module


def run_case(cls: type, ctor: Constructor, case: Case, order: Order | None = None,
             flips: frozenset[str] = frozenset()) -> Outcome:
    s = case.setting
    module = _built(cls, ctor, s)
    name = class_name(cls)
    plan = their_call(lambda: plan_for(module, s, ctor.kind.multihead, ctor.kind.stacked),
                      f"reading your {name}")
    if order is not None:
        plan = plan.reordered(order)
    if flips:
        plan = plan.flipped(flips)
    weights = make_weights(ctor.kind, s, seed=zlib.crc32(case.name.encode()))
    their_call(lambda: plan.copy(weights), f"copying the book's weights into your {name}")
    their_call(lambda: module.train(s.training), f"your {name}.train({s.training})", True)
    out = Outcome(case, weights, plan)
    torch.manual_seed(s.seed)
    params = their_call(lambda: list(module.parameters()), f"reading your {name}'s parameters")
    elsewhere = next((p.device for p in params if p.device.type != "cpu"), None)
    if elsewhere is not None:  # torch.set_default_device('meta') in their file, say
        out.error = f"your parameters are on the {said(elsewhere)} device, not the CPU"
        return out
    dtype = next((p.dtype for p in params if p.is_floating_point()), torch.float32)
    x = case.x.to(dtype, copy=True)  # a copy: a forward may change its input
    seen: list[int] = []
    try:
        with yours(), _watching_T(seen), torch.no_grad():
            result = module(x)
    except KeyboardInterrupt:
        raise
    except SystemExit as err:
        raise AttnCliError(f"your {name}'s forward exited (SystemExit "
                           f"{said(err.code, as_repr=True)})") from None
    except BaseException as err:
        out.error = f"your forward raised {theirs(err)}"
        out.contiguous = CONTIGUOUS in said(err, 1000)
        out.transposed = bool(seen)
        return out
    out.transposed = bool(seen)
    want = (*case.x.shape[:-1], s.d_out * (s.num_heads if ctor.kind.stacked else 1))
    plain = usable(result, want, ctor.kind.multihead and _width(result) == s.num_heads * s.d_out)
    if isinstance(plain, str):
        out.error = plain
    else:
        out.output = plain
    return out


def _width(result: object) -> int | None:
    """The last dimension of a dense tensor (to tell a wrapper's wide output), else None."""
    try:
        if isinstance(result, Tensor) and not result.is_nested and result.dim():
            return int(result.shape[-1])
    except Exception:  # a tensor subclass of theirs: usable() says what it is
        return None
    return None
