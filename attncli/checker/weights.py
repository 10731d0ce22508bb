"""Copy the reference's weights into a reader's module: by the book's names, else by shape.

A reader may hold nn.Linear layers (y = x·Wᵀ + b) or raw nn.Parameter matrices (y = x·W), name
them as they like, or fuse W_query, W_key and W_value into one projection. The plan says which
of their parameters receives which of the book's, so the report can say how it copied.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

import torch
from torch import Tensor, nn

from attncli.checker.reference import Setting, Weights
from attncli.errors import AttnCliError

BOOK_NAMES = {"W_query": "q", "W_key": "k", "W_value": "v", "out_proj": "out"}
HINTS = (("q", r"(^|_)(q|query|queries)($|_|\d)|^wq"), ("k", r"(^|_)(k|key|keys)($|_|\d)|^wk"),
         ("v", r"(^|_)(v|value|values)($|_|\d)|^wv"),
         ("out", r"(^|_)(o|out|proj|out_proj|o_proj|output|wo)($|_|\d)"))
ROLES = ("q", "k", "v", "out")
BOOK = {"q": "W_query", "k": "W_key", "v": "W_value", "out": "out_proj"}


@dataclass(frozen=True)
class Slot:
    """One reader matrix (and its bias) that plays one role, or the three fused."""

    name: str  # the reader's name for it, e.g. "W_query" or "attn.qkv"
    weight: nn.Parameter
    bias: nn.Parameter | None
    matmul: bool  # used as x @ W (d_in, d_out), not as nn.Linear's x @ Wᵀ
    fused: bool = False  # q, k and v side by side, in that order
    raw: bool = False  # an nn.Parameter of theirs: a square one may be used either way round


@dataclass
class Plan:
    """Which reader parameter receives which of the reference's, and how the match was made."""

    how: str  # "names" (the book's) or "shapes"
    slots: dict[str, Slot] = field(default_factory=dict)  # role (q, k, v, out or qkv) → slot
    ignored: list[str] = field(default_factory=list)  # the reader's parameters the book lacks
    guessed: bool = False  # q, k and v told apart by the order they were declared in
    heads: list[tuple[str, Plan]] = field(default_factory=list)  # the wrapper's, by module name

    def reordered(self, order: tuple[str, str, str]) -> Plan:
        """The plan with its q, k and v slots given to the roles in order (a guess tried)."""
        if self.heads:
            return Plan(self.how, {}, self.ignored, self.guessed,
                        [(name, head.reordered(order)) for name, head in self.heads])
        slots = dict(self.slots)
        for role, source in zip(("q", "k", "v"), order, strict=True):
            slots[role] = self.slots[source]
        return Plan(self.how, slots, self.ignored, self.guessed)

    def square(self) -> frozenset[str]:
        """The roles held by square raw matrices, whose orientation their shape cannot tell."""
        found = {role for role, slot in self.slots.items() if slot.raw and not slot.fused
                 and slot.weight.dim() == 2 and slot.weight.shape[0] == slot.weight.shape[1]}
        return frozenset(found.union(*(head.square() for _, head in self.heads)))

    def flipped(self, roles: frozenset[str]) -> Plan:
        """The plan with the matrices of roles used the other way round (a guess tried)."""
        square = self.square()
        slots = {role: replace(slot, matmul=not slot.matmul) if role in roles & square
                 else slot for role, slot in self.slots.items()}
        return Plan(self.how, slots, self.ignored, self.guessed,
                    [(name, head.flipped(roles)) for name, head in self.heads])

    def describe(self) -> dict[str, str]:
        """Each reader name → the book's name it received."""
        if self.heads:
            return {f"{name}.{yours}": f"{book} (head {h})" for h, (name, head) in
                    enumerate(self.heads) for yours, book in head.describe().items()}
        out = {}
        for role, slot in self.slots.items():
            book = "W_query, W_key, W_value" if role == "qkv" else BOOK[role]
            out[slot.name] = book + (" (transposed)" if slot.matmul else "")
        return out

    def extra_biases(self) -> dict[str, Tensor]:
        """The reader's own q/k/v biases, by role: what a class computes with when the book
        has none (qkv_bias=False)."""
        found: dict[str, Tensor] = {}
        for role, slot in self.slots.items():
            if slot.bias is None or role == "out":
                continue
            bias = slot.bias.detach().float()  # (d_out,) or (3·d_out,) fused
            parts = bias.chunk(3) if slot.fused else (bias,)
            found |= dict(zip(("q", "k", "v") if slot.fused else (role,), parts, strict=True))
        return found

    def copy(self, w: Weights) -> None:
        """Write w into the reader's parameters, in their layout."""
        for (_, head), weights in zip(self.heads, w.heads, strict=False):
            head.copy(weights)
        with torch.no_grad():
            for role, slot in self.slots.items():
                if role == "qkv":
                    matrix = torch.cat([w.W_query, w.W_key, w.W_value])  # (3·d_out, d_in)
                    biases = [w.b_query, w.b_key, w.b_value]
                    bias = None if biases[0] is None else torch.cat(biases)  # type: ignore[arg-type]
                else:
                    matrix, bias = _role(w, role)
                slot.weight.copy_(matrix.T if slot.matmul else matrix)
                if slot.bias is not None and bias is not None:
                    slot.bias.copy_(bias)


