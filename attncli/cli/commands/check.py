"""`attncli check`."""

from __future__ import annotations

from typing import Annotated

import typer

from attncli.cli.groups import Fields, command
from attncli.cli.options import Look, Output
from attncli.cli.output import console, emit, emit_json


@command()
def check(
    target: Annotated[str, typer.Argument(
        help="Your class: FILE.py:Class, or FILE.py when it holds one nn.Module class.",
        metavar="FILE.py:Class", show_default=False)],
    output: Annotated[Output, Fields("as_json")],
    look: Annotated[Look, Fields("lang")],
    kind: Annotated[str | None, typer.Option(
        help="Which of the book's classes it is, when its constructor does not say: self_v1, "
        "self_v2, causal, multihead or wrapper (MultiHeadAttentionWrapper).",
        show_default=False)] = None,
) -> None:
    """Check your own chapter-3 attention class against the book's: PASS, or FAIL with the
    known mistake that explains the difference.

    THIS RUNS YOUR CODE: FILE.py is imported, and the class is constructed and called.

    The class is recognised from its constructor (SelfAttention_v1/v2(d_in, d_out),
    CausalAttention(d_in, d_out, context_length, dropout), MultiHeadAttention(d_in, d_out,
    context_length, dropout, num_heads), each with an optional qkv_bias; a class named
    MultiHeadAttentionWrapper is the book's wrapper of CausalAttention heads). The book's
    weights are copied into it, by the book's names or else by shape, and both run on the
    book's inputs and
    on random ones, batch sizes 1 and 2, dropout off, on (the same seed) and in eval mode.
    Exit 0: pass; 1: fail; 2: bad input (a file that does not import, no such class, a
    constructor that does not fit).

    Examples:

      attncli check my_attention.py:MultiHeadAttention

      attncli check ch03.py:CausalAttention --json | jq .diagnosis

      attncli check my_attention.py --lang zh
    """
    from attncli.checker.defaults import fork_guard
    from attncli.checker.kinds import kind_named
    from attncli.checker.load import guarded, load_target
    from attncli.checker.verdict import check_class
    from attncli.cli.streams import after_imports, was_interrupted
    from attncli.errors import AttnCliError
    from attncli.render.reports.check import render_check

    forced = kind_named(kind)
    after_imports()
    out = console()
    with fork_guard():  # until the report is printed, a child of theirs prints nothing
        try:
            with guarded(descriptors=True):  # what their code prints is not the report
                cls, name = load_target(target)
                report = check_class(cls, name, forced)
        except KeyboardInterrupt:
            if was_interrupted():
                raise
            # No Ctrl-C came: their code raised it, as it may raise SystemExit (typer made it a
            # silent exit 130).
            raise AttnCliError("your code raised KeyboardInterrupt (no Ctrl-C was pressed)"
                               ) from None
        doc = report.to_dict()
        if output.as_json:
            emit_json(doc)
        else:
            emit(out, render_check(doc, look.language()))
    if not report.passed:
        raise typer.Exit(1)
