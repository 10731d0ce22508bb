"""Red team, files and signals: Ctrl-C at any moment leaves whole targets or none, and devices
and FIFOs named by --save/--save-json stay what they are and receive the data."""

from __future__ import annotations

import json
import math
import os
import signal
import stat
import subprocess
import threading
import time
import tty
from collections.abc import Iterator
from pathlib import Path

import pytest

from attncli.cli.export import write_atomic
from attncli.errors import AttnCliError
from tests.test_redteam import ATTNCLI, limit_memory

WORDS = 4000  # about 8,000 tokens: the tiled path, some seconds of work


def _long_run(cwd: Path) -> subprocess.Popen[bytes]:
    (cwd / "long.txt").write_text(" ".join(f"word{i % 500}" for i in range(WORDS)))
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "100"}
    return subprocess.Popen([str(ATTNCLI), "run", "--file", "long.txt", "--save-json", "o.json",
                             "--save", "o.html"], cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, preexec_fn=limit_memory)


def _check_outcome(cwd: Path, proc: subprocess.Popen[bytes]) -> None:
    """Exit 130 (or 0 when the work was already done), and only whole targets in cwd."""
    _, err = proc.communicate(timeout=300)
    assert proc.returncode in (0, 130), err
    assert b"Traceback" not in err
    assert err == (b"attncli: error: interrupted\n" if proc.returncode else b""), err
    left = set(os.listdir(cwd)) - {"long.txt"}
    assert left <= {"o.json", "o.html"}, left
    if "o.json" in left:
        assert json.loads((cwd / "o.json").read_text())["config"]["impl"] == "tiled"
    if "o.html" in left:
        assert (cwd / "o.html").read_text().rstrip().endswith("</html>")
    if proc.returncode == 0:
        assert left == {"o.json", "o.html"}


def _cpu_seconds(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat_file:
            fields = stat_file.read().rsplit(")", 1)[1].split()
    except OSError:
        return math.inf  # it has ended

    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


# Moments by CPU time used, which a loaded machine does not stretch: loading the CLI, importing
# torch, tokenising and computing. (Before the interpreter has run attncli's first line, Python
# itself reports the Ctrl-C.)
@pytest.mark.parametrize("cpu_s", [0.2, 0.6, 1.5, 4.0])
def test_ctrl_c_at_a_moment(tmp_path: Path, cpu_s: float) -> None:
    proc = _long_run(tmp_path)
    while proc.poll() is None and _cpu_seconds(proc.pid) < cpu_s:
        time.sleep(0.005)
    proc.send_signal(signal.SIGINT)
    _check_outcome(tmp_path, proc)


def test_ctrl_c_between_the_two_files(tmp_path: Path) -> None:
    proc = _long_run(tmp_path)
    deadline = time.monotonic() + 240
    while proc.poll() is None and time.monotonic() < deadline:
        if any(name.startswith(".attncli-") or name == "o.json" for name in os.listdir(tmp_path)):
            proc.send_signal(signal.SIGINT)  # while o.json is being written, or just after
            break
        time.sleep(0.002)
    _check_outcome(tmp_path, proc)


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
                          env=env, timeout=120, preexec_fn=limit_memory)


@pytest.mark.parametrize("option", ["--save-json", "--save"])
def test_a_fifo_stays_a_fifo_and_receives_the_data(tmp_path: Path, option: str) -> None:
    fifo = tmp_path / ("pipe.txt" if option == "--save" else "pipe")
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    proc = _run_saving_to(fifo, option)
    reader.join(60)
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
    reader.join(60)
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
