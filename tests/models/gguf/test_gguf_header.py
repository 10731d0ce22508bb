"""The GGUF header read with bounded reads (models/sources/gguf/header.py): under an
address-space limit below the file's size, a valid model's header reads and the whole run works
(a mapping of the whole file was refused there), and the header equals gguf.GGUFReader's."""

from __future__ import annotations

import json
import os
import resource
import struct
import subprocess
import sys
from pathlib import Path

import gguf
import numpy as np
import pytest

from attncli.models.sources.gguf.header import CHUNK, read_header
from tests.gguf_fixtures import write_model

LIMIT = 4 * 2**30  # bytes of address space: torch and a tiny model's run fit well within
BIG = 6 * 2**30  # bytes of file: past the limit, and sparse (no disk is used for the hole)
TEXT = "the cat sat on the mat"
SPARSE = "zz.sparse.weight"  # a tensor no family reads, whose data are the file's hole


def _with_sparse_tensor(src: Path, dst: Path, size: int) -> None:
    """src with one more F32 tensor at the end of its table, whose data are a hole that makes
    the file about size bytes: every other byte is src's, its tensors' data at the same offsets."""
    reader = gguf.GGUFReader(str(src))
    fields = [f for name, f in reader.fields.items() if not name.startswith("GGUF.")]
    kvs = b"".join(b"".join(p.tobytes() for p in f.parts) for f in fields)
    infos = b"".join(b"".join(p.tobytes() for p in t.field.parts) for t in reader.tensors)
    data = src.read_bytes()[reader.data_offset:]
    offset = len(data) + -len(data) % reader.alignment  # the new tensor's, in the data region

    def head(count: int) -> bytes:  # its length does not depend on count
        name = SPARSE.encode()
        entry = struct.pack("<Q", len(name)) + name + struct.pack("<IQIQ", 1, count, 0, offset)
        counts = struct.pack("<IQQ", 3, len(reader.tensors) + 1, len(fields))  # version 3
        whole = b"GGUF" + counts + kvs + infos + entry
        return whole + b"\0" * (-len(whole) % reader.alignment)

    count = (size - len(head(0)) - offset) // 4
    with open(dst, "wb") as out:
        out.write(head(count) + data)
        out.truncate(len(head(count)) + offset + 4 * count)


@pytest.fixture(scope="module")
def big_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("big")
    write_model(folder / "tiny.gguf", "llama", gguf.GGMLQuantizationType.Q8_0, add_bos=True)
    _with_sparse_tensor(folder / "tiny.gguf", folder / "big.gguf", BIG)
    return folder / "big.gguf"


def test_the_sparse_file_is_a_valid_gguf_past_the_limit(big_gguf: Path) -> None:
    reader = gguf.GGUFReader(str(big_gguf))  # llama.cpp's own reader (it maps the file)
    sparse = next(t for t in reader.tensors if t.name == SPARSE)
    assert sparse.data_offset + sparse.n_bytes == big_gguf.stat().st_size > LIMIT
    assert big_gguf.stat().st_blocks * 512 < 2**20  # a hole: no disk


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))


def _run(*args: str, limited: bool) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "ATTNCLI_NO_CACHE": "1"}
    return subprocess.run([sys.executable, *args], capture_output=True, env=env, timeout=600,
                          check=False, preexec_fn=_limited if limited else None)


HEADER = """
import sys
from pathlib import Path
from attncli.models.sources.gguf.header import read_header
header = read_header(Path(sys.argv[1]))
print(len(header.tensors), header.size)
"""


def test_the_header_reads_under_an_address_space_limit_below_the_files_size(
        big_gguf: Path) -> None:
    done = _run("-c", HEADER, str(big_gguf), limited=True)
    assert done.returncode == 0, done.stderr
    count, size = map(int, done.stdout.split())
    assert size == big_gguf.stat().st_size > LIMIT
    assert count == len(gguf.GGUFReader(str(big_gguf)).tensors)


def test_a_run_reads_the_model_under_that_limit_as_without_it(big_gguf: Path) -> None:
    args = ("-m", "attncli", "run", TEXT, "--model", str(big_gguf), "--layer", "1", "--json")
    free, limited = _run(*args, limited=False), _run(*args, limited=True)
    assert free.returncode == 0, free.stderr
    assert limited.returncode == 0, limited.stderr
    assert json.loads(limited.stdout) == json.loads(free.stdout)


@pytest.mark.parametrize("chunk", [1, 7, 4096, CHUNK])
def test_the_header_equals_gguf_readers_whatever_the_read_size(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    from attncli.models.sources.gguf import header as module

    monkeypatch.setattr(module, "CHUNK", chunk)  # values across every window boundary
    path = tmp_path / "m.gguf"
    write_model(path, "llama", gguf.GGMLQuantizationType.Q8_0, add_bos=True)
    ours, reader = read_header(path), gguf.GGUFReader(str(path))
    assert {t.name: (int(t.data_offset), t.tensor_type) for t in reader.tensors} == {
        name: (info.start, info.qtype) for name, info in ours.tensors.items()}
    for name, field in reader.fields.items():
        if name.startswith("GGUF."):
            continue
        value = ours.metadata[name]
        if isinstance(value, np.ndarray):
            assert value.tolist() == field.contents()
        else:
            assert value == field.contents(), name


def test_a_file_that_shrinks_while_its_header_is_read_is_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from attncli.errors import AttnCliError
    from attncli.models.sources.gguf import header as module

    path = tmp_path / "m.gguf"
    write_model(path, "llama", gguf.GGMLQuantizationType.Q8_0, add_bos=True)
    monkeypatch.setattr(module, "CHUNK", 64)
    real = os.pread

    def shrinking(fd: int, count: int, offset: int) -> bytes:
        if offset > 0:
            os.truncate(path, 100)
        return real(fd, count, offset)

    monkeypatch.setattr(module.os, "pread", shrinking)
    with pytest.raises(AttnCliError, match=r"before the [\d,]+ bytes it held when opened"):
        read_header(path)


RACED = """
import pathlib, sys
from attncli.models.sources.gguf.header import read_header
pathlib.Path.exists = lambda self, **kw: False  # a FIFO put at the path after it was looked at
try:
    read_header(pathlib.Path(sys.argv[1]))
except Exception as err:
    print(err)
"""


def test_a_fifo_put_at_the_path_after_it_was_looked_at_is_not_waited_on(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    os.mkfifo(path)  # no writer: a blocking open would wait forever
    done = subprocess.run([sys.executable, "-c", RACED, str(path)], capture_output=True,
                          text=True, timeout=60, check=False)  # a wait is a timeout here
    assert done.stdout == f"{path} is not a regular file, so not a GGUF file\n", done.stderr
