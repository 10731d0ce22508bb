"""Red team, files: an interrupted write leaves whole targets or none, and devices and FIFOs
named by --save/--save-json stay what they are and receive the data. (Signals at every phase of
a run: tests/cli/test_signals.py.)"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import threading
import tty
from collections.abc import Iterator
from pathlib import Path

import pytest

from attncli.cli.export import write_atomic
from attncli.errors import AttnCliError
from tests.redteam.test_redteam import ATTNCLI, limit_memory


def _pieces(stop_after: int, error: BaseException) -> Iterator[str]:
    for k in range(stop_after):
        yield f"piece {k}\n"
    raise error


@pytest.mark.parametrize("error", [KeyboardInterrupt(), SystemExit(1), ValueError("bug")])
def test_an_interrupted_write_leaves_the_old_file_and_no_temporary(
        tmp_path: Path, error: BaseException) -> None:
    target = tmp_path / "o.json"
    target.write_text("old")
    with pytest.raises(type(error)):
        write_atomic(target, _pieces(1000, error), "--save-json")
    assert os.listdir(tmp_path) == ["o.json"] and target.read_text() == "old"


def test_a_lone_surrogate_is_replaced_not_fatal(tmp_path: Path) -> None:
    target = tmp_path / "o.txt"
    write_atomic(target, "a\ud800b", "--save")
    assert target.read_text() == "a?b" and os.listdir(tmp_path) == ["o.txt"]


def test_a_link_is_followed_and_stays_a_link(tmp_path: Path) -> None:
    (tmp_path / "real.json").write_text("old")
    (tmp_path / "link.json").symlink_to("real.json")
    write_atomic(tmp_path / "link.json", "new", "--save-json")
    assert (tmp_path / "link.json").is_symlink()
    assert (tmp_path / "real.json").read_text() == "new"
    assert sorted(os.listdir(tmp_path)) == ["link.json", "real.json"]


def test_a_character_device_stays_a_device(tmp_path: Path) -> None:
    node = tmp_path / "null"
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # /dev/null's numbers
    except PermissionError:
        pytest.skip("mknod needs root")
    link = tmp_path / "link"
    link.symlink_to(node)
    for path in (node, link):
        write_atomic(path, "into the device", "--save-json")
    assert stat.S_ISCHR(os.stat(node).st_mode) and link.is_symlink()
    assert sorted(os.listdir(tmp_path)) == ["link", "null"]


def _run_saving_to(path: Path, *options: str) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "100"}
    return subprocess.run([str(ATTNCLI), "run", "x", *options, str(path)], capture_output=True,
                          env=env, timeout=600, preexec_fn=limit_memory)


@pytest.mark.parametrize("option", ["--save-json", "--save"])
def test_a_fifo_stays_a_fifo_and_receives_the_data(tmp_path: Path, option: str) -> None:
    fifo = tmp_path / ("pipe.txt" if option == "--save" else "pipe")
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    proc = _run_saving_to(fifo, option)
    reader.join(600)
    assert proc.returncode == 0, proc.stderr
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    data = received[0].decode()
    if option == "--save-json":
        assert json.loads(data)["variant"] == "causal"
    else:
        assert "Attention weights" in data
    assert os.listdir(tmp_path) == [fifo.name]


def test_the_cli_writes_into_a_device_that_receives_it(tmp_path: Path) -> None:
    """A link to a pseudo-terminal (a character device): what attncli writes reaches its master."""
    master, slave = os.openpty()
    tty.setraw(slave)  # no newline translation
    node = tmp_path / "tty"
    node.symlink_to(os.ttyname(slave))
    chunks: list[bytes] = []

    def drain() -> None:
        while not chunks or not chunks[-1].endswith(b"\n"):
            chunks.append(os.read(master, 65536))

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    proc = _run_saving_to(node, "--save-json")
    reader.join(600)
    assert stat.S_ISCHR(os.stat(node).st_mode) and node.is_symlink()
    os.close(slave)
    os.close(master)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(b"".join(chunks))["variant"] == "causal"
    assert os.listdir(tmp_path) == ["tty"]


def test_an_unwritable_device_is_refused_before_work(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root may write anything")
    with pytest.raises(AttnCliError, match="is not writable"):
        from attncli.cli.export import check_writable

        check_writable(Path("/dev/mem"), "--save-json")
