"""At 256 colours (tmux, TERM=screen-256color, no COLORTERM): nearby weights get distinct
colours, and the numbers on coloured cells have WCAG contrast."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time

import pytest

from tests.conftest import ROOT, SENTENCE

TMUX = shutil.which("tmux")
SGR = re.compile(r"\x1b\[([0-9;]*)m")
NUMBER = re.compile(r"-?\d+\.\d{4}")
XTERM16 = [(0, 0, 0), (205, 0, 0), (0, 205, 0), (205, 205, 0), (0, 0, 238), (205, 0, 205),
           (0, 205, 205), (229, 229, 229), (127, 127, 127), (255, 0, 0), (0, 255, 0),
           (255, 255, 0), (92, 92, 255), (255, 0, 255), (0, 255, 255), (255, 255, 255)]


def xterm_rgb(n: int) -> tuple[int, int, int]:
    """The RGB xterm gives colour n of 256 (an independent copy of the standard table)."""
    if n < 16:
        return XTERM16[n]
    if n < 232:
        levels = [0] + [55 + 40 * k for k in range(1, 6)]
        n -= 16
        return levels[n // 36], levels[n // 6 % 6], levels[n % 6]
    grey = 8 + 10 * (n - 232)
    return grey, grey, grey


def wcag(a: tuple[int, int, int], b: tuple[int, int, int]) -> float:
    def lum(rgb: tuple[int, int, int]) -> float:
        c = [x / 255 for x in rgb]
        c = [x / 12.92 if x <= 0.03928 else ((x + 0.055) / 1.055) ** 2.4 for x in c]
        return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2]
    hi, lo = sorted((lum(a), lum(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def cells(screen: str) -> list[tuple[float, int | None, int | None]]:
    """(number, foreground, background) of every number printed, colours as 256 indices."""
    out: list[tuple[float, int | None, int | None]] = []
    fg = bg = None
    for k, part in enumerate(SGR.split(screen)):
        if k % 2 == 0:
            out += [(float(n), fg, bg) for n in NUMBER.findall(part)]
            continue
        codes = [int(c) for c in part.split(";") if c] or [0]
        i = 0
        while i < len(codes):
            code = codes[i]
            if code in (38, 48) and codes[i + 1] == 5:
                fg, bg = (codes[i + 2], bg) if code == 38 else (fg, codes[i + 2])
                i += 3
                continue
            fg = None if code in (0, 39) else fg
            bg = None if code in (0, 49) else bg
            i += 1
    return out


@pytest.mark.skipif(TMUX is None, reason="needs tmux")
def test_weights_at_256_colours_are_distinct_and_readable() -> None:
    socket = f"attncli-test-{os.getpid()}"
    env = "env -u NO_COLOR -u COLORTERM -u FORCE_COLOR TERM=screen-256color"
    command = (f"cd {ROOT} && {env} {sys.executable} -m attncli run '{SENTENCE}' "
               "--variant causal; sleep 600")
    tmux = [TMUX, "-L", socket, "-f", os.devnull]
    subprocess.run([*tmux, "new-session", "-d", "-x", "120", "-y", "50", command], check=True)
    try:
        screen = ""
        deadline = time.monotonic() + 600  # a hang guard only
        while "Context vectors" not in screen and time.monotonic() < deadline:
            time.sleep(0.5)
            screen = subprocess.run([*tmux, "capture-pane", "-p", "-e", "-t", "0"],
                                    capture_output=True, text=True, check=True).stdout
    finally:
        subprocess.run([*tmux, "kill-server"], check=False)
    assert "Context vectors" in screen, screen
    table = screen[screen.index("Attention weights"):screen.index("Context vectors")]
    weights = [cell for cell in cells(table) if cell[2] is not None]  # not the legend's ends
    assert len(weights) == 21  # the 6 × 7 / 2 unmasked weights of six tokens
    between = {bg for value, _, bg in weights if 0.20 <= value <= 0.30}
    assert None not in between and len(between) >= 3, between
    for value, fg, bg in cells(screen):
        if bg is not None:
            assert fg is not None and wcag(xterm_rgb(fg), xterm_rgb(bg)) >= 4.5, (value, fg, bg)
