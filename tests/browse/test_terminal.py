"""`attncli browse` on a real terminal (a pseudo-terminal): a byte that is not UTF-8 among the
keys (a Meta key sent as 8 bits, line noise) is dropped, and the keys after it still work;
Textual's own driver decoded strictly, so one 0xff ended its input thread with a traceback
drawn over the screen and browse with exit 0."""

from __future__ import annotations

import os
import pty
import select
import sys
import time

from tests.conftest import ROOT, SENTENCE

TIMEOUT_S = 300  # a hang guard only


def _read(fd: int, until: float, seen: bytes = b"") -> bytes:
    """What the terminal shows until the deadline, or until seen appears in it."""
    out = b""
    while time.monotonic() < until and (not seen or seen not in out):
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                out += os.read(fd, 65536)
            except OSError:  # the child has gone: the terminal is closed
                break
    return out


def test_a_byte_that_is_not_utf8_is_dropped_and_q_still_quits() -> None:
    pid, fd = pty.fork()
    if pid == 0:  # the child: browse on the pseudo-terminal
        os.chdir(ROOT)
        os.environ.update(TERM="xterm-256color", COLUMNS="100", LINES="30")
        os.execv(sys.executable, [sys.executable, "-m", "attncli", "browse", SENTENCE])
    status = None
    try:
        shown = _read(fd, time.monotonic() + TIMEOUT_S, b"save")  # the key bar's last word
        assert b"save" in shown
        os.write(fd, b"\xff\xfe")
        after = _read(fd, time.monotonic() + 2)
        os.write(fd, b"q")
        after += _read(fd, time.monotonic() + 30)
        for _ in range(TIMEOUT_S * 10):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            status = None
            time.sleep(0.1)
    finally:
        if status is None:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        os.close(fd)
    assert status is not None, "browse did not quit on q after a byte that is not UTF-8"
    assert b"UnicodeDecodeError" not in after and b"Traceback" not in after
    assert os.waitstatus_to_exitcode(status) == 0
