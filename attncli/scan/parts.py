"""The files of a scan's output folder: the two tables' parts, by number, and their columns."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from attncli.scan.worker import columns

PART = re.compile(r"part-(\d{5,})\.parquet")
TABLES = ("heads", "documents")


def part_name(number: int) -> str:
    return f"part-{number:05d}.parquet"


def parts(folder: Path) -> dict[int, Path]:
    """The complete parts in folder by number (temporary files are not parts)."""
    if not folder.is_dir():
        return {}
    return {int(m.group(1)): folder / name for name in os.listdir(folder)
            if (m := PART.fullmatch(name))}


def heads_schema(effect: bool = False) -> Any:
    """The heads table's columns, the effect column with effect (built on use: pyarrow is
    imported lazily)."""
    import pyarrow as pa

    ints = {"layer", "head"}
    return pa.schema([("document", pa.string())] + [
        (c, pa.int32() if c in ints else pa.float64()) for c in columns(effect)[1:]])


def documents_schema() -> Any:
    """The documents table's columns."""
    import pyarrow as pa

    return pa.schema([("document", pa.string()), ("status", pa.string()),
                      ("reason", pa.string()), ("tokens", pa.int64())])
