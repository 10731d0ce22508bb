"""Paragraphs that wrap well in Chinese too: Rich breaks lines only at spaces."""

from __future__ import annotations

import re

from rich.cells import cell_len
from rich.console import Console
from rich.text import Text

# A Latin word (with the spaces after it), or one wide character with any closing
# punctuation that must not start a line.
_CLOSING = "，。、：；！？）」』”"
_TOKEN = re.compile(rf"[^\s\u2e80-\uffef]+[{_CLOSING}]*\s*|[\u2e80-\uffef][{_CLOSING}]*\s*|\s+")


def _wide(text: str) -> bool:
    return any(cell_len(ch) == 2 for ch in text)


def prose(console: Console, text: str, style: str = "") -> Text:
    """text as a paragraph for console's width, broken between wide characters when needed."""
    if not _wide(text):
        return Text(text, style=style)
    lines, line = [], ""
    for token in _TOKEN.findall(text):
        if line and cell_len((line + token).rstrip()) > console.width:
            lines.append(line.rstrip())
            line = token.lstrip()
        else:
            line += token
    lines.append(line.rstrip())
    return Text("\n".join(lines), style=style)
