"""`attncli browse` in a real terminal (tmux): it starts full-screen, keys move the selected
head, and q gives the terminal back as it was (main screen, the earlier output, exit 0)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import ROOT, SENTENCE
from tests.readme_blocks import prose

TMUX = shutil.which("tmux")
pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed (make test-deps)")


def _tmux(*args: str) -> str:
    """tmux on a server of the session's own (its socket named as the session, no config
    file): never the user's, and never one another test's session ends while this one starts."""
    flags = dict(zip(args, args[1:], strict=False))
    socket = flags.get("-t") or flags["-s"]
    return subprocess.run(["tmux", "-L", socket, "-f", os.devnull, *args], capture_output=True,
                          text=True, timeout=60, check=True).stdout


@contextmanager
def browsing(*args: str, errors: str = "") -> Iterator[str]:
    """A tmux session running `attncli browse args` at 100 × 30 and 256 colours (errors: a
    redirection of its stderr)."""
    name = f"browse-{uuid.uuid4().hex[:8]}"
    command = (f"cd {shlex.quote(str(ROOT))} && echo BEFORE-BROWSE && "
               f"env -u NO_COLOR -u COLORTERM TERM=screen-256color {shlex.quote(sys.executable)} "
               f"-m attncli browse {shlex.join(args)} {errors}; echo EXIT=$?; sleep 600")
    _tmux("new-session", "-d", "-s", name, "-x", "100", "-y", "30", command)
    try:
        yield name
    finally:
        subprocess.run(["tmux", "-L", name, "kill-server"], capture_output=True, check=False)


@pytest.fixture
def session() -> Iterator[str]:
    with browsing(SENTENCE) as name:
        yield name


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


def test_heads_without_a_variant_give_multihead_its_heads() -> None:
    with browsing(SENTENCE, "--num-heads", "3", "--d-out", "6") as name:
        pane = _wait(name, lambda p: "chapter-3 attention on 6 tokens" in p, "the overview")
        assert "h2" in pane.splitlines()[1]  # multihead's third head has a column
        _tmux("send-keys", "-t", name, "q")
        assert "EXIT=0" in _wait(name, lambda p: "EXIT=" in p, "the exit")


def test_q_while_a_layer_is_computed_exits_at_once(tmp_path: Path) -> None:
    """A 20,000-token text on the real model: q during the first layer's pass exits now, not
    when the pass is done (more than a minute later here)."""
    from tests.gguf_fixtures import smollm2

    words = prose().split()
    text = tmp_path / "long.txt"
    text.write_text(" ".join(words[k * 7919 % len(words)] for k in range(11_000)))
    with browsing("--file", str(text), "--model", str(smollm2())) as name:
        _wait(name, lambda p: "computing…" in p, "the spinner")
        _tmux("send-keys", "-t", name, "q")
        pane = _wait(name, lambda p: "EXIT=" in p, "the exit", seconds=30)
        assert "EXIT=0" in pane


def test_a_lost_terminal_is_one_line(tmp_path: Path) -> None:
    """The pane closed under it (as an SSH connection dropped): the app ends, with no traceback
    (the output thread's failed writes were one) and at most the hang-up's one line (the input
    ending may close the app before SIGHUP arrives)."""
    err = tmp_path / "err.txt"
    marker = str(tmp_path / "saves")  # in the process's arguments: pgrep finds it by this
    with browsing(SENTENCE, "--save-dir", marker,
                  errors=f"2> {shlex.quote(str(err))}") as name:
        _wait(name, lambda p: "simple · head 0" in p, "the overview")
        _tmux("kill-session", "-t", name)
    end = time.monotonic() + 120
    while time.monotonic() < end and subprocess.run(["pgrep", "-f", marker],
                                                    capture_output=True).returncode == 0:
        time.sleep(0.2)
    assert subprocess.run(["pgrep", "-f", marker], capture_output=True).returncode == 1
    assert err.read_text() in ("", "attncli: error: hung up\n")
