"""A corpus as documents, each with a stable id, read without ever holding a huge one whole.

CORPUS is a folder (each regular file below it, in name order, is one document), a `.txt`
file (one document per line), a `.jsonl` file (one JSON object per line, the text in --field)
or a `.parquet` file (the text in the --field column). A document's id is where it sits:
`path` (relative to the folder), `name:line` (1-based) or `name:row` (0-based), so the same
command on the same corpus names the same documents. A path is stored as stored_name writes
it: any bytes a filesystem allows (not UTF-8, a newline, an ESC) give a UTF-8 id of their own,
and path_bytes gives the bytes back.

A document that cannot be read (not UTF-8, not JSON, no such field, longer than max_bytes
where it cannot be cut, not a regular file, a link to a kernel file) is yielded with its
problem, and the scan counts it as skipped; a corpus that cannot be read at all is an
AttnCliError.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from attncli.errors import AttnCliError

KINDS = ("folder", ".txt", ".jsonl", ".parquet")
SYSTEM_DIRS = ("/dev", "/proc", "/sys")  # the kernel's: no document is read, no scan written
CHUNK = 1 << 20  # a line longer than max_bytes is passed over in reads of this size
_STRAY = re.compile("[\udc80-\udcff]")  # what surrogateescape makes of a byte that is not UTF-8
_ESCAPE = re.compile(r"\\\\|\\x[0-9a-f]{2}")  # what stored_name writes for "\\" and such a byte


@dataclass(frozen=True)
class Document:
    """One document: its id, its text (None when it cannot be read) and why not, or whether
    only its first bytes were read."""

    id: str
    text: str | None
    problem: str | None = None
    cut_bytes: bool = False


def stored_name(path: str) -> str:
    """path's bytes as UTF-8 text, each byte that is not UTF-8 written \\xNN and each backslash
    doubled: every name a filesystem allows is stored, and no two names share one."""
    text = os.fsencode(path).decode("utf-8", "surrogateescape")  # a stray byte → U+DC80..DCFF
    if "\\" not in text and not _STRAY.search(text):
        return text  # the common case, as it is
    return _STRAY.sub(lambda m: f"\\x{ord(m.group()) - 0xDC00:02x}", text.replace("\\", "\\\\"))


def path_bytes(name: str) -> bytes:
    """The bytes of the path that stored_name wrote as name."""
    out, at = [], 0
    for m in _ESCAPE.finditer(name):
        out += [name[at:m.start()].encode(), b"\\" if m.group() == "\\\\"
                else bytes([int(m.group()[2:], 16)])]
        at = m.end()
    return b"".join([*out, name[at:].encode()])


def system_dir(path: str) -> str | None:
    """/dev, /proc or /sys when path lies under it: the kernel's files, whose regular ones are
    no documents (a process's environment, a log that reading consumes)."""
    return next((t for t in SYSTEM_DIRS if path == t or path.startswith(t + "/")), None)


def corpus_kind(path: Path) -> str:
    """Which of KINDS path is; anything else refused."""
    try:
        mode = path.stat().st_mode
    except OSError as err:
        raise AttnCliError(f"cannot read corpus {path}: {err.strerror or err}") from None
    if stat.S_ISDIR(mode):
        return "folder"
    if not stat.S_ISREG(mode):
        raise AttnCliError(f"corpus {path} is not a regular file or a folder")
    if path.suffix.lower() in KINDS:
        return path.suffix.lower()
    raise AttnCliError(f"corpus {path}: expected a folder, .txt, .jsonl or .parquet file "
                       f"(got {path.suffix or 'no suffix'})")


def documents(path: Path, field: str, max_bytes: int,
              skip: Path | None = None) -> Iterator[Document]:
    """Every document of the corpus at path, in a fixed order (a folder's skip subfolder, the
    scan's own output, left out)."""
    kind = corpus_kind(path)
    if kind == "folder":
        yield from _folder(path, max_bytes, skip)
    elif kind == ".parquet":
        yield from _parquet(path, field, max_bytes)
    else:
        with open(path, "rb") as file:
            for number, (raw, whole) in enumerate(_lines(file, max_bytes), start=1):
                doc_id = f"{stored_name(path.name)}:{number}"
                if kind == ".txt":
                    yield _decoded(doc_id, raw, whole)
                else:
                    yield _json_line(doc_id, raw, whole, field)


def _decoded(doc_id: str, raw: bytes, whole: bool) -> Document:
    """raw as UTF-8 text; a cut one loses the partial character its cut may end in."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        if whole or err.start < len(raw) - 3 or err.reason != "unexpected end of data":
            return Document(doc_id, None, f"not UTF-8 (byte {err.start})")
        text = raw[:err.start].decode("utf-8")
    return Document(doc_id, text, cut_bytes=not whole)


def _lines(file: IO[bytes], max_bytes: int) -> Iterator[tuple[bytes, bool]]:
    """Each line (no line end) of at most max_bytes, and whether it is whole; the rest of a
    longer line is read past in chunks, never held."""
    while True:
        line = file.readline(max_bytes + 1)
        if not line:
            return
        if line.endswith(b"\n") or len(line) <= max_bytes:
            yield line.rstrip(b"\r\n"), True
            continue
        while True:  # past the cap: skip to the line's end
            rest = file.readline(CHUNK)
            if not rest or rest.endswith(b"\n"):
                break
        yield line[:max_bytes], False


def _json_line(doc_id: str, raw: bytes, whole: bool, field: str) -> Document:
    """The field's text of one JSONL line; a line past max_bytes cannot be parsed, and is
    skipped."""
    if not whole:
        return Document(doc_id, None, "longer than the byte limit")
    if not raw.strip():
        return Document(doc_id, None, "empty line")
    try:
        record: Any = json.loads(raw)
    except UnicodeDecodeError as err:
        return Document(doc_id, None, f"not UTF-8 (byte {err.start})")
    except ValueError:
        return Document(doc_id, None, "not JSON")
    except RecursionError:  # nested deeper than Python's reader goes
        return Document(doc_id, None, "nested too deeply")
    if not isinstance(record, dict) or field not in record:
        return Document(doc_id, None, f"no field {field!r}")
    if not isinstance(record[field], str):
        return Document(doc_id, None, f"field {field!r} is not a string")
    return Document(doc_id, record[field])


def _walk(root: Path, skip: Path | None) -> Iterator[tuple[str, list[str], str | None]]:
    """os.walk's folders and file names below root, in name order, skip's folder left out; a
    folder that cannot be listed comes with why (and no names), and root's is an error."""
    left_out = skip.resolve() if skip is not None else None
    failed: list[OSError] = []  # os.walk's onerror: each folder it could not list

    def unlisted() -> Iterator[tuple[str, list[str], str | None]]:
        while failed:
            err = failed.pop(0)
            if err.filename is None or os.fspath(err.filename) == os.fspath(root):
                raise AttnCliError(f"cannot read corpus {root}: {err.strerror or err}")
            yield os.fspath(err.filename), [], err.strerror or type(err).__name__

    for dirpath, dirnames, filenames in os.walk(root, onerror=failed.append):
        yield from unlisted()
        dirnames[:] = sorted(d for d in dirnames if Path(dirpath, d).resolve() != left_out)
        yield dirpath, sorted(filenames), None
    yield from unlisted()


def _folder(root: Path, max_bytes: int, skip: Path | None) -> Iterator[Document]:
    """Each file below root in name order; a FIFO, socket or device is never opened."""
    found = 0
    for dirpath, filenames, unlisted in _walk(root, skip):
        if unlisted is not None:
            found += 1
            yield Document(stored_name(Path(dirpath).relative_to(root).as_posix()), None,
                           f"unreadable folder ({unlisted})")
        for name in filenames:
            path = Path(dirpath, name)
            doc_id = stored_name(path.relative_to(root).as_posix())
            found += 1
            try:
                mode = path.stat().st_mode
            except OSError as err:
                yield Document(doc_id, None, f"unreadable ({err.strerror})")
                continue
            if not stat.S_ISREG(mode):
                yield Document(doc_id, None, "not a regular file")
                continue
            if (top := system_dir(os.path.realpath(path))) is not None:
                yield Document(doc_id, None, f"a kernel file under {top}")
                continue
            try:  # O_NONBLOCK: a file swapped for a FIFO since the stat cannot block the scan
                fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
                with open(fd, "rb") as file:
                    if not stat.S_ISREG(os.fstat(fd).st_mode):
                        yield Document(doc_id, None, "not a regular file")
                        continue
                    raw = file.read(max_bytes + 1)
            except OSError as err:
                yield Document(doc_id, None, f"unreadable ({err.strerror})")
                continue
            yield _decoded(doc_id, raw[:max_bytes], len(raw) <= max_bytes)
    if found == 0:
        raise AttnCliError(f"corpus {root} holds no files")


def _parquet(path: Path, field: str, max_bytes: int) -> Iterator[Document]:
    """The field column of a Parquet file, a batch of rows at a time, each text cut at
    max_bytes as a file's is."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.ParquetFile(path)
    except (OSError, pa.ArrowException) as err:
        raise AttnCliError(f"cannot read {path} as Parquet: {err}") from None
    names = table.schema_arrow.names
    if field not in names:
        raise AttnCliError(f"{path.name} has no column {field!r} (columns: "
                           f"{', '.join(names[:8])}{', ...' if len(names) > 8 else ''}); "
                           "name the text column with --field")
    if not _is_text(table.schema_arrow.field(field).type):
        raise AttnCliError(f"{path.name}: column {field!r} is "
                           f"{table.schema_arrow.field(field).type}, not text")
    row, name = 0, stored_name(path.name)
    for batch in _batches_of(table, field, path):
        column = batch.column(0)
        if pa.types.is_dictionary(column.type):
            column = column.dictionary_decode()
        # As bytes: a writer that does not check UTF-8 leaves bytes Arrow will not decode
        for value in column.cast(pa.large_binary()).to_pylist():
            doc_id = f"{name}:{row}"
            row += 1
            yield (Document(doc_id, None, "null text") if value is None
                   else _decoded(doc_id, value[:max_bytes], len(value) <= max_bytes))


def _is_text(kind: Any) -> bool:
    """Whether a Parquet column of this Arrow type holds text: strings, large or not, or a
    dictionary of them (pandas' category, written as it is)."""
    import pyarrow as pa

    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind))


