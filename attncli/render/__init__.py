"""Renderers: Rich renderables and JSON text built from a Result, never from tensors."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any


def to_json(data: Any) -> str:
    """Strict JSON (no NaN or Infinity), one document with a trailing newline."""
    return json.dumps(data, allow_nan=False, ensure_ascii=False) + "\n"


def json_chunks(data: Any) -> Iterator[str]:
    """to_json(data) in pieces, a list of lists one row at a time: no copy of the whole text."""
    yield from _chunks(data)
    yield "\n"


def _chunks(value: Any) -> Iterator[str]:
    if isinstance(value, dict) and value:
        opening = "{"
        for key, item in value.items():
            yield opening + json.dumps(key, ensure_ascii=False) + ": "
            yield from _chunks(item)
            opening = ", "
        yield "}"
    elif isinstance(value, list) and value and isinstance(value[0], (list, dict)):
        opening = "["
        for item in value:
            yield opening
            yield from _chunks(item)
            opening = ", "
        yield "]"
    else:
        yield json.dumps(value, allow_nan=False, ensure_ascii=False)
