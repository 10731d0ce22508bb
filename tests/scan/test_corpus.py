"""scan's corpus: a document's stored name round-trips any bytes a filesystem allows, names
two files apart, and is the same on every read, so a resumed scan knows what it has done."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from attncli.errors import AttnCliError
from attncli.scan.corpus import count_documents, documents, path_bytes, stored_name

# A file name as the kernel takes it: 1-255 bytes, neither "/" nor NUL, never "." or "..".
NAME_BYTES = st.binary(min_size=1, max_size=255).filter(
    lambda b: b"/" not in b and b"\0" not in b and b not in (b".", b".."))
HOSTILE = [b"caf\xe9", b"caf\xc3\xa9", b"new\nline", b"\x1b[31mred\x1b[0m", b"-rf", b"--out",
           b"back\\slash", b"back\\xe9", b"\\\xe9", b"\xff\xfe", b"x" * 255, b"\xed\xa0\x80"]


@given(st.lists(NAME_BYTES, min_size=1, max_size=4))
@example([b"caf\xe9", b"caf\\xe9"])  # a byte that is not UTF-8, and the text that spells it
@example([b"\\\\", b"\\"])
def test_a_stored_name_gives_its_bytes_back_and_no_two_share_one(parts: list[bytes]) -> None:
    path = os.fsdecode(b"/".join(parts))
    name = stored_name(path)
    name.encode("utf-8")  # a Parquet string: UTF-8, no lone surrogate
    assert path_bytes(name) == b"/".join(parts)
    other = os.fsdecode(b"/".join(parts) + b"\xe9")
    assert stored_name(other) != name


def test_a_utf8_name_without_a_backslash_is_stored_as_it_is() -> None:
    assert stored_name("notes/café ☕.txt") == "notes/café ☕.txt"
    assert stored_name(os.fsdecode(b"caf\xe9")) == "caf\\xe9"
    assert stored_name("a\\b") == "a\\\\b"


def _write_corpus(folder: Path, files: dict[bytes, bytes]) -> None:
    root = os.fsencode(folder)
    for name, content in files.items():
        with open(os.path.join(root, name), "wb") as file:
            file.write(content)


@pytest.mark.slow
@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(files=st.dictionaries(st.one_of(st.sampled_from(HOSTILE), NAME_BYTES),
                             st.binary(max_size=64), min_size=1, max_size=8))
def test_a_folder_of_any_names_and_bytes_reads_the_same_every_time(
        tmp_path_factory: pytest.TempPathFactory, files: dict[bytes, bytes]) -> None:
    folder = tmp_path_factory.mktemp("corpus")
    _write_corpus(folder, files)
    first = list(documents(folder, "text", 1024))
    again = list(documents(folder, "text", 1024))
    assert first == again  # the same ids, texts and problems, in the same order
    assert sorted(path_bytes(d.id) for d in first) == sorted(files)
    for doc in first:
        content = files[path_bytes(doc.id)]
        try:
            assert doc.text == content.decode("utf-8") and doc.problem is None
        except UnicodeDecodeError:
            assert doc.text is None and doc.problem is not None
            assert doc.problem.startswith("not UTF-8")


def test_lines_of_a_corpus_named_in_bytes_keep_its_stored_name(tmp_path: Path) -> None:
    corpus = os.path.join(os.fsencode(tmp_path), b"caf\xe9.txt")
    with open(corpus, "wb") as file:
        file.write(b"one line\nanother line\n")
    found = list(documents(Path(os.fsdecode(corpus)), "text", 1024))
    assert [d.id for d in found] == ["caf\\xe9.txt:1", "caf\\xe9.txt:2"]


@pytest.mark.parametrize("column", [
    lambda texts: pa.array(texts).dictionary_encode(),  # pandas' category, written as is
    lambda texts: pa.array(texts, pa.large_string()),
    lambda texts: pa.array(texts, pa.large_string()).dictionary_encode(),
])
def test_a_parquet_text_column_of_any_string_type_is_read(tmp_path: Path, column: Any) -> None:
    corpus = tmp_path / "shard.parquet"
    texts = ["the cat sat", None, "the cat sat", "a dog ran"]
    pq.write_table(pa.table({"body": column(texts)}), corpus)
    found = list(documents(corpus, "body", 1024))
    assert [(d.id, d.text) for d in found] == [(f"shard.parquet:{row}", text)
                                               for row, text in enumerate(texts)]
    assert found[1].problem == "null text"


@pytest.mark.parametrize("column, said", [
    (pa.array([1, 2]), "column 'body' is int64, not text"),
    (pa.array([b"x", b"y"]).dictionary_encode(), "column 'body' is dictionary<values=binary"),
    (pa.array([b"x", b"y"]), "column 'body' is binary, not text"),
])
def test_a_parquet_column_that_is_not_text_is_one_line(tmp_path: Path, column: Any,
                                                       said: str) -> None:
    corpus = tmp_path / "shard.parquet"
    pq.write_table(pa.table({"body": column}), corpus)
    with pytest.raises(AttnCliError, match=re.escape(said)):
        list(documents(corpus, "body", 1024))


def test_a_link_to_a_kernel_file_is_skipped_unread(tmp_path: Path) -> None:
    """/proc and /sys files stat as regular, but are the kernel's (a process's environment, a
    log that a read consumes): a corpus folder's link to one is skipped, never opened; a link
    to an ordinary file outside the folder is read."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "environ").symlink_to("/proc/self/environ")
    (corpus / "status").symlink_to("/proc/self/status")
    (tmp_path / "outside.txt").write_text("the cat sat", encoding="utf-8")
    (corpus / "outside").symlink_to(tmp_path / "outside.txt")
    found = {d.id: (d.text, d.problem) for d in documents(corpus, "text", 1024)}
    assert found == {"environ": (None, "a kernel file under /proc"),
                     "outside": ("the cat sat", None),
                     "status": (None, "a kernel file under /proc")}


