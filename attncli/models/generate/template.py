"""Chat templates rendered as transformers' apply_chat_template renders them: Jinja2's
ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks, loop controls, its own
tojson, raise_exception, strftime_now, dict and namespace; a template is data, never code.

Bounded: the text it writes, the size of what one operator may build, and the work it may do
(Python steps and seconds), so a hostile template is one line, not a hung or exhausted machine.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from types import FrameType
from typing import Any

from attncli.errors import AttnCliError

OUTPUT_SLACK = 1 << 20  # characters a template may write beyond the messages it is given
OPERAND_LIMIT = 1 << 20  # characters or items one * or + may build; bits one ** may build
STEP_LIMIT = 20_000_000  # traced Python steps of one render
SECONDS_LIMIT = 5.0  # wall-clock seconds of one render


class _Stop(Exception):
    """Raised inside a render that went past a bound."""


def _too_big(operator: str, left: Any, right: Any) -> bool:
    """Whether left operator right would build more than the bounds allow."""
    sized = (str, list, tuple)
    if operator == "*":
        for seq, n in ((left, right), (right, left)):
            if isinstance(seq, sized) and isinstance(n, int) and len(seq) * n > OPERAND_LIMIT:
                return True
    if operator == "+" and isinstance(left, sized) and isinstance(right, sized):
        return len(left) + len(right) > OPERAND_LIMIT
    if operator == "**" and isinstance(left, int | float) and isinstance(right, int | float):
        return abs(right) * max(abs(left), 2).bit_length() > OPERAND_LIMIT if isinstance(
            left, int) else False
    return False


def _environment() -> Any:
    """The sandboxed environment transformers builds for chat templates, with size bounds."""
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class Bounded(ImmutableSandboxedEnvironment):
        intercepted_binops = frozenset({"*", "+", "**"})

        def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
            if _too_big(operator, left, right):
                raise _Stop(f"an expression ({operator}) builds a value larger than "
                            f"{OPERAND_LIMIT:,}")
            return super().call_binop(context, operator, left, right)

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
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    env.globals["dict"] = TemplateDict()
    env.globals["namespace"] = TemplateNamespace
    return env


@contextmanager
def _bounded_work(steps: int, seconds: float) -> Iterator[None]:
    """Stop the code run inside after steps traced lines or seconds, whichever comes first."""
    deadline, count = time.monotonic() + seconds, 0
    previous = sys.gettrace()

    def trace(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal count
        count += 1
        if count % 4096 == 0 and (count > steps or time.monotonic() > deadline):
            raise _Stop(f"it ran past the bound of {steps:,} steps or {seconds:g} seconds "
                        "(a loop that does not end?)")
        return trace

    sys.settrace(trace)
    try:
        yield
    finally:
        sys.settrace(previous)


def render_template(template: str, messages: list[dict[str, str]], special: dict[str, str],
                    add_generation_prompt: bool = True) -> str:
    """The template's text for messages, as apply_chat_template(..., tokenize=False) gives it:
    special (bos_token, eos_token, ...) passed as transformers passes the tokenizer's."""
    import jinja2

    limit = sum(len(m["content"]) for m in messages) + len(template) + OUTPUT_SLACK
    try:
        compiled = _environment().from_string(template)
        parts: list[str] = []
        written = 0
        with _bounded_work(STEP_LIMIT, SECONDS_LIMIT):
            for piece in compiled.generate(messages=messages, tools=None, documents=None,
                                           add_generation_prompt=add_generation_prompt,
                                           **special):
                written += len(piece)
                if written > limit:
                    raise _Stop(f"it wrote more than {limit:,} characters")
                parts.append(piece)
    except _Stop as exc:
        raise AttnCliError(f"the chat template was stopped: {exc}") from None
    except jinja2.TemplateSyntaxError as exc:
        raise AttnCliError(f"the chat template is not valid Jinja (line {exc.lineno}): "
                           f"{_line(exc)}") from None
    except jinja2.TemplateError as exc:
        raise AttnCliError(f"the chat template failed to render: {_line(exc)}") from None
    except MemoryError:
        raise AttnCliError("the chat template needs more memory than there is") from None
    except RecursionError:
        raise AttnCliError("the chat template recursed too deeply") from None
    except (TypeError, ValueError, AttributeError, KeyError, IndexError, ZeroDivisionError,
            OverflowError) as exc:
        raise AttnCliError(f"the chat template failed to render: {type(exc).__name__}: "
                           f"{_line(exc)}") from None
    return "".join(parts)


def _line(exc: BaseException) -> str:
    """The first line of an exception's message, at most 300 characters."""
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:300]
