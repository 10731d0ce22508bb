"""Which committed parts a resumed scan can trust. A part is its documents file and its heads
file; it is trusted when both are regular Parquet files that read whole, with their own
columns, and agree: the documents file names each document once, and no earlier part names it,
and the heads file holds one row for each layer × head of each document it scored, no more.

Any other part (truncated, garbage, a heads file copied over a documents file, a folder in a
file's place, a heads file deleted) is set aside: both its files are moved to `set-aside/` in
the output folder, kept for a look, and its documents are scanned again, so a summary never
counts a document whose rows are gone.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from attncli.scan.parts import TABLES, documents_schema, heads_schema, part_name, parts

SET_ASIDE = "set-aside"
STATUSES = frozenset(("scored", "cut", "skipped"))


def trusted_parts(out: Path, layers: int, heads: int,
                  effect: bool = False) -> tuple[dict[str, int], list[str]]:
    """Each document of a trusted part, with its part's number; and for each part set aside,
    its name and what was wrong with it (effect: the heads files have the effect column)."""
    owner: dict[str, int] = {}
    set_aside: list[str] = []
    for number, path in sorted(parts(out / "documents").items()):
        ids, problem = _documents(path, owner)
        if problem is None:
            problem = _heads(out / "heads" / part_name(number), ids, layers, heads, effect)
        if problem is not None:
            set_aside_part(out, number)
            set_aside.append(f"{part_name(number)}: {problem}")
            continue
        owner.update(dict.fromkeys((doc for doc, _ in ids), number))
    return owner, set_aside


def set_aside_part(out: Path, number: int) -> None:
    """Both files of part number moved to set-aside/ (whichever of them exist)."""
    for table in TABLES:
        path = out / table / part_name(number)
        if os.path.lexists(path):
            set_aside(out, path, f"{table}-{part_name(number)}")


def set_aside(out: Path, path: Path, name: str) -> None:
    """path moved into out's set-aside/ as name (name.1, name.2 … when taken)."""
    folder = out / SET_ASIDE
    folder.mkdir(exist_ok=True)
    target, k = folder / name, 0
    while os.path.lexists(target):
        k += 1
        target = folder / f"{name}.{k}"
    os.rename(path, target)


def _read(path: Path, schema: Any) -> tuple[Any, str | None]:
    """path's whole table, or what keeps it from being one with schema's columns."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not path.is_file():
        return None, "is not a file" if os.path.lexists(path) else "is missing"
    try:
        table = pq.read_table(path)  # every page decoded: a damaged one fails here
    except (OSError, ValueError, pa.ArrowException):
        return None, "is not a readable Parquet file"
    if not table.schema.equals(schema):
        names = table.schema.names
        return None, f"has other columns ({', '.join(names[:4])}{', ...' * (len(names) > 4)})"
    return table, None


def _documents(path: Path, owner: dict[str, int]
               ) -> tuple[list[tuple[str, bool]], str | None]:
    """Each document of a documents file and whether it was scored; or why the part is not
    trusted."""
    table, problem = _read(path, documents_schema())
    if problem is not None:
        return [], f"its documents file {problem}"
    ids, status = table.column("document").to_pylist(), table.column("status").to_pylist()
    if None in ids or len(set(ids)) != len(ids):
        return [], "its documents file names a document twice, or none"
    if not set(status) <= STATUSES or table.column("tokens").null_count:
        return [], "its documents file holds an unknown status or no token count"
    again = next((doc for doc in ids if doc in owner), None)
    if again is not None:
        return [], f"it repeats documents of {part_name(owner[again])}"
    return [(doc, s != "skipped") for doc, s in zip(ids, status, strict=True)], None


def _heads(path: Path, ids: list[tuple[str, bool]], layers: int, heads: int,
           effect: bool) -> str | None:
    """Why the heads file at path does not hold exactly a row per layer × head of each scored
    document of ids (None when it does)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    rows, problem = _read(path, heads_schema(effect))
    if problem is not None:
        return f"its heads file {problem}"
    scored = [doc for doc, was_scored in ids if was_scored]
    grid = layers * heads
    if rows.num_rows != len(scored) * grid:
        return (f"its heads file holds {rows.num_rows:,} rows, not {len(scored):,} documents × "
                f"{layers} layers × {heads} heads")
    if rows.num_rows == 0:
        return None
    if any(rows.column(name).null_count for name in ("document", "layer", "head")):
        return "its heads file has rows without a document, layer or head"
    index = pc.index_in(rows.column("document"), value_set=pa.array(scored, pa.string()))
    layer, head = (rows.column(name).to_numpy().astype(np.int64) for name in ("layer", "head"))
    if index.null_count or not (_within(layer, layers) and _within(head, heads)):
        return "its heads file has rows of other documents, layers or heads"
    key = index.to_numpy().astype(np.int64) * grid + layer * heads + head  # (rows,) one a cell
    if np.unique(key).size != key.size:
        return "its heads file repeats rows"
    return None


def _within(values: Any, size: int) -> bool:
    return bool(values.min() >= 0 and values.max() < size)


def table_folders(out: Path) -> Iterator[str]:
    """Each of out's table folders that something else (a file, a dangling link) stands in
    for, set aside so the folder can be made again."""
    for table in TABLES:
        path = out / table
        if os.path.lexists(path) and not path.is_dir():
            set_aside(out, path, table)
            yield table
