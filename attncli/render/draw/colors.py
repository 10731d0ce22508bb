"""The one mapping from a value to a colour: viridis, sequential and colour-blind safe."""

from __future__ import annotations

from rich.console import Console
from rich.style import Style
from rich.text import Text

# Ten evenly spaced stops of matplotlib's viridis.
VIRIDIS = ((0x44, 0x01, 0x54), (0x48, 0x28, 0x78), (0x3E, 0x49, 0x89), (0x31, 0x68, 0x8E),
           (0x26, 0x82, 0x8E), (0x1F, 0x9E, 0x89), (0x35, 0xB7, 0x79), (0x6E, 0xCE, 0x58),
           (0xB5, 0xDE, 0x2B), (0xFD, 0xE7, 0x25))
MASKED_STYLE = Style(color="grey50", dim=True)
MASKED_MARK = "·"
# Shades from low to high, for heatmaps without colour.
SHADES = " ░▒▓█"


def has_colour(console: Console) -> bool:
    """Whether the console shows colour (not NO_COLOR, not a monochrome terminal)."""
    return not console.no_color and console.color_system is not None


def _fraction(value: float, vmin: float, vmax: float) -> float:
    span = vmax - vmin
    return 0.5 if span <= 0 else min(max((value - vmin) / span, 0.0), 1.0)


def colour_of(value: float, vmin: float, vmax: float) -> tuple[int, int, int]:
    """The viridis colour of value on the scale vmin (dark) … vmax (bright)."""
    pos = _fraction(value, vmin, vmax) * (len(VIRIDIS) - 1)
    low = min(int(pos), len(VIRIDIS) - 2)
    frac = pos - low
    a, b = VIRIDIS[low], VIRIDIS[low + 1]
    r, g, bl = (round(a[i] + (b[i] - a[i]) * frac) for i in range(3))
    return r, g, bl


def cell_style(value: float, vmin: float, vmax: float) -> Style:
    """Background from the scale, with black or white text, whichever reads better."""
    r, g, b = colour_of(value, vmin, vmax)
    luminance = (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255
    fg = "black" if luminance > 0.45 else "white"
    return Style(color=fg, bgcolor=f"#{r:02x}{g:02x}{b:02x}")


def block_style(value: float, vmin: float, vmax: float) -> Style:
    """Foreground colour from the scale, for coloured blocks and bars."""
    r, g, b = colour_of(value, vmin, vmax)
    return Style(color=f"#{r:02x}{g:02x}{b:02x}")


def shade_of(value: float, vmin: float, vmax: float) -> str:
    """One shade character for value, from blank (vmin) to full block (vmax)."""
    return SHADES[round(_fraction(value, vmin, vmax) * (len(SHADES) - 1))]


def shade_legend(vmin: float, vmax: float, precision: int, masked: bool = False) -> Text:
    """One line: the shades between their end values, and the masked mark if used."""
    text = Text(f"shade {vmin:.{precision}f} ", style="dim")
    text.append(f"[{SHADES}]")
    text.append(f" {vmax:.{precision}f}   ", style="dim")
    if masked:
        text.append(MASKED_MARK, style=MASKED_STYLE)
        text.append(" masked (future token)", style="dim")
    return text


def legend(vmin: float, vmax: float, precision: int, ramp: bool = True, masked: bool = False,
           steps: int = 12) -> Text:
    """One line: the colour ramp between its end values, and the masked mark if used."""
    text = Text()
    if ramp:
        text.append(f"colour {vmin:.{precision}f} ", style="dim")
    for i in range(steps if ramp else 0):
        value = vmin + (vmax - vmin) * i / (steps - 1)
        text.append("█", style=Style(color=cell_style(value, vmin, vmax).bgcolor))
    if ramp:
        text.append(f" {vmax:.{precision}f}   ", style="dim")
    if masked:
        text.append(MASKED_MARK, style=MASKED_STYLE)
        text.append(" masked (future token)", style="dim")
    return text