def _role(w: Weights, role: str) -> tuple[Tensor, Tensor | None]:
    if role == "out":  # only MultiHeadAttention's plan has it, and its weights always do
        assert w.out_proj is not None, "a multi-head case's weights hold out_proj"
        return w.out_proj, w.out_bias
    return {"q": (w.W_query, w.b_query), "k": (w.W_key, w.b_key),
            "v": (w.W_value, w.b_value)}[role]


Candidate = tuple[str, nn.Parameter, "nn.Parameter | None", bool]


def _candidates(module: nn.Module) -> list[Candidate]:
    """(name, weight, bias, matmul) for every nn.Linear, then every raw 2-D parameter."""
    found: list[Candidate] = []
    owned: set[int] = set()
    for name, param in module.named_parameters():
        if isinstance(param, nn.parameter.UninitializedParameter):
            raise AttnCliError(f"your parameter {name!r} is lazy (nn.LazyLinear): give the layer "
                               "its in_features, as the book's nn.Linear(d_in, d_out) does")
    for name, sub in module.named_modules():
        if isinstance(sub, nn.Linear):
            found.append((name, sub.weight, sub.bias, False))  # type: ignore[arg-type]
            owned |= {id(sub.weight), id(sub.bias)}
    raw = [(n, p) for n, p in module.named_parameters() if id(p) not in owned]
    vectors = {n: p for n, p in raw if p.dim() == 1}
    for name, param in raw:
        if param.dim() == 2:
            bias = next((b for n, b in vectors.items() if _pairs(name, n)), None)
            vectors = {n: b for n, b in vectors.items() if b is not bias}
            found.append((name, param, bias, True))
        elif param.dim() != 1:
            found.append((name, param, None, True))  # no projection's shape: ignored below
    for name, param in vectors.items():  # vectors that are no matrix's bias: kept apart
        found.append((name, param, None, True))
    return found


def _pairs(matrix: str, vector: str) -> bool:
    """Whether a raw 1-D parameter is the bias of a raw matrix: W_query_bias, or wq and bq."""
    if _stem(vector) == _stem(matrix) + "_bias":
        return True
    m, v = matrix.split(".")[-1].lower(), vector.split(".")[-1].lower()
    return m[:1] == "w" and v[:1] == "b" and m[1:].lstrip("_") == v[1:].lstrip("_") != ""


def _stem(name: str) -> str:
    return name.replace(".", "_").removesuffix("_weight")


def _hint(name: str) -> str | None:
    last = name.split(".")[-1].lower()
    for role, pattern in HINTS:
        if re.search(pattern, last):
            return role
    return None


def stacked_plan(module: nn.Module, s: Setting) -> Plan:
    """The wrapper's plan: one per CausalAttention head, found in its nn.ModuleList."""
    lists = [(n, m) for n, m in module.named_modules()
             if isinstance(m, nn.ModuleList) and len(m) == s.num_heads]
    if not lists:
        raise AttnCliError(f"the book's MultiHeadAttentionWrapper keeps its {s.num_heads} heads "
                           "in an nn.ModuleList of CausalAttention modules; yours has none")
    name, heads = lists[0]
    one = replace(s, num_heads=1)
    plans = [(f"{name}.{h}", plan_for(head, one, False)) for h, head in enumerate(heads)]
    how = "names" if all(p.how == "names" for _, p in plans) else "shapes"
    return Plan(how, {}, [i for _, p in plans for i in p.ignored],
                any(p.guessed for _, p in plans), plans)


