"""--save page.html: one self-contained interactive page, no script, style or font from outside.

The page holds the command's --json document in <script type="application/json"
id="attncli-data">, render-only extras (heads' thumbnails, a long run's pooled maps) in
#attncli-extra, and the plain JavaScript and CSS of render/assets/, written for attncli.
"""

from __future__ import annotations

import html
from collections.abc import Iterator
from importlib import resources
from typing import Any

from attncli.render.jsonout import json_pieces

BAND_WIDTH = 64  # the moving window's side: long.band holds each row's keys around it
# One script, in this order.
ASSETS = ("page.js", "page-long.js", "page-heads.js", "page-lessons.js", "page-generate.js",
          "page-causal.js")
# Only inline script and style, and nothing from the network, whatever a token's text holds.
POLICY = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
          "img-src data:")


def asset(name: str) -> str:
    """The text of one of the page's files, shipped as package data."""
    return resources.files("attncli.render").joinpath("assets", name).read_text("utf-8")


def script_safe(chunk: str) -> str:
    """JSON text that cannot end its <script> element: '</' and '<!--' escaped, still JSON."""
    return chunk.replace("</", "<\\/").replace("<!--", "<\\u0021--")


def render_page(doc: dict[str, Any], title: str = "attncli",
                extra: dict[str, Any] | None = None) -> Iterator[str]:
    """The page's HTML, in pieces (a long run's JSON is written a row at a time)."""
    yield ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
           f"<meta http-equiv=\"Content-Security-Policy\" content=\"{POLICY}\">\n"
           f"<title>{html.escape(title)}</title>\n<style>\n{asset('page.css')}</style>\n"
           "</head>\n<body>\n<h1 id=\"attncli-title\">attncli</h1>\n"
           "<noscript>This page needs JavaScript; the data is in the attncli-data "
           "element.</noscript>\n<div id=\"attncli-controls\"></div>\n"
           "<div id=\"attncli-tokens\" aria-label=\"tokens\"></div>\n<div class=\"layout\">\n"
           "<div id=\"attncli-maps\"></div>\n<div id=\"attncli-focus\" aria-live=\"polite\">"
           "</div>\n<div id=\"attncli-lines\"></div>\n</div>\n<div id=\"attncli-extras\"></div>\n"
           "<div id=\"attncli-tooltip\" hidden></div>\n"
           "<script type=\"application/json\" id=\"attncli-data\">")
    for piece in json_pieces(doc):
        yield script_safe(piece.decode())
    yield "</script>\n<script type=\"application/json\" id=\"attncli-extra\">"
    for piece in json_pieces(extra or {}):
        yield script_safe(piece.decode())
    code = "".join(asset(name) for name in ASSETS)
    yield f"</script>\n<script>\n\"use strict\";\n(() => {{\n{code}main();\n}})();\n</script>\n" \
        "</body>\n</html>\n"


def page_extra(result: object) -> dict[str, Any]:
    """What the page draws beyond the JSON: heads' thumbnails (and exact weights when small),
    a long run's pooled maps and the weights near its diagonal, for the moving window."""
    from attncli.core.result import Result
    from attncli.records.heads import HeadsResult

    if isinstance(result, HeadsResult):
        out: dict[str, Any] = {"thumbnails": result.thumbnails}
        if result.weights is not None:
            out["weights"] = result.weights
        return out
    if isinstance(result, Result) and result.long is not None:
        long = result.long
        out = {"pooled": [{"head": m.head, "edges": m.edges, "values": m.values}
                          for m in long.maps]}
        if long.band is not None:
            out["band"] = {"heads": [m.head for m in long.maps] or list(range(len(long.band))),
                           "width": BAND_WIDTH, "values": long.band}
        return out
    return {}
