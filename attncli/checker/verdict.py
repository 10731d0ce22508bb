"""Run a reader's class and the reference on every case, compare, and diagnose a difference by
trying each known mistake (then each pair) against the reader's outputs."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from torch import Tensor, nn

from attncli.checker.cases import BOOK_TOKENS, cases_for
from attncli.checker.defaults import changed
from attncli.checker.kinds import Constructor, Kind, KindName, constructor_of
from attncli.checker.load import class_name, theirs
from attncli.checker.mistakes import MISSING_CONTIGUOUS, MISTAKES, TRANSPOSE_2D, Mistake
from attncli.checker.reference import Weights, forward
from attncli.checker.runs import Order, Outcome, run_case
from attncli.checker.weights import Plan
from attncli.errors import AttnCliError

ATOL, RTOL = 1e-5, 1e-4  # float32 rounding of another order of the same sums
# The report's first line, in the text and in the JSON: `check` runs the reader's code.
RUNS_YOURS = "attncli check runs your code: {target} is imported, constructed and called."
ORDERS: tuple[Order, ...] = (("q", "k", "v"), ("k", "q", "v"), ("q", "v", "k"),
                             ("v", "k", "q"), ("k", "v", "q"), ("v", "q", "k"))


@dataclass
class Report:
    """The verdict on a reader's class: cases, differences, the mistake that explains them."""

    target: str
    kind: Kind
    plan: Plan
    outcomes: list[Outcome] = field(default_factory=list)
    mistakes: list[tuple[str, str]] = field(default_factory=list)  # (id, text) that match
    first: dict[str, Any] | None = None  # the first row that differs
    changed: list[str] = field(default_factory=list)  # the globals their code changed

    @property
    def passed(self) -> bool:
        """Every case equal to the book's within float32 rounding."""
        return all(_close(o) for o in self.outcomes)

    def to_dict(self) -> dict[str, Any]:
        """The JSON of `check --json`."""
        diffs = [_max_diff(o) for o in self.outcomes]
        finite = [d for d in diffs if d is not None]
        out: dict[str, Any] = {
            "notice": RUNS_YOURS.format(target=self.target),
            "kind": "check", "verdict": "pass" if self.passed else "fail", "target": self.target,
            "book_kind": self.kind.name.value, "book_class": self.kind.book_class,
            "class": self.target.rpartition(":")[2] or self.target,
            "copied": {"how": self.plan.how, "map": self.plan.describe(),
                       "guessed_order": self.plan.guessed, "ignored": self.plan.ignored},
            "tolerance": {"atol": ATOL, "rtol": RTOL}, "your_settings": self.changed,
            "max_diff": max(finite) if len(finite) == len(diffs) else None,
            "cases": [_case(o, d) for o, d in zip(self.outcomes, diffs, strict=True)]}
        if not self.passed:
            # explains_output: the reference with the mistake gives theirs (not a mistake seen
            # in what their forward did, such as .view without .contiguous()).
            seen = {MISSING_CONTIGUOUS[0], TRANSPOSE_2D[0]}
            out["diagnosis"] = {"mistakes": [{"id": i, "text": t, "explains_output": i not in seen}
                                             for i, t in self.mistakes],
                                "first_difference": self.first}
        return out


def _case(o: Outcome, diff: float | None) -> dict[str, Any]:
    s = o.case.setting
    return {"name": o.case.name, "shape": list(o.case.x.shape), "d_in": s.d_in, "d_out": s.d_out,
            "context_length": s.context_length, "num_heads": s.num_heads, "dropout": s.dropout,
            "training": s.training, "qkv_bias": s.qkv_bias, "seed": s.seed,
            "pass": _close(o), "max_diff": diff, "error": o.error}


def _differences(out: Tensor, ref: Tensor) -> Tensor:
    """|out - ref|, 0 where both are NaN, inf where only one is."""
    diff = (out - ref).abs()  # (..., d_out)
    both = out.isnan() & ref.isnan()  # (..., d_out)
    return torch.where(both, 0.0, diff.nan_to_num(nan=torch.inf))  # (..., d_out)


def _matches(out: Tensor, ref: Tensor) -> bool:
    if out.shape != ref.shape:
        return False
    return bool((_differences(out, ref) <= ATOL + RTOL * ref.abs().nan_to_num()).all())


def _close(o: Outcome) -> bool:
    return o.output is not None and o.reference is not None and _matches(o.output, o.reference)


def _max_diff(o: Outcome) -> float | None:
    if o.output is None or o.reference is None:
        return None
    value = float(_differences(o.output, o.reference).max())
    return value if value != float("inf") else None


def _reference(o: Outcome, kind: Kind, mistakes: frozenset[str], w: Weights) -> Tensor:
    torch.manual_seed(o.case.setting.seed)
    return forward(kind, w, o.case.x, o.case.setting, mistakes)


def _weights_for(o: Outcome, m: Mistake, w: Weights) -> Weights | None:
    """The weights a mistake computes with in this case (None: it cannot be this mistake)."""
    s = o.case.setting
    if m.weights == "extra_bias" and not s.qkv_bias:
        extra = o.plan.extra_biases()
        if not extra:
            return None
        return replace(w, b_query=extra.get("q"), b_key=extra.get("k"), b_value=extra.get("v"))
    if m.weights == "missing_bias" and s.qkv_bias:
        return replace(w, b_query=None, b_key=None, b_value=None)
    return w