def plan_for(module: nn.Module, s: Setting, multihead: bool, stacked: bool = False) -> Plan:
    """Match the reader's parameters to the book's roles: its names, else shapes and hints."""
    if stacked:
        return stacked_plan(module, s)
    items = _candidates(module)
    if not items:
        raise AttnCliError("your class has no weights (no nn.Linear and no nn.Parameter): "
                           "chapter 3's classes project with W_query, W_key and W_value")
    named = {BOOK_NAMES[n]: (n, w, b, m) for n, w, b, m in items if n in BOOK_NAMES}
    if {"q", "k", "v"} <= set(named):
        plan = Plan("names")
        for role, (name, weight, bias, matmul) in named.items():
            plan.slots[role] = Slot(name, weight, bias, _layout(weight, s, matmul), raw=matmul)
        rest = [i for i in items if i[0] not in BOOK_NAMES]
        out = _out_of(rest, s) if multihead and "out" not in plan.slots else None
        if out is not None:  # W_out beside the book's W_query, W_key and W_value
            name, weight, bias, matmul = out
            plan.slots["out"] = Slot(name, weight, bias, _layout(weight, s, matmul), raw=matmul)
        plan.ignored = [_shown(n, w) for n, w, *_ in rest if out is None or n != out[0]]
        return _checked(plan, s, multihead)
    plan = Plan("shapes")
    left: list[Slot] = []
    for name, weight, bias, matmul in items:
        shape = tuple(weight.shape)
        if shape in ((3 * s.d_out, s.d_in), (s.d_in, 3 * s.d_out)) and "qkv" not in plan.slots:
            plan.slots["qkv"] = Slot(name, weight, bias, shape[0] == s.d_in, fused=True)
        elif weight.dim() != 2:
            plan.ignored.append(_shown(name, weight))
        else:
            left.append(Slot(name, weight, bias, _layout(weight, s, matmul), raw=matmul))
    free = [r for r in ROLES if r not in plan.slots and not ("qkv" in plan.slots and r != "out")]
    for slot in list(left):  # names that say their role
        hinted = _hint(slot.name)
        if hinted is not None and hinted in free and _fits(slot, s, hinted):
            plan.slots[hinted] = slot
            free.remove(hinted)
            left.remove(slot)
    for slot in left:  # the rest in the order they were declared
        found = next((r for r in free if _fits(slot, s, r)), None)
        if found is None:
            plan.ignored.append(_shown(slot.name, slot.weight))
            continue
        plan.guessed |= found in ("q", "k", "v")
        plan.slots[found] = slot
        free.remove(found)
    return _checked(plan, s, multihead)


def _out_of(items: list[Candidate], s: Setting) -> Candidate | None:
    """The output projection among parameters not named as the book's: a d_out × d_out
    matrix whose name says so, else the only one."""
    square = [i for i in items if tuple(i[1].shape) == (s.d_out, s.d_out)]
    hinted = [i for i in square if _hint(i[0]) == "out"]
    return hinted[0] if hinted else square[0] if len(square) == 1 else None


def _shown(name: str, weight: Tensor) -> str:
    return f"{name} {tuple(weight.shape)}"


def _layout(weight: Tensor, s: Setting, matmul: bool) -> bool:
    """Whether a matrix is used as x @ W: a raw parameter shaped (d_in, d_out), or square."""
    if not matmul:
        return False
    return tuple(weight.shape) != (s.d_out, s.d_in) or s.d_in == s.d_out


def _fits(slot: Slot, s: Setting, role: str) -> bool:
    shape = tuple(slot.weight.shape)
    want = (s.d_out, s.d_out) if role == "out" else (s.d_out, s.d_in)
    return shape in (want, want[::-1])


def _checked(plan: Plan, s: Setting, multihead: bool) -> Plan:
    roles = set(plan.slots)
    if "qkv" not in roles and not {"q", "k", "v"} <= roles:
        missing = ", ".join(BOOK[r] for r in ("q", "k", "v") if r not in roles)
        extra = f"; yours: {', '.join(plan.ignored)}" if plan.ignored else ""
        raise AttnCliError(f"cannot copy the book's weights into yours: nothing of yours has "
                           f"the shape of {missing} ({s.d_out} × {s.d_in}, or its transpose; "
                           f"d_in={s.d_in}, d_out={s.d_out}){extra}")
    for role, slot in plan.slots.items():
        if role != "qkv" and not _fits(slot, s, role):
            raise AttnCliError(f"cannot copy the book's {BOOK[role]} into your {slot.name!r}: "
                               f"its shape is {tuple(slot.weight.shape)}")
    if "out" in plan.slots and not multihead:
        raise AttnCliError(f"your {plan.slots['out'].name!r} looks like an output projection, "
                           "which only MultiHeadAttention has")
    return plan
