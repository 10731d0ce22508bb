"""A scan's output folder: Parquet parts written whole or not at all, and read back to resume.

    OUT/scan.json                      what was scanned and how (a resumed scan must match)
    OUT/heads/part-00000.parquet       one row per document × layer × head
    OUT/documents/part-00000.parquet   one row per document: status, reason, tokens

Each file is written under a temporary name and renamed, heads first: a part counts once its
documents file exists, so a scan killed at any moment leaves complete parts and debris that
the next run clears (temporary files, a heads file whose documents file was never renamed).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from attncli.errors import AttnCliError
from attncli.scan.worker import COLUMNS

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


class ScanStore:
    """The output folder of one scan, opened for writing (and resuming)."""

    def __init__(self, out: Path, identity: dict[str, Any]) -> None:
        self.out = out
        manifest = out / "scan.json"
        if out.exists() and not out.is_dir():
            raise AttnCliError(f"--out {out} is a file, not a folder")
        if manifest.is_file():
            try:
                held = json.loads(manifest.read_text(encoding="utf-8"))
            except (OSError, ValueError) as err:
                raise AttnCliError(f"--out {out}: cannot read scan.json ({err})") from None
            except RecursionError:
                raise AttnCliError(f"--out {out}: cannot read scan.json (nested too "
                                   "deeply)") from None
            if held != identity:
                changed = sorted(k for k in identity.keys() | held.keys()
                                 if identity.get(k) != held.get(k))
                raise AttnCliError(f"--out {out} holds a scan with other settings "
                                   f"({', '.join(changed)}); give a new --out to start another")
        elif out.exists() and any(out.iterdir()):
            raise AttnCliError(f"--out {out} is not empty and holds no scan.json: give a new "
                               "or empty folder")
        else:  # the manifest first: a folder holding it is this scan's, whatever else is there
            out.mkdir(parents=True, exist_ok=True)
            write_atomic(manifest, lambda path: path.write_text(
                json.dumps(identity, indent=1) + "\n", encoding="utf-8"))
        for table in TABLES:
            (out / table).mkdir(exist_ok=True)
        self._clear_debris()

    def _clear_debris(self) -> None:
        """Temporary files, and heads parts without their documents part, removed."""
        committed = parts(self.out / "documents")
        for table in TABLES:
            for name in os.listdir(self.out / table):
                if name.startswith(".") and name.endswith(".tmp"):
                    (self.out / table / name).unlink(missing_ok=True)
        for number, path in parts(self.out / "heads").items():
            if number not in committed:
                path.unlink(missing_ok=True)
        self.next_part = max(committed, default=-1) + 1

    def done(self) -> set[str]:
        """The ids of the documents every committed part holds."""
        import pyarrow.parquet as pq

        seen: set[str] = set()
        for path in parts(self.out / "documents").values():
            seen.update(pq.read_table(path, columns=["document"]).column(0).to_pylist())
        return seen

    def write(self, scored: list[dict[str, Any]]) -> None:
        """One part: scored's rows, then its documents; committed by the second rename."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        if not scored:
            return
        name = part_name(self.next_part)
        heads = pa.table({column: [v for s in scored for v in s["rows"][column]]
                          for column in COLUMNS}, schema=heads_schema())
        docs = pa.table({"document": [s["document"] for s in scored],
                         "status": [s["status"] for s in scored],
                         "reason": [s["reason"] for s in scored],
                         "tokens": [s["tokens"] for s in scored]}, schema=documents_schema())
        write_atomic(self.out / "heads" / name, lambda path: pq.write_table(heads, path))
        write_atomic(self.out / "documents" / name, lambda path: pq.write_table(docs, path))
        self.next_part += 1


def heads_schema() -> Any:
    """The heads table's columns (built on use: pyarrow is imported lazily)."""
    import pyarrow as pa

    ints = {"layer", "head"}
    return pa.schema([("document", pa.string())]
                     + [(c, pa.int32() if c in ints else pa.float64()) for c in COLUMNS[1:]])


def documents_schema() -> Any:
    """The documents table's columns."""
    import pyarrow as pa

    return pa.schema([("document", pa.string()), ("status", pa.string()),
                      ("reason", pa.string()), ("tokens", pa.int64())])


def write_atomic(path: Path, write: Any) -> None:
    """write(temporary path), then the rename that makes path appear whole."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write(temp)
        os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)
