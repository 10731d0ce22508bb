"""`attncli compare`."""

from __future__ import annotations

from typing import Annotated

import typer

from attncli.cli.groups import Fields, command
from attncli.cli.options import Chapter3, Compute, Encoding, Look, Output, Source, Variant
from attncli.cli.requests import request_of
from attncli.core.display import parse_names


@command()
def compare(
    source: Source,
    encoding: Encoding,
    settings: Annotated[Chapter3, Fields("seed", "emb_dim", "positions", "context_length",
                                          "d_out", "heads", "dropout", "qkv_bias")],
    compute: Annotated[Compute, Fields("device", "impl")],
    look: Annotated[Look, Fields("precision", "draw", "rows", "cols", "scale")],
    output: Output,
    variants: Annotated[str, typer.Option(
        help="The variants to compare, comma-separated.")] = "simple,qkv,causal,multihead",
) -> None:
    """Compare the attention weights of several variants on the same tokens and embeddings.

    --num-heads applies to multihead, --dropout to causal and multihead, --d-out to all but
    simple.

    Examples:

      attncli compare "one two three four" --variants simple,causal,multihead

      attncli compare --inputs samples/journey.json --variants simple,qkv

      attncli compare "..." --draw heatmap --json | jq '.variants[].variant'
    """
    from attncli.core.compare import run_compare
    from attncli.render.compare import render_compare

    names = parse_names(variants, [v.value for v in Variant], "--variants")
    windows = look.windows()
    output.check()
    base = request_of(source.read(), encoding, settings, compute, d_out=None, heads=None,
                      dropout=0.0)
    results = run_compare(base, [Variant(name) for name in names], settings.shared(), *windows)
    display = look.display(results[0], windows)
    doc = {"kind": "compare", "variants": [result.to_dict() for result in results]}
    output.deliver(doc, lambda out: render_compare(out, results, display))
