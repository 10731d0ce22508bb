"""The records commands take: the options the CLI reads itself, each declared once with its
default and help, and Request's parts (the computation's options, declared on Request)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Concatenate

from attncli.cli.groups import Group
from attncli.cli.output import P, Page, R, check_outputs, deliver, is_page
from attncli.cli.requests import read_source, request_of
from attncli.core.display import (
    Display,
    Lang,
    Scale,
    View,
    Window,
    display_of,
    parse_stages,
    parse_windows,
)
from attncli.core.request import Device, Measure, Pool, Request
from attncli.core.result import STAGES
from attncli.core.sizes import Impl
from attncli.core.variants import Variant
from attncli.opt import of, opt

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

    from attncli.core.compare import Shared
    from attncli.core.inputs import InputVectors
    from attncli.core.result import Result

__all__ = ["Device", "Impl", "Lang", "Measure", "Pool", "Scale", "Variant", "View", "request_of"]


# The groups: the options the CLI reads itself (the input, the display, the output) are marked
# here; those of the computation are Request's own fields (core/request.py), carried by `of`.
@dataclass(frozen=True)
class Source(Group):
    """The text (TEXT, '-', --file, piped stdin) or --inputs vectors to run on."""

    panel = "Input"
    text: str | None = opt(None, help="The text to inspect; '-' reads standard input (as does no "
                           "TEXT with a pipe).", metavar="TEXT", show_default=False, argument=True)
    # Input paths stay strings as typed: pathlib reads "./-" as "-", and only a bare "-" is stdin.
    file: str | None = opt(None, "--file", "-f", help="Read the text from this UTF-8 file ('-': "
                           "standard input; a file named - is ./-).", show_default=False,
                           metavar="PATH")
    inputs: str | None = opt(None, help='JSON vectors instead of text: [[...], ...] or {"tokens": '
                             '[...], "vectors": [...]} (\'-\': standard input; a file named - is '
                             "./-).", show_default=False, metavar="PATH")

    def read(self, settle: bool = True) -> tuple[str | None, InputVectors | None]:
        """The input, read and checked (see cli.requests.read_source)."""
        return read_source(self.text, self.file, self.inputs, settle)


@dataclass(frozen=True)
class Encoding:
    """How text becomes tokens."""

    encoding: str = of(Request, "encoding")
    allow_special: bool = of(Request, "allow_special")


@dataclass(frozen=True)
class Checkpoint:
    """A trained checkpoint instead of a chapter-3 variant."""

    model: str | None = of(Request, "model")
    layer: int | None = of(Request, "layer")
    predict: int | None = of(Request, "predict")


@dataclass(frozen=True)
class Chapter3:
    """The seeded chapter-3 variant: its embeddings and weights."""

    variant: Variant | None = of(Request, "variant")
    seed: int = of(Request, "seed")
    emb_dim: int = of(Request, "emb_dim")
    positions: bool = of(Request, "positions")
    context_length: int | None = of(Request, "context_length")
    d_out: int | None = of(Request, "d_out")
    heads: int | None = of(Request, "heads")
    dropout: float = of(Request, "dropout")
    qkv_bias: bool = of(Request, "qkv_bias")

    def shared(self) -> Shared:
        """--d-out, --num-heads and --dropout, for each of several variants that has them."""
        from attncli.core.compare import Shared

        return Shared(d_out=self.d_out, heads=self.heads, dropout=self.dropout)


@dataclass(frozen=True)
class Compute:
    """Where and how attention is computed, and what its matrix measures."""

    device: Device = of(Request, "device")
    impl: Impl = of(Request, "impl")
    top_k: int | None = of(Request, "top_k")
    pool: Pool | None = of(Request, "pool")
    full: bool = of(Request, "full")
    measure: Measure = of(Request, "measure")


@dataclass(frozen=True)
class Look(Group):
    """What of the result is shown, and how."""

    panel = "Display"
    head: int | None = opt(None, help="Show only this head (0-based) [default: all].",
                           show_default=False)
    precision: int = opt(4, min=0, max=8, help="Decimals shown in tables.")
    show: str | None = opt(None, help="Stages to show, comma-separated, from: inputs, queries, "
                           "keys, values, scores, scaled, masked, softmax, dropped, weights, "
                           "heads_context, context. With --json, adds them under \"stages\".",
                           show_default=False, metavar="STAGES")
    query: str | None = opt(None, help="One query's view: the keys it attends to, ranked by "
                            "weight. An index, or a token's text when unique (its leading space "
                            "optional).", show_default=False, metavar="I")
    # --draw was --view, which generate's ranking of the prompt tokens means
    draw: View = opt(View.auto, "--draw", help="table: numbers; heatmap: coloured blocks (shades "
                     "without colour); auto: numbers when they fit the terminal.", alias="--view")
    rows: str | None = opt(None, help="Show only these token rows: a:b, half-open and 0-based "
                           "like a Python slice (10:20, 5:, :3, -4:). Naive path: JSON stays "
                           "whole and gains \"window\"; tiled path: its weights are those of the "
                           "window, computed exactly.", show_default=False, metavar="A:B")
    cols: str | None = opt(None, help="Show only these key columns of the token × token "
                           "matrices (scores, weights, ...): c:d.", show_default=False,
                           metavar="C:D")
    scale: Scale = opt(Scale.shared, help="Colour range: shared (one range for every table of a "
                       "quantity, so heads compare), table (each table its own), unit (weights "
                       "on a fixed 0-1).")
    lang: Lang | None = opt(None, help="Language of the titles and explanations [default: zh "
                            "when LC_ALL/LANG is Chinese, else en].", show_default=False)

    def windows(self) -> tuple[Window | None, Window | None]:
        """--rows and --cols, parsed."""
        return parse_windows(self.rows, self.cols)

    def stages(self) -> tuple[str, ...] | None:
        """--show's stages, parsed (None: not given)."""
        return parse_stages(self.show, STAGES)

    def language(self) -> str:
        """--lang, or the environment's language."""
        from attncli.i18n import resolve_lang

        return resolve_lang(self.lang and self.lang.value, os.environ)

    def display(self, result: Result, windows: tuple[Window | None, Window | None],
                stages: tuple[str, ...] | None = None, lang: str = "en") -> Display:
        """The display record of result."""
        return display_of(result, self.precision, self.draw, *windows, stages, lang, self.scale)


