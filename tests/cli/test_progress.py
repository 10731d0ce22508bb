"""The progress bar: drawn on a terminal once work has run a while, never on a pipe."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import threading

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
    bar = ProgressBar(console, delay=1.0, clock=clock)
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
    bar = ProgressBar(console, delay=0.0, clock=clock, rate=True)
    for step in range(5):
        clock.now = float(step)
        bar("documents", 2 * step, 20)
    assert bar.shown
    assert bar._bar is not None
    console.print(bar._bar.make_tasks_table(bar._bar.tasks))  # the bar's line, as drawn
    bar.close()
    drawn = console.file.getvalue()
    assert "documents" in drawn and "8/20 · 2.00/s" in drawn
