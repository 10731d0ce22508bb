"""Renderers: Rich renderables and JSON text built from a Result, never from tensors."""

from __future__ import annotations

import json
from typing import Any


def to_json(data: Any) -> str:
    """Strict JSON (no NaN or Infinity), one document with a trailing newline."""
    return json.dumps(data, allow_nan=False, ensure_ascii=False) + "\n"
