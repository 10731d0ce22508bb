"""Chat templates rendered as transformers' apply_chat_template renders them, in the sandbox of
sandbox.py: a template is data, never code.

Bounded: the template's own size, the text it writes, every value it builds (bounds.py), the
work it may do (Python steps and seconds), and, on Linux, the memory the render may add (an
address-space limit while it runs, for any route the weights do not see), so a hostile template
is one line, not a hung or exhausted machine.
"""

from __future__ import annotations

import gc
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from types import FrameType
from typing import Any

from attncli.errors import AttnCliError
from attncli.models.generate.bounds import Stop, weight

SLACK = 1 << 20  # characters a template may write or build beyond the messages it is given
TEMPLATE_LIMIT = 1 << 20  # characters of a template's own text (the largest known: ~40,000)
STEP_LIMIT = 20_000_000  # traced Python steps of one render
SECONDS_LIMIT = 5.0  # wall-clock seconds of one render
MEMORY_LIMIT = 512 << 20  # bytes of address space one render may add, beside 32 per character
CHECK_EVERY = 256  # traced steps between looks at the clock


@contextmanager
def _bounded_work(steps: int, seconds: float) -> Iterator[None]:
    """Stop the code run inside after steps traced lines or seconds, whichever comes first (a
    single call into C is weighed before it runs instead: bounds.py)."""
    deadline, count = time.monotonic() + seconds, 0
    previous = sys.gettrace()

    def trace(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal count
        count += 1
        if count % CHECK_EVERY == 0 and (count > steps or time.monotonic() > deadline):
            raise Stop(f"it ran past the bound of {steps:,} steps or {seconds:g} seconds "
                       "(a loop that does not end?)")
        return trace

    sys.settrace(trace)
    try:
        yield
    finally:
        sys.settrace(previous)


@contextmanager
def _bounded_memory(extra: int) -> Iterator[None]:
    """Let the code inside add at most extra bytes of address space (a MemoryError past it),
    by lowering the process's soft RLIMIT_AS while it runs; where /proc cannot say what is
    used (not Linux), the weights alone bound it."""
    import resource

    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            used = int(statm.read().split()[0]) * resource.getpagesize()
    except (OSError, ValueError, IndexError):
        used = None
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if used is not None:
        bound = min(b for b in (used + extra, soft, hard) if b != resource.RLIM_INFINITY)
        resource.setrlimit(resource.RLIMIT_AS, (bound, hard))
    try:
        yield
    finally:
        if used is not None:
            resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def render_template(template: str, messages: list[dict[str, str]], special: dict[str, str],
                    add_generation_prompt: bool = True) -> str:
    """The template's text for messages, as apply_chat_template(..., tokenize=False) gives it:
    special (bos_token, eos_token, ...) passed as transformers passes the tokenizer's."""
    try:
        return _render(template, messages, special, add_generation_prompt)
    except AttnCliError as exc:
        message = str(exc)
    # A stopped render's values sit in reference cycles (its frames and the exceptions that
    # left them): free them now, or the next render's memory bound would start from them.
    gc.collect()
    raise AttnCliError(message)


def _render(template: str, messages: list[dict[str, str]], special: dict[str, str],
            add_generation_prompt: bool) -> str:
    import jinja2

    from attncli.models.generate.sandbox import bounded

    if len(template) > TEMPLATE_LIMIT:
        raise AttnCliError(f"the chat template is {len(template):,} characters long, more than "
                           f"the {TEMPLATE_LIMIT:,} a template may have")
    limit = weight(messages, 1 << 62) + len(template) + SLACK
    memory = MEMORY_LIMIT + 32 * limit
    try:
        with _bounded_memory(memory), bounded(limit):
            compiled = _compiled(template)
            parts, written = [], 0
            with _bounded_work(STEP_LIMIT, SECONDS_LIMIT):
                for piece in compiled.generate(messages=messages, tools=None, documents=None,
                                               add_generation_prompt=add_generation_prompt,
                                               **special):
                    written += len(piece)
                    if written > limit:
                        raise Stop(f"it wrote more than {limit:,} characters")
                    parts.append(piece)
            return "".join(parts)
    except Stop as exc:
        raise AttnCliError(f"the chat template was stopped: {exc}") from None
    except jinja2.TemplateSyntaxError as exc:
        raise AttnCliError(f"the chat template is not valid Jinja (line {exc.lineno}): "
                           f"{_line(exc)}") from None
    except jinja2.TemplateError as exc:
        raise AttnCliError(f"the chat template failed to render: {_line(exc)}") from None
    except MemoryError:
        raise AttnCliError(f"the chat template was stopped: it needed more than the "
                           f"{memory >> 20:,} MB of memory a render may add") from None
    except (RecursionError, SyntaxError):  # SyntaxError: Python's own nesting limits
        raise AttnCliError("the chat template was stopped: it nests or recurses too deeply"
                           ) from None
    except (TypeError, ValueError, AttributeError, KeyError, IndexError, ZeroDivisionError,
            OverflowError) as exc:
        raise AttnCliError(f"the chat template failed to render: {type(exc).__name__}: "
                           f"{_line(exc)}") from None


@lru_cache(maxsize=8)
def _compiled(template: str) -> Any:
    """The template compiled once (a generation renders it twice: the prompt, and the turn's
    end); a template that fails to compile is tried again, and fails again, each time."""
    from attncli.models.generate.sandbox import environment

    return environment().from_string(template)


def _line(exc: BaseException) -> str:
    """The first line of an exception's message, at most 300 characters."""
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:300]
