"""The status line and its bars: drawn on a terminal once work has run a while, never on a pipe
or with --quiet, and gone before anything else is written."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import threading
import time

import pytest

from attncli import activity
from attncli.cli import progress
from attncli.cli.progress import ProgressBar
from tests.conftest import ROOT, make_console

TEXT = "Tiled attention keeps memory bounded. " * 120  # about 840 tokens

# Run the CLI with no delay before the bar, so any run would draw it.
NO_DELAY = ("import sys; import attncli.cli.progress as p; p.DELAY_S = 0.0; "
            "sys.argv = ['attncli', *sys.argv[1:]]; from attncli.cli.main import main; main()")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_nothing_is_drawn_before_the_delay_then_the_bar_appears() -> None:
    console, clock = make_console(width=80), Clock()
    bar = ProgressBar(console, delay=1.0, clock=clock, timer=False)
    bar("attention", 10, 100)
    assert not bar.shown
    clock.now = 1.5
    bar("attention", 50, 100)
    bar("pooling", 1, 4)
    assert bar.shown
    bar.close()


def test_without_a_console_nothing_is_ever_drawn() -> None:
    bar = ProgressBar(None, delay=0.0)
    bar("attention", 1, 2)
    assert not bar.shown
    bar.close()


def test_piped_stderr_gets_nothing_even_with_no_delay() -> None:
    proc = subprocess.run([sys.executable, "-c", NO_DELAY, "run", TEXT, "--impl", "tiled"],
                          capture_output=True, timeout=600, check=False, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == b""
    assert b"Summary per head" in proc.stdout


def test_a_terminal_on_stderr_sees_the_bar() -> None:
    leader, follower = pty.openpty()
    seen = bytearray()

    def read() -> None:
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:
                return
            if not chunk:
                return
            seen.extend(chunk)

    reader = threading.Thread(target=read)
    reader.start()
    proc = subprocess.run([sys.executable, "-c", NO_DELAY, "run", TEXT, "--impl", "tiled",
                           "--json"], stdout=subprocess.PIPE, stderr=follower, timeout=600,
                          check=False, cwd=ROOT)
    os.close(follower)
    reader.join(timeout=600)
    os.close(leader)
    assert proc.returncode == 0
    assert b"tiled attention" in seen
    assert json.loads(proc.stdout)["variant"] == "causal"  # stdout holds the JSON alone


def test_a_rate_bar_shows_items_a_second_from_its_clock() -> None:
    """`scan`'s bar: documents done of the total, and Rich's estimate of documents a second
    (on the bar's own clock, so the test needs no waiting)."""
    console, clock = make_console(width=100), Clock()
    bar = ProgressBar(console, delay=0.0, clock=clock, rate=True, timer=False)
    for step in range(5):
        clock.now = float(step)
        bar("documents", 2 * step, 20)
    assert bar.shown
    assert bar._bar is not None
    console.print(bar._bar.make_tasks_table(bar._bar.tasks))  # the bar's line, as drawn
    bar.close()
    drawn = console.file.getvalue()
    assert "documents" in drawn and "8/20 · 2.00/s" in drawn


def _drawn(bar: ProgressBar) -> str:
    """The display's lines as drawn now, on a console of their own."""
    assert bar._bar is not None
    console = make_console(width=100)
    console.print(bar._bar.make_tasks_table(bar._bar.tasks))
    return console.file.getvalue()


def test_the_status_line_appears_after_the_delay_without_any_call() -> None:
    """A step that makes no call for seconds (an import, a model read) is named anyway: the
    timer thread draws the status line once the delay has passed."""
    bar = ProgressBar(make_console(width=80), delay=0.05)
    bar.doing("reading the model")
    assert not bar.shown  # before the delay: nothing
    deadline = time.monotonic() + 60  # a hang guard only: the thread draws after 0.05 s
    while not bar.shown and time.monotonic() < deadline:
        time.sleep(0.01)
    assert bar.shown
    assert "reading the model" in _drawn(bar)
    bar.doing("layer 3 of 30")
    assert "layer 3 of 30" in _drawn(bar) and "reading the model" not in _drawn(bar)
    bar.close()


def test_the_delay_is_well_within_a_second() -> None:
    """What makes a wait named within a second: the status line is due at DELAY_S, and the
    longest stretch that torch's import holds the interpreter here was 0.2 s."""
    assert progress.DELAY_S <= 0.5


def test_a_counted_pass_puts_its_bar_on_the_status_line_until_the_next_step() -> None:
    console, clock = make_console(width=100), Clock()
    bar = ProgressBar(console, delay=0.0, clock=clock, timer=False)
    bar.doing("reading the tokenizer")
    clock.now = 3.0
    bar("layers", 3, 30)
    drawn = _drawn(bar)
    assert drawn.count("\n") == 1  # one line
    assert "layers" in drawn and "10%" in drawn and "reading" not in drawn
    assert drawn.rstrip().endswith("3.0 s")  # the time since the command began
    bar.kind = "bytes"
    bar("downloading x.whl", 2_000_000, 8_000_000)
    assert "downloading x.whl" in _drawn(bar) and "2.0/8.0 MB" in _drawn(bar)
    bar.doing("scoring the heads")
    assert "scoring the heads" in _drawn(bar) and "%" not in _drawn(bar)
    bar.close()


def test_a_label_from_a_file_is_one_plain_line() -> None:
    console, clock = make_console(width=200), Clock()
    bar = ProgressBar(console, delay=0.0, clock=clock, timer=False)
    bar.doing("opening [bold]x\x1b[31m\nmodel.gguf")
    assert "opening [bold]x\\x1b[31m\\nmodel.gguf" in _drawn(bar)  # no markup, escaped
    bar.close()


def test_after_hush_nothing_is_drawn_again() -> None:
    console, clock = make_console(width=80), Clock()
    bar = ProgressBar(console, delay=0.0, clock=clock, timer=False)
    bar.doing("reading")
    assert bar.shown
    bar.hush()
    assert bar._bar is not None and not bar._bar.live.is_started
    bar.doing("more")
    bar("layers", 1, 2)
    assert not bar._bar.live.is_started


def test_activity_reaches_the_commands_display_and_no_one_outside(
        monkeypatch: pytest.MonkeyPatch) -> None:
    heard: list[str] = []
    monkeypatch.setattr(ProgressBar, "doing", lambda self, what: heard.append(what))
    activity.doing("outside: no one listens")
    with progress.showing() as bar:
        activity.doing("inside")
        with progress.progress_bar(rate=True) as same:
            assert same is bar and bar.kind == "rate"
        assert bar.kind == "items"
    activity.doing("after")
    assert heard == ["inside"]


def test_quiet_draws_nothing_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress, "_is_terminal", lambda: True)
    with progress.showing(quiet=True) as bar:
        assert bar._console is None
    with progress.showing(quiet=False) as bar:
        assert bar._console is not None
