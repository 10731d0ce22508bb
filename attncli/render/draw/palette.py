"""Colour maps at every terminal depth: truecolor, 256 (xterm cube) and 16 colours.

A map turns a fraction in [0, 1] into a colour the terminal can really show. Rich would round a
truecolor ramp to 256 colours by itself, and neighbouring values then merge into one colour; so
each depth has its own list of colours, picked to differ from their neighbours.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from rich.color import Color
from rich.console import Console
from rich.style import Style

RGB = tuple[int, int, int]
TRUECOLOR, EIGHT_BIT, STANDARD = "truecolor", "256", "16"

# Ten evenly spaced stops of matplotlib's viridis: sequential and colour-blind safe, for weights.
VIRIDIS: tuple[RGB, ...] = (
    (0x44, 0x01, 0x54), (0x48, 0x28, 0x78), (0x3E, 0x49, 0x89), (0x31, 0x68, 0x8E),
    (0x26, 0x82, 0x8E), (0x1F, 0x9E, 0x89), (0x35, 0xB7, 0x79), (0x6E, 0xCE, 0x58),
    (0xB5, 0xDE, 0x2B), (0xFD, 0xE7, 0x25))
# ColorBrewer's nine-class RdBu, blue for negative: diverging, centred on 0, for signed stages.
RDBU: tuple[RGB, ...] = (
    (0x21, 0x66, 0xAC), (0x43, 0x93, 0xC3), (0x92, 0xC5, 0xDE), (0xD1, 0xE5, 0xF0),
    (0xF7, 0xF7, 0xF7), (0xFD, 0xDB, 0xC7), (0xF4, 0xA5, 0x82), (0xD6, 0x60, 0x4D),
    (0xB2, 0x18, 0x2B))
# The xterm cube entries nearest to viridis and to RdBu, walked finely, repeats dropped: every
# neighbour differs (tests/render/test_palette.py checks both the nearness and the differences).
CUBE_VIRIDIS = (53, 54, 60, 24, 30, 36, 72, 71, 77, 113, 149, 148, 184, 220)
CUBE_RDBU = (25, 31, 67, 68, 74, 110, 116, 152, 153, 189, 195, 231, 230, 224, 223, 217, 216,
             210, 173, 167, 131, 125, 124)
# Sixteen-colour terminals: names whose colours rise strictly in CIE L* in Rich's default theme
# and in xterm's (13 → 97 and 30 → 97), so cells rank by lightness; blue to yellow, like viridis.
NAMED_SEQUENTIAL = ("blue", "magenta", "green", "yellow", "bright_green", "bright_cyan",
                    "bright_yellow")
# The usual sixteen colours diverge from white.
NAMED_DIVERGING = ("blue", "bright_blue", "bright_cyan", "white", "bright_yellow", "bright_red",
                   "red")
CUBE_LEVELS = (0, 95, 135, 175, 215, 255)
# Rich's default terminal theme for the sixteen named colours, to choose text on them.
ANSI_RGB: dict[str, RGB] = {
    "black": (0, 0, 0), "red": (128, 0, 0), "green": (0, 128, 0), "yellow": (128, 128, 0),
    "blue": (0, 0, 128), "magenta": (128, 0, 128), "cyan": (0, 128, 128),
    "white": (192, 192, 192), "bright_black": (128, 128, 128), "bright_red": (255, 0, 0),
    "bright_green": (0, 255, 0), "bright_yellow": (255, 255, 0), "bright_blue": (0, 0, 255),
    "bright_magenta": (255, 0, 255), "bright_cyan": (0, 255, 255), "bright_white": (255, 255, 255)}


def depth_of(console: Console) -> str | None:
    """truecolor, 256 or 16 from Rich's colour system; None without colour (or NO_COLOR)."""
    system = console.color_system
    if console.no_color or system is None:
        return None
    return {"truecolor": TRUECOLOR, "256": EIGHT_BIT}.get(system, STANDARD)


