"""A scan's output folder: Parquet parts written whole or not at all, and read back to resume.

    OUT/scan.json                      what was scanned and how (a resumed scan must match)
    OUT/heads/part-00000.parquet       one row per document × layer × head
    OUT/documents/part-00000.parquet   one row per document: status, reason, tokens
    OUT/set-aside/                     damaged parts a resumed scan found (damage.py)

Each file is written under a temporary name and renamed, heads first: a part counts once its
documents file exists, so a scan killed at any moment leaves complete parts and debris that
the next run clears (temporary files, a heads file whose documents file was never renamed).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from attncli.errors import WRITE_ERRNOS, AttnCliError
from attncli.scan.corpus import system_dir
from attncli.scan.damage import set_aside, table_folders, trusted_parts
from attncli.scan.parts import TABLES, documents_schema, heads_schema, part_name, parts
from attncli.scan.worker import columns


def check_out(out: Path) -> None:
    """--out a folder, or a path where one can be made: a dangling link, a file, a FIFO, a
    device or a place under /dev, /proc or /sys refused in one line, before any work."""
    shown = str(out)
    for name in (os.path.abspath(out), os.path.realpath(out)):
        if (top := system_dir(name)) is not None:
            raise AttnCliError(f"--out {shown} lies under {top}, where no scan is written")
    try:
        node = os.stat(out)
    except FileNotFoundError:
        if os.path.islink(out):
            raise AttnCliError(f"--out {shown} is a link to {os.readlink(out)}, which does "
                               "not exist: give the folder itself, or make it first") from None
        return
    except OSError as err:  # a name too long, a loop of links, a component that is a file
        raise AttnCliError(f"--out {shown}: {err.strerror}") from None
    if not stat.S_ISDIR(node.st_mode):
        kind = "a file" if stat.S_ISREG(node.st_mode) else "a FIFO, socket or device"
        raise AttnCliError(f"--out {shown} is {kind}, not a folder")


SETTINGS_KIND = "scan_settings"  # scan.json's "kind", as every JSON attncli writes has one


def _settings(held: dict[str, Any]) -> dict[str, Any]:
    """scan.json's settings without its kind, the model as held_model holds it; one written
    before it had one held the corpus's kind (.txt, folder, ...) under "kind", now
    "corpus_kind"."""
    held = dict(held)
    kind = held.pop("kind", None)
    if kind != SETTINGS_KIND and kind is not None:
        held["corpus_kind"] = kind
    if isinstance(held.get("model"), str):
        held["model"] = held_model(held["model"])
    return held


def held_model(model: str) -> str:
    """--model as a scan holds it: a path that exists here resolved, so the same checkpoint
    named from another folder or through a link resumes the scan; a store's name as given."""
    return str(Path(model).resolve()) if os.path.exists(model) else model