def _explains(group: tuple[Mistake, ...], outcomes: list[Outcome], kind: Kind) -> bool:
    """Whether the mistakes together give the reader's output in every case."""
    switches = frozenset(m.id for m in group if m.weights is None)
    for o in outcomes:
        w: Weights | None = o.weights
        for m in group:
            w = None if w is None else _weights_for(o, m, w)
        if w is None or o.output is None or bool(o.output.isnan().all()) or not _matches(
                o.output, _reference(o, kind, switches, w)):
            return False  # an output of NaN alone matches any mistake that gives NaN
    return True


def diagnose(outcomes: list[Outcome], kind: Kind) -> list[tuple[str, str]]:
    """The known mistakes (one, else two together) whose outputs equal the reader's."""
    if any(o.contiguous for o in outcomes):
        return [MISSING_CONTIGUOUS]
    if kind.batched and any(o.transposed for o in outcomes):
        return [TRANSPOSE_2D]
    if any(o.output is None for o in outcomes):
        return []
    known = [m for m in MISTAKES if m.fits(kind)]
    for size in (1, 2):
        found = [g for g in itertools.combinations(known, size) if _explains(g, outcomes, kind)]
        if found:
            return [(" + ".join(m.id for m in g), "; and ".join(m.text for m in g))
                    for g in found]
    return []


def _first_difference(outcomes: list[Outcome]) -> dict[str, Any] | None:
    for o in outcomes:
        if _close(o) or o.output is None or o.reference is None:
            continue
        out, ref = o.output, o.reference
        rows_out = out.reshape(-1, out.shape[-1])  # (b·T, d_out)
        rows_ref = ref.reshape(-1, ref.shape[-1])  # (b·T, d_out)
        for r in range(rows_out.shape[0]):
            if not _matches(rows_out[r], rows_ref[r]):
                tokens = o.case.x.shape[-2]
                batch, token = divmod(r, tokens)
                label = BOOK_TOKENS[token] if o.case.book else None
                return {"case": o.case.name, "batch": batch if out.dim() == 3 else None,
                        "token": token, "label": label,
                        "yours": [_plain(v) for v in rows_out[r].tolist()],
                        "book": [_plain(v) for v in rows_ref[r].tolist()]}
    return None


def _plain(value: float) -> float | None:
    return None if value != value or value in (float("inf"), float("-inf")) else value


def check_class(cls: type, target: str, forced: KindName | None = None) -> Report:
    """Run cls on every case against the book's computation; the global RNG is restored."""
    if not isinstance(cls, type):
        raise AttnCliError(f"{target} is not a class")
    if not issubclass(cls, nn.Module):
        raise AttnCliError(f"{class_name(cls)} is not a torch.nn.Module: the book's classes "
                           "subclass nn.Module")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the cases are tiny: a thread pool only costs them time
    try:
        report = _checked(cls, constructor_of(cls, forced), target)
    except (AttnCliError, KeyboardInterrupt):
        raise
    except BaseException as err:  # their metaclass, raising where attncli looks at the class
        raise AttnCliError(f"looking at your class {class_name(cls)} raised "
                           f"{theirs(err)}") from None
    finally:
        torch.set_num_threads(threads)
    report.changed = changed()
    return report


def _outcomes(cls: type, ctor: Constructor, order: Order | None,
              flips: frozenset[str] = frozenset()) -> list[Outcome]:
    outcomes = [run_case(cls, ctor, case, order, flips) for case in cases_for(ctor)]
    for o in outcomes:
        o.reference = _reference(o, ctor.kind, frozenset(), o.weights)
    return outcomes


def _guesses(outcomes: list[Outcome]) -> list[tuple[Order | None, frozenset[str]]]:
    """The other readings of the reader's weights: q, k and v in another order when only
    declaration order told them apart; a square raw matrix (W_out used as ctx @ W_out, or
    ctx @ W_out.T) the other way round."""
    square = sorted(frozenset().union(*(o.plan.square() for o in outcomes)))
    flips = [frozenset(c) for n in range(len(square) + 1)
             for c in itertools.combinations(square, n)]
    orders: tuple[Order | None, ...] = ORDERS if outcomes[0].plan.guessed else (None,)
    return [(o, f) for o in orders for f in flips][1:]


def _checked(cls: type, ctor: Constructor, target: str) -> Report:
    with torch.random.fork_rng(devices=[]):
        outcomes = _outcomes(cls, ctor, None)
        passed = all(_close(o) for o in outcomes)
        mistakes = [] if passed else diagnose(outcomes, ctor.kind)
        # The reading that passes is the reader's, else the one with the simplest diagnosis
        # (one mistake, not two).
        for order, flips in [] if passed else _guesses(outcomes):
            tried = _outcomes(cls, ctor, order, flips)
            if all(_close(o) for o in tried):
                outcomes, mistakes = tried, []
                break
            found = diagnose(tried, ctor.kind)
            if found and (not mistakes or _size(found) < _size(mistakes)):
                outcomes, mistakes = tried, found
        report = Report(target, ctor.kind, outcomes[0].plan, outcomes)
        if not report.passed:
            report.mistakes = mistakes
            report.first = _first_difference(outcomes)
    return report


def _size(found: list[tuple[str, str]]) -> int:
    """How many mistakes a diagnosis needs (1 or 2)."""
    return 1 + found[0][0].count(" + ")


__all__ = ["Report", "check_class"]