@dataclass(frozen=True)
class Output(Group):
    """Where the output goes: tables or JSON on stdout, and files beside."""

    panel = "Output"
    needs = {"open_page": "save"}
    as_json: bool = opt(False, "--json", help="Print strict JSON instead of tables.")
    save: Path | None = opt(None, help="Also write the rendered output, in colour, to FILE: .svg, "
                            ".html or .txt.", show_default=False, metavar="FILE")
    save_json: Path | None = opt(None, help="Also write the JSON to FILE.", show_default=False,
                                 metavar="FILE")
    open_page: bool = opt(False, "--open", help="Open the file --save wrote in the web browser "
                          "($BROWSER, else the system's).")

    def check(self) -> None:
        """Refuse unwritable --save/--save-json, or --open without --save, before any work."""
        check_outputs(self.save, self.save_json, self.open_page)

    def page(self) -> bool:
        """Whether --save names the interactive page (.html or .htm, not .term.html)."""
        return is_page(self.save)

    def writes_json(self) -> bool:
        """Whether the JSON is written: --json, --save-json, or the page (--save x.html)."""
        return self.as_json or self.save_json is not None or self.page()

    def deliver(self, doc: Any, build: Page, extra: dict[str, Any] | None = None) -> None:
        """JSON or tables on stdout, and the files asked for."""
        deliver(doc, build, self.as_json, self.save, self.save_json, extra, self.open_page)

    def deliver_result(self, result: R,
                       render: Callable[Concatenate[Console, R, P], RenderableType],
                       *args: P.args, **kwargs: P.kwargs) -> None:
        """result's to_dict() or render(console, result, *args, **kwargs), as deliver writes."""
        self.deliver(result.to_dict(), lambda out: render(out, result, *args, **kwargs))