class ScanStore:
    """The output folder of one scan, opened for writing (and resuming): its trusted parts
    (each document with the number of its part), and the parts it set aside, with why."""

    def __init__(self, out: Path, identity: dict[str, Any], layers: int, heads: int,
                 effect: bool = False) -> None:
        self.out, self.effect = out, effect  # effect: the heads table has the effect column
        identity = _settings(identity)
        check_out(out)
        try:
            self._open(identity)
            self.set_aside = [f"{table}: not a folder" for table in table_folders(out)]
            for table in TABLES:
                (out / table).mkdir(exist_ok=True)
            self._clear_debris()
            self.owner, damaged = trusted_parts(out, layers, heads, effect)
        except OSError as err:
            raise AttnCliError(f"--out {out}: {err.strerror or err}"
                               f"{f' ({err.filename})' if err.filename else ''}") from None
        self.set_aside += damaged
        self.next_part = max(parts(out / "documents"), default=-1) + 1

    def _open(self, identity: dict[str, Any]) -> None:
        """The folder's scan.json checked against identity, or written into a new folder."""
        out, manifest = self.out, self.out / "scan.json"
        if manifest.is_file():
            try:
                held = json.loads(manifest.read_text(encoding="utf-8"))
            except (OSError, ValueError) as err:
                raise AttnCliError(f"--out {out}: cannot read scan.json ({err})") from None
            except RecursionError:
                raise AttnCliError(f"--out {out}: cannot read scan.json (nested too "
                                   "deeply)") from None
            if not isinstance(held, dict):
                raise AttnCliError(f"--out {out}: scan.json holds no scan's settings")
            rewrite = held.get("kind") != SETTINGS_KIND or \
                held.get("model") != identity.get("model")  # written before: as given
            held = _settings(held)
            if held != identity:
                changed = sorted(k for k in identity.keys() | held.keys()
                                 if identity.get(k) != held.get(k))
                raise AttnCliError(f"--out {out} holds a scan with other settings "
                                   f"({', '.join(changed)}); give a new --out to start another")
            if rewrite:  # as this version writes it: its kind said, its model resolved
                self._write_settings(manifest, identity)
        elif out.exists() and any(out.iterdir()):
            raise AttnCliError(f"--out {out} is not empty and holds no scan.json: give a new "
                               "or empty folder")
        else:  # the manifest first: a folder holding it is this scan's, whatever else is there
            out.mkdir(parents=True, exist_ok=True)
            self._write_settings(manifest, identity)

    @staticmethod
    def _write_settings(manifest: Path, identity: dict[str, Any]) -> None:
        """scan.json: the scan's settings, under its kind."""
        write_atomic(manifest, lambda path: path.write_text(
            json.dumps({"kind": SETTINGS_KIND, **identity}, indent=1) + "\n", encoding="utf-8"))

    def _clear_debris(self) -> None:
        """Temporary files, and heads parts without their documents part, removed (a folder
        in a heads part's place, set aside)."""
        committed = parts(self.out / "documents")
        for table in TABLES:
            for name in os.listdir(self.out / table):
                if name.startswith(".") and name.endswith(".tmp"):
                    (self.out / table / name).unlink(missing_ok=True)
        for number, path in parts(self.out / "heads").items():
            if number in committed:
                continue
            if path.is_dir() and not path.is_symlink():
                set_aside(self.out, path, f"heads-{path.name}")
            else:
                path.unlink(missing_ok=True)

    def done(self) -> set[str]:
        """The ids of the documents the trusted parts hold."""
        return set(self.owner)

    def write(self, scored: list[dict[str, Any]]) -> None:
        """One part: scored's rows, then its documents; committed by the second rename."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        if not scored:
            return
        name = part_name(self.next_part)
        heads = pa.table({column: [v for s in scored for v in s["rows"][column]]
                          for column in columns(self.effect)}, schema=heads_schema(self.effect))
        docs = pa.table({"document": [s["document"] for s in scored],
                         "status": [s["status"] for s in scored],
                         "reason": [s["reason"] for s in scored],
                         "tokens": [s["tokens"] for s in scored]}, schema=documents_schema())
        for table, folder in ((heads, "heads"), (docs, "documents")):
            target = self.out / folder / name
            try:
                write_atomic(target, lambda path, table=table: pq.write_table(table, path))
            except OSError as err:  # a full disk, a folder taken away: the parts before stand
                raise _unwritten(target, err) from None
        self.next_part += 1


def write_summary(out: Path, summary: dict[str, Any]) -> None:
    """OUT/summary.json, whole or not at all; one that cannot be written is one line."""
    target = out / "summary.json"
    try:
        write_atomic(target, lambda path: path.write_text(
            json.dumps(summary, allow_nan=False) + "\n", encoding="utf-8"))
    except OSError as err:  # a folder in its place, a full disk: the parts stand
        raise _unwritten(target, err) from None


def _unwritten(path: Path, err: OSError) -> AttnCliError:
    """The one line for a part that could not be written: exit 1 where the write itself
    failed (a full disk), as for --save-json; 2 where the folder cannot take it."""
    full = err.errno in WRITE_ERRNOS
    reason = os.strerror(err.errno) if full and err.errno is not None else err.strerror or err
    error = AttnCliError(f"{'write error:' if full else 'cannot write'} {path}: {reason}; the "
                         "parts before it are kept, and the same command resumes")
    if full:
        error.exit_code = 1
    return error


def write_atomic(path: Path, write: Any) -> None:
    """write(temporary path), then the rename that makes path appear whole."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write(temp)
        os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)