def _unlistable(monkeypatch: pytest.MonkeyPatch, *folders: Path) -> None:
    """os.scandir refuses folders, as it does one without read permission to a user who is not
    root (a root test run would read a chmod 000 folder)."""
    real = os.scandir

    def scandir(path: Any = ".") -> Any:
        if Path(os.fsdecode(path)) in folders:
            raise PermissionError(13, "Permission denied", os.fsdecode(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)


def test_a_folder_that_cannot_be_listed_is_a_skipped_document(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A subfolder that cannot be listed is counted as skipped, saying why, not passed over
    unseen; a corpus folder that cannot be listed is one line."""
    corpus = tmp_path / "corpus"
    (corpus / "locked").mkdir(parents=True)
    (corpus / "locked" / "c").write_text("hidden text", encoding="utf-8")
    (corpus / "a").write_text("the cat sat", encoding="utf-8")
    (corpus / "z").write_text("a dog ran", encoding="utf-8")
    _unlistable(monkeypatch, corpus / "locked")
    found = [(d.id, d.text, d.problem) for d in documents(corpus, "text", 1024)]
    assert found == [("a", "the cat sat", None), ("z", "a dog ran", None),
                     ("locked", None, "unreadable folder (Permission denied)")]
    assert count_documents(corpus, "folder") == len(found)
    _unlistable(monkeypatch, corpus)
    with pytest.raises(AttnCliError, match=r"^cannot read corpus .*corpus: Permission denied$"):
        list(documents(corpus, "text", 1024))


def test_a_long_parquet_text_is_cut_at_the_byte_limit_as_a_file_is(tmp_path: Path) -> None:
    """A Parquet document past max_bytes is cut there and marked so, as a folder's file or a
    line is (--too-long cut then counts it as cut), never handed on whole: a 20 MB row was
    tokenized whole and skipped for its token records, 'split the text'."""
    corpus, folder = tmp_path / "shard.parquet", tmp_path / "folder"
    folder.mkdir()
    texts = ["short text", "é" * 40 + "x", "ab" * 20]  # 81 bytes, a character across byte 64
    pq.write_table(pa.table({"text": texts}), corpus)
    for k, text in enumerate(texts):
        (folder / f"{k}").write_text(text, encoding="utf-8")
    got = [(d.text, d.cut_bytes) for d in documents(corpus, "text", 64)]
    assert got == [(d.text, d.cut_bytes) for d in documents(folder, "text", 64)]
    assert got == [("short text", False), ("é" * 32, True), ("ab" * 20, False)]


def test_a_parquet_text_that_is_not_utf8_is_skipped_as_a_file_is(tmp_path: Path) -> None:
    """A string column whose writer did not check UTF-8 (Arrow's own reader raises on it) is
    read as bytes: such a row is skipped, "not UTF-8", and the others are read."""
    raw = pa.array([b"ok text", b"bad \xff\xfe text", None], pa.binary())
    unchecked = pa.Array.from_buffers(pa.string(), len(raw), raw.buffers(), raw.null_count)
    corpus = tmp_path / "shard.parquet"
    pq.write_table(pa.table({"text": unchecked}), corpus)
    got = [(d.id, d.text, d.problem) for d in documents(corpus, "text", 1024)]
    assert got == [("shard.parquet:0", "ok text", None),
                   ("shard.parquet:1", None, "not UTF-8 (byte 4)"),
                   ("shard.parquet:2", None, "null text")]


def test_a_parquet_file_corrupt_past_its_footer_is_one_line(tmp_path: Path) -> None:
    """Pages that cannot be read (bytes flipped mid-file, the footer whole) end the corpus in
    one line naming the row, after the rows before them; Arrow raised its own OSError."""
    corpus = tmp_path / "shard.parquet"
    pq.write_table(pa.table({"text": [f"the cat sat {k}" for k in range(4000)]}), corpus,
                   row_group_size=1000, compression="snappy")
    data = bytearray(corpus.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 200] = bytes(b ^ 0x5A for b in data[middle:middle + 200])
    corpus.write_bytes(bytes(data))
    read = []
    with pytest.raises(AttnCliError, match=r"^cannot read .*shard.parquet as Parquet past "
                                           r"row [0-9,]+: .*[^.]; the parts written before it "
                                           r"are kept$"):
        read.extend(documents(corpus, "text", 1024))
    assert [d.id for d in read] == [f"shard.parquet:{k}" for k in range(len(read))]