def _batches_of(table: Any, field: str, path: Path) -> Iterator[Any]:
    """table's field column a batch at a time; a part that cannot be read (corrupt pages) is
    one line naming the row it stopped at (the parts written before it stand)."""
    import pyarrow as pa

    batches, rows = table.iter_batches(batch_size=256, columns=[field]), 0
    while True:
        try:
            batch = next(batches, None)
        except (OSError, pa.ArrowException) as err:
            why = str(err).strip().rstrip(".") or type(err).__name__
            raise AttnCliError(f"cannot read {path} as Parquet past row {rows:,}: {why}; the "
                               "parts written before it are kept") from None
        if batch is None:
            return
        rows += batch.num_rows
        yield batch


def count_documents(path: Path, kind: str, skip: Path | None = None) -> int:
    """How many documents the corpus holds, for the progress bar (lines counted in chunks)."""
    if kind == "folder":
        return sum(len(files) + (unlisted is not None) for _, files, unlisted in _walk(path, skip))
    if kind == ".parquet":
        import pyarrow.parquet as pq

        return int(pq.ParquetFile(path).metadata.num_rows)
    count, last = 0, b"\n"
    with open(path, "rb") as file:
        while chunk := file.read(CHUNK):
            count, last = count + chunk.count(b"\n"), chunk[-1:]
    return count + (last != b"\n")
