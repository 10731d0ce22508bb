"""The book's four attention classes as `check` knows them: constructor, shape, traits."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from enum import Enum
from typing import Any

from attncli.checker.load import class_name
from attncli.errors import AttnCliError


class KindName(str, Enum):
    """Which of chapter 3's classes a reader's class is."""

    self_v1 = "self_v1"
    self_v2 = "self_v2"
    causal = "causal"
    multihead = "multihead"
    wrapper = "wrapper"


@dataclass(frozen=True)
class Kind:
    """One of the book's classes: its constructor's arguments, what its forward computes."""

    name: KindName
    book_class: str  # the book's class name
    params: tuple[str, ...]  # the constructor's required arguments, in the book's order
    causal: bool = False
    dropout: bool = False
    multihead: bool = False
    batched: bool = True  # forward takes (b, T, d_in); the self-attention classes take (T, d_in)
    linear: bool = True  # nn.Linear projections (v1 holds nn.Parameter matrices)
    stacked: bool = False  # whole CausalAttention heads side by side: num_heads · d_out wide

    @property
    def takes_heads(self) -> bool:
        """Whether the constructor takes num_heads."""
        return self.multihead or self.stacked

    @property
    def signature(self) -> str:
        """How the book's constructor reads, e.g. CausalAttention(d_in, d_out, ...)."""
        bias = "" if self.name is KindName.self_v1 else ", qkv_bias=False"
        return f"{self.book_class}({', '.join(self.params)}{bias})"


KINDS: dict[KindName, Kind] = {
    KindName.self_v1: Kind(KindName.self_v1, "SelfAttention_v1", ("d_in", "d_out"),
                           batched=False, linear=False),
    KindName.self_v2: Kind(KindName.self_v2, "SelfAttention_v2", ("d_in", "d_out"),
                           batched=False),
    KindName.causal: Kind(KindName.causal, "CausalAttention",
                          ("d_in", "d_out", "context_length", "dropout"), causal=True,
                          dropout=True),
    KindName.multihead: Kind(KindName.multihead, "MultiHeadAttention",
                             ("d_in", "d_out", "context_length", "dropout", "num_heads"),
                             causal=True, dropout=True, multihead=True),
    KindName.wrapper: Kind(KindName.wrapper, "MultiHeadAttentionWrapper",
                           ("d_in", "d_out", "context_length", "dropout", "num_heads"),
                           causal=True, dropout=True, stacked=True),
}
SIGNATURES = "; ".join(k.signature for k in KINDS.values() if k.batched and not k.stacked)


@dataclass(frozen=True)
class Constructor:
    """How to call the reader's constructor: by the book's keywords or by position."""

    kind: Kind
    keywords: bool  # the reader's names are the book's: call by keyword
    bias: str | None  # the name of its qkv_bias argument, or None when it takes none

    def arguments(self, values: dict[str, Any], qkv_bias: bool) -> tuple[list[Any], dict[str, Any]]:
        """Positional and keyword arguments for the book's values (d_in, d_out, ...)."""
        ordered = [values[p] for p in self.kind.params]
        extra = {} if self.bias is None or not qkv_bias else {self.bias: True}
        if self.keywords:
            return [], dict(zip(self.kind.params, ordered, strict=True)) | extra
        return ordered, extra


def kind_named(value: str | None) -> KindName | None:
    """--kind (or kind=): one of the book's classes by its short name."""
    if value is None:
        return None
    try:
        return KindName(value)
    except ValueError:
        raise AttnCliError(f"unknown kind {value!r} (choose from "
                           f"{', '.join(k.value for k in KindName)})") from None


def _parameters(cls: type) -> tuple[list[inspect.Parameter], bool]:
    """The constructor's named parameters, and whether it takes *args."""
    try:
        signature = inspect.signature(cls)
    except Exception:  # a metaclass of the reader's may raise anything here
        raise AttnCliError(f"cannot read the constructor of {class_name(cls)}") from None
    values = list(signature.parameters.values())
    return ([p for p in values if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD,
                                             p.KEYWORD_ONLY)],
            any(p.kind is p.VAR_POSITIONAL for p in values))


def constructor_of(cls: type, forced: KindName | None = None) -> Constructor:
    """Which book class cls is, from its constructor (or --kind), and how to call it."""
    params, star = _parameters(cls)
    names = [p.name for p in params]
    if star and forced is not None and not params:  # (*args, **kwargs): as the book calls it
        return Constructor(KINDS[forced], False, None)
    required = [p for p in params if p.default is p.empty and p.kind is not p.KEYWORD_ONLY]
    optional = [p.name for p in params if p.default is not p.empty]
    kind = KINDS[forced] if forced is not None else _detect(cls, names, len(required))
    book = list(kind.params)
    unfit = len(required) > len(book) or (len(params) < len(book) and not star) or (
        "qkv_bias" in names[:len(book)])
    if unfit:
        raise AttnCliError(
            f"{class_name(cls)}({', '.join(names)}) does not take the arguments of the book's "
            f"{kind.book_class}: {kind.signature}")
    by_name = {p.name: p for p in params}
    keywords = all(n in by_name and by_name[n].kind is not by_name[n].POSITIONAL_ONLY
                   for n in book)
    bias = "qkv_bias" if "qkv_bias" in names else (
        optional[0] if len(params) > len(book) and optional and not keywords
        and names.index(optional[0]) == len(book) else None)
    return Constructor(kind, keywords, None if kind.name is KindName.self_v1 else bias)


def _detect(cls: type, names: list[str], required: int) -> Kind:
    if "num_heads" in names or required == 5:
        # The two classes with heads share a constructor: the book's names tell them apart.
        wrapper = "wrapper" in class_name(cls).lower()
        return KINDS[KindName.wrapper if wrapper else KindName.multihead]
    if "context_length" in names or required == 4:
        return KINDS[KindName.causal]
    if required == 2:
        v1 = not ("qkv_bias" in names or len(names) > 2)
        return KINDS[KindName.self_v1 if v1 else KindName.self_v2]
    shown = ", ".join(names) or "no named arguments"
    raise AttnCliError(
        f"{class_name(cls)}({shown}) does not take a chapter-3 constructor: expected "
        f"SelfAttention_v1/v2(d_in, d_out[, qkv_bias]), {SIGNATURES} (or give --kind)")
