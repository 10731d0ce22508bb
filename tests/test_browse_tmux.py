"""`attncli browse` in a real terminal (tmux): it starts full-screen, keys move the selected
head, and q gives the terminal back as it was (main screen, the earlier output, exit 0)."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator

import pytest

from tests.conftest import ROOT, SENTENCE

TMUX = shutil.which("tmux")
pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed (make test-deps)")


def _tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, timeout=60,
                          check=True).stdout


@pytest.fixture
def session() -> Iterator[str]:
    name = f"browse-{uuid.uuid4().hex[:8]}"
    command = (f"cd {shlex.quote(str(ROOT))} && echo BEFORE-BROWSE && "
               f"env -u NO_COLOR -u COLORTERM TERM=screen-256color {shlex.quote(sys.executable)} "
               f"-m attncli browse {shlex.quote(SENTENCE)}; echo EXIT=$?; sleep 600")
    _tmux("new-session", "-d", "-s", name, "-x", "100", "-y", "30", command)
    try:
        yield name
    finally:
        subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True, check=False)


def _wait(name: str, seen: Callable[[str], bool], what: str, seconds: float = 120) -> str:
    end = time.monotonic() + seconds
    pane = ""
    while time.monotonic() < end:
        pane = _tmux("capture-pane", "-p", "-t", name)
        if seen(pane):
            return pane
        time.sleep(0.2)
    raise AssertionError(f"{what} never showed; the pane:\n{pane}")


def test_keys_move_the_head_and_q_restores_the_terminal(session: str) -> None:
    _wait(session, lambda p: "chapter-3 attention on 6 tokens" in p and "simple · head 0" in p,
          "the overview")
    assert _tmux("display", "-p", "-t", session, "#{alternate_on}").strip() == "1"
    for key in ("Down", "Down", "Down"):
        _tmux("send-keys", "-t", session, key)
    _wait(session, lambda p: "multihead · head 0" in p, "multihead's head 0")
    _tmux("send-keys", "-t", session, "Right")
    _wait(session, lambda p: "multihead · head 1" in p, "the move to head 1")
    _tmux("send-keys", "-t", session, "Enter")
    _wait(session, lambda p: "attends most to:" in p, "the head view")
    _tmux("send-keys", "-t", session, "q")
    pane = _wait(session, lambda p: "EXIT=" in p, "the exit")
    assert "EXIT=0" in pane and "BEFORE-BROWSE" in pane
    assert "attends most to" not in pane  # the main screen is back, not the app's
    assert _tmux("display", "-p", "-t", session, "#{alternate_on}").strip() == "0"
    assert _tmux("display", "-p", "-t", session, "#{cursor_flag}").strip() == "1"