def cube_rgb(number: int) -> RGB:
    """The RGB of an xterm colour 16–231 (the 6×6×6 cube)."""
    n = number - 16
    return CUBE_LEVELS[n // 36], CUBE_LEVELS[n // 6 % 6], CUBE_LEVELS[n % 6]


def luminance(rgb: RGB) -> float:
    """WCAG relative luminance of an sRGB colour."""
    def channel(c: int) -> float:
        x = c / 255
        return x / 12.92 if x <= 0.03928 else ((x + 0.055) / 1.055) ** 2.4
    r, g, b = (channel(c) for c in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def lightness(rgb: RGB) -> float:
    """CIE L* (0 black … 100 white) of an sRGB colour, from its relative luminance."""
    y = luminance(rgb)
    return 116 * y ** (1 / 3) - 16 if y > (6 / 29) ** 3 else y * (29 / 3) ** 3


def contrast(a: RGB, b: RGB) -> float:
    """WCAG contrast ratio between two colours, 1 … 21."""
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def interpolate(stops: tuple[RGB, ...], fraction: float) -> RGB:
    """The colour at fraction along evenly spaced stops."""
    pos = min(max(fraction, 0.0), 1.0) * (len(stops) - 1)
    low = min(int(pos), len(stops) - 2)
    t = pos - low
    a, b = stops[low], stops[low + 1]
    return (round(a[0] + (b[0] - a[0]) * t), round(a[1] + (b[1] - a[1]) * t),
            round(a[2] + (b[2] - a[2]) * t))


def _bin(fraction: float, count: int) -> int:
    return min(int(min(max(fraction, 0.0), 1.0) * count), count - 1)


@dataclass(frozen=True)
class Swatch:
    """One colour as the terminal shows it, its RGB, and the text colour that reads on it."""

    color: Color
    rgb: RGB
    text: Color

    def cell(self) -> Style:
        """The swatch as a cell background, with its text colour."""
        return _cell_style(self.text, self.color)

    def block(self) -> Style:
        """The swatch as a foreground colour, for blocks and bars."""
        return _block_style(self.color)


# A heatmap asks for the same few thousand colours hundreds of thousands of times: each swatch
# (two contrast ratios) and style is made once.
@lru_cache(maxsize=1 << 16)
def _cell_style(text: Color, background: Color) -> Style:
    return Style(color=text, bgcolor=background)


@lru_cache(maxsize=1 << 16)
def _block_style(color: Color) -> Style:
    return Style(color=color)


BLACK, WHITE = (0, 0, 0), (255, 255, 255)
TEXT = {TRUECOLOR: (Color.from_rgb(*BLACK), Color.from_rgb(*WHITE)),
        EIGHT_BIT: (Color.from_ansi(16), Color.from_ansi(231)),
        STANDARD: (Color.parse("black"), Color.parse("bright_white"))}


@lru_cache(maxsize=1 << 16)
def _swatch(color: Color, rgb: RGB, depth: str) -> Swatch:
    black, white = TEXT[depth]
    text = black if contrast(rgb, BLACK) >= contrast(rgb, WHITE) else white
    return Swatch(color, rgb, text)


def swatch(fraction: float, depth: str = TRUECOLOR, diverging: bool = False) -> Swatch:
    """The colour of fraction (0 … 1; 0.5 is zero on a diverging map) at the terminal's depth."""
    if depth == EIGHT_BIT:
        cube = CUBE_RDBU if diverging else CUBE_VIRIDIS
        number = cube[_bin(fraction, len(cube))]
        return _swatch(Color.from_ansi(number), cube_rgb(number), depth)
    if depth == STANDARD:
        names = NAMED_DIVERGING if diverging else NAMED_SEQUENTIAL
        name = names[_bin(fraction, len(names))]
        return _swatch(Color.parse(name), ANSI_RGB[name], depth)
    rgb = interpolate(RDBU if diverging else VIRIDIS, fraction)
    return _swatch(Color.from_rgb(*rgb), rgb, TRUECOLOR)
