"""The Jinja2 environment transformers renders chat templates in (ImmutableSandboxedEnvironment
with trim_blocks and lstrip_blocks, loop controls, its own tojson, raise_exception,
strftime_now, dict and namespace), with every route to a large value weighed (bounds.py):
operators (*, +, **, %, and ~ through its own code), each {{ }} written, each block joined,
every call of a filter, method or function (before it runs where a size argument could make
it large, and its result after), str.format's fields, lipsum's paragraphs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime
from functools import cache, update_wrapper, wraps
from typing import Any

import jinja2
import jinja2.ext
from jinja2.compiler import CodeGenerator, Frame
from jinja2.nodes import Concat
from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedFormatter
from jinja2.utils import _PassArg, generate_lorem_ipsum

from attncli.models.generate.bounds import (
    FILTERS,
    MATERIALISED,
    METHODS,
    binop,
    check,
    json_size,
    refuse_past,
    spec_size,
    weight,
)

CONTAINERS = (str, bytes, list, tuple, dict, set, frozenset)


class _Code(CodeGenerator):
    """Jinja's code generator, with ~ joined by the environment (weighed) instead of str_join."""

    def visit_Concat(self, node: Concat, frame: Frame) -> None:  # noqa: N802 (Jinja's name)
        self.write("environment.join_values((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


class _Formatter(SandboxedFormatter):
    """str.format's sandboxed formatter, each field weighed with its width before it is
    written, and the fields together."""

    def __init__(self, env: Bounded) -> None:
        super().__init__(env)
        self.bound, self.written = env.limit, 0

    def format_field(self, value: Any, format_spec: str) -> Any:
        self.written += weight(value, self.bound) + spec_size(format_spec, self.bound)
        refuse_past(self.written, self.bound, "str.format")
        return super().format_field(value, format_spec)


BOUND: ContextVar[int] = ContextVar("BOUND", default=1 << 20)  # the render's, set by bounded()


@contextmanager
def bounded(limit: int) -> Iterator[None]:
    """Renders inside (in this thread or task) weigh their values against limit."""
    token = BOUND.set(limit)
    try:
        yield
    finally:
        BOUND.reset(token)


class Bounded(ImmutableSandboxedEnvironment):
    """The sandbox with size bounds: no value a render makes weighs more than its bound (one
    environment for every render, each with its own bound)."""

    intercepted_binops = frozenset({"*", "+", "**", "%"})
    code_generator_class = _Code

    def __init__(self, **options: Any) -> None:
        super().__init__(finalize=self._written, **options)
        self.filters = {name: self._bounded_filter(name, f) for name, f in self.filters.items()}

    @property
    def limit(self) -> int:
        """The bound of the render running now."""
        return BOUND.get()

    def _written(self, value: Any) -> Any:
        return check(value, self.limit, "a {{ }}")

    def join_values(self, values: tuple[Any, ...]) -> str:
        """a ~ b ~ ...: refused before the join when the parts together pass the bound."""
        refuse_past(sum(weight(v, self.limit) for v in values), self.limit, "an expression (~)")
        return "".join(map(str, values))

    def concat(self, parts: Any) -> str:
        """A block's pieces joined (a macro's, {% set %}...{% endset %}, {% filter %})."""
        parts = list(parts)
        refuse_past(sum(weight(p, self.limit) for p in parts), self.limit, "a block")
        return "".join(parts)

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        binop(operator, left, right, self.limit)
        return check(super().call_binop(context, operator, left, right), self.limit,
                     f"an expression ({operator})")

    def call(__self, __context: Any, __obj: Any, *args: Any,  # noqa: N805 (Jinja's signature)
             **kwargs: Any) -> Any:
        name, owner = getattr(__obj, "__name__", ""), getattr(__obj, "__self__", None)
        what = f"{name}()" if name else "a call"
        if isinstance(owner, str | bytes | int) and name in METHODS:
            if name in MATERIALISED and args and not isinstance(args[0], CONTAINERS):
                args = (list(args[0]), *args[1:])
            refuse_past(_estimate(METHODS[name], __self.limit, owner, args, kwargs),
                        __self.limit, what)
        if __obj is generate_lorem_ipsum:
            refuse_past(16 * max(_count(args, kwargs, 0, "n", 5), 1) * max(
                _count(args, kwargs, 3, "max", 100), 1), __self.limit, what)
        return check(super().call(__context, __obj, *args, **kwargs), __self.limit, what)

    def wrap_str_format(self, value: Any) -> Any:
        """str.format and format_map through the weighing formatter."""
        wrapped = super().wrap_str_format(value)
        if wrapped is None:
            return None
        text, is_map = value.__self__, value.__name__ == "format_map"

        def bounded(*args: Any, **kwargs: Any) -> str:
            if is_map:
                if kwargs or len(args) != 1:
                    raise TypeError("format_map() takes exactly one argument")
                kwargs, args = args[0], ()
            return type(text)(_Formatter(self).vformat(text, args, kwargs))

        return update_wrapper(bounded, value)

    def _bounded_filter(self, name: str, f: Any) -> Any:
        """f, weighed: its value and size arguments before it runs (a list literal is built
        unweighed, and |string would write each part it holds), its result after."""
        passes = _PassArg.from_obj(f) is not None
        estimate = FILTERS.get(name)

        @wraps(f)
        def bounded(*args: Any, **kwargs: Any) -> Any:
            head, rest = (args[:1], args[1:]) if passes else ((), args)
            if name in MATERIALISED and rest and not isinstance(rest[0], CONTAINERS) \
                    and not isinstance(rest[0], jinja2.Undefined):
                rest = (list(rest[0]), *rest[1:])
            what = f"the filter {name}"
            if rest:
                refuse_past(weight(rest[0], self.limit), self.limit, what)
            if rest and estimate is not None:
                refuse_past(_estimate(estimate, self.limit, rest[0], rest[1:], kwargs),
                            self.limit, what)
            return check(f(*head, *rest, **kwargs), self.limit, what)

        return bounded


def _estimate(estimate: Any, limit: int, value: Any, args: tuple[Any, ...],
              kwargs: dict[str, Any]) -> int:
    """estimate(limit, value, *args, **kwargs); 0 when the arguments do not fit it (the call
    itself then says what is wrong with them)."""
    try:
        return int(estimate(limit, value, *args, **kwargs))
    except (TypeError, ValueError, AttributeError):
        return 0


def _count(args: tuple[Any, ...], kwargs: dict[str, Any], at: int, name: str,
           default: int) -> int:
    value = args[at] if len(args) > at else kwargs.get(name, default)
    return abs(value) if isinstance(value, int) else 0


@cache
def environment() -> Bounded:
    """The sandboxed environment transformers builds for chat templates, with size bounds (the
    render's own, set by bounded())."""

    class Generation(jinja2.ext.Extension):
        """{% generation %}...{% endgeneration %}: transformers marks the assistant's text
        with it; rendered as its body."""

        tags = {"generation"}

        def parse(self, parser: Any) -> Any:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body) \
                .set_lineno(lineno)

        def _body(self, caller: Any) -> str:
            return str(caller())

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None,
               sort_keys: bool = False) -> str:
        refuse_past(json_size(x, indent, BOUND.get()), BOUND.get(), "the filter tojson")
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(format: str) -> str:  # noqa: A002 (transformers' name)
        return datetime.now().strftime(format)

    class TemplateDict:
        def __call__(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
            return dict(*args, **kwargs)

        def fromkeys(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
            return dict.fromkeys(*args, **kwargs)

    class TemplateNamespace(jinja2.utils.Namespace):
        def __init__(*args: Any, **kwargs: Any) -> None:  # noqa: N805 (Jinja's own signature)
            self, rest = args[0], args[1:]
            attrs = dict(*rest, **kwargs)
            for name in attrs:
                TemplateNamespace._check_name(name)
            jinja2.utils.Namespace.__init__(self, attrs)

        def __setitem__(self, name: str, value: Any) -> None:
            TemplateNamespace._check_name(name)
            jinja2.utils.Namespace.__setitem__(self, name, value)

        @staticmethod
        def _check_name(name: Any) -> None:
            if isinstance(name, str) and name.startswith("_"):
                raise jinja2.exceptions.SecurityError(
                    f"a namespace attribute may not start with an underscore ({name!r})")

    env = Bounded(trim_blocks=True, lstrip_blocks=True,
                  extensions=[Generation, jinja2.ext.loopcontrols])
    env.filters["tojson"] = env._bounded_filter("tojson", tojson)
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    env.globals["dict"] = TemplateDict()
    env.globals["namespace"] = TemplateNamespace
    return env
