"""The one mapping from a value to a colour: viridis for weights, RdBu centred on 0 for signed
stages, at the terminal's depth (render/palette.py), with text that reads on every cell."""

from __future__ import annotations

from rich.console import Console
from rich.style import Style
from rich.text import Text

from attncli.render.draw.palette import TRUECOLOR, VIRIDIS, depth_of, interpolate, swatch

__all__ = ["VIRIDIS", "depth_of"]

MASKED_STYLE = Style(color="grey50", dim=True)
MASKED_MARK = "·"
# Shades from low to high, for heatmaps without colour.
SHADES = " ░▒▓█"
SCALES = ("shared", "table", "unit")
SCALE_NOTES = {
    "shared": "shared scale",
    "table": "per-table scale",
    "unit": "unit scale",
}


def has_colour(console: Console) -> bool:
    """Whether the console shows colour (not NO_COLOR, not a monochrome terminal)."""
    return depth_of(console) is not None


def _fraction(value: float, vmin: float, vmax: float, diverging: bool = False) -> float:
    if diverging:
        # Zero is the middle of the map, whatever the range: ±the larger end.
        half = max(abs(vmin), abs(vmax))
        return 0.5 if half <= 0 else min(max(0.5 + 0.5 * value / half, 0.0), 1.0)
    span = vmax - vmin
    return 0.5 if span <= 0 else min(max((value - vmin) / span, 0.0), 1.0)


def colour_of(value: float, vmin: float, vmax: float) -> tuple[int, int, int]:
    """The truecolor viridis colour of value on the scale vmin (dark) … vmax (bright)."""
    return interpolate(VIRIDIS, _fraction(value, vmin, vmax))


def cell_style(value: float, vmin: float, vmax: float, depth: str = TRUECOLOR,
               diverging: bool = False) -> Style:
    """Background from the scale at depth, with black or white text, whichever contrasts more."""
    return swatch(_fraction(value, vmin, vmax, diverging), depth, diverging).cell()


def block_style(value: float, vmin: float, vmax: float, depth: str = TRUECOLOR,
                diverging: bool = False) -> Style:
    """Foreground colour from the scale at depth, for coloured blocks and bars."""
    return swatch(_fraction(value, vmin, vmax, diverging), depth, diverging).block()


def shade_of(value: float, vmin: float, vmax: float, diverging: bool = False) -> str:
    """One shade character for value, from blank (vmin) to full block (vmax)."""
    return SHADES[round(_fraction(value, vmin, vmax, diverging) * (len(SHADES) - 1))]


def _ends(vmin: float, vmax: float, diverging: bool) -> tuple[float, float]:
    half = max(abs(vmin), abs(vmax))
    return (-half, half) if diverging else (vmin, vmax)


def _tail(text: Text, masked: bool, scale: str | None) -> Text:
    if masked:
        text.append(MASKED_MARK, style=MASKED_STYLE)
        text.append(" masked (future token)   ", style="dim")
    if scale is not None:
        text.append(SCALE_NOTES.get(scale, scale), style="dim")
    text.rstrip()
    return text


def shade_legend(vmin: float, vmax: float, precision: int, masked: bool = False,
                 diverging: bool = False, scale: str | None = None) -> Text:
    """One line: the shades between their end values, the scale, and the masked mark if used."""
    low, high = _ends(vmin, vmax, diverging)
    text = Text(f"shade {low:.{precision}f} ", style="dim")
    text.append(f"[{SHADES}]")
    text.append(f" {high:.{precision}f}   ", style="dim")
    return _tail(text, masked, scale)


def legend(vmin: float, vmax: float, precision: int, ramp: bool = True, masked: bool = False,
           steps: int = 12, depth: str = TRUECOLOR, diverging: bool = False,
           scale: str | None = None) -> Text:
    """One line: the colour ramp between its end values, the scale, and the masked mark."""
    low, high = _ends(vmin, vmax, diverging)
    text = Text()
    if ramp:
        text.append(f"colour {low:.{precision}f} ", style="dim")
        for i in range(steps):
            fraction = i / (steps - 1)
            text.append("█", style=swatch(fraction, depth, diverging).block())
        text.append(f" {high:.{precision}f}   ", style="dim")
    return _tail(text, masked, scale)


def short_number(value: float, precision: int) -> str:
    """value with precision decimals, or in e-notation when those decimals would show 0."""
    return f"{value:.{precision}f}" if value >= 10**-precision or value == 0 else f"{value:.1e}"


def log_legend(low: float, top: float, precision: int, masked: bool = False,
               depth: str | None = TRUECOLOR, scale: str | None = None, steps: int = 12,
               clipped: bool = False) -> Text:
    """One line for a log range: the ramp (or shades) between low and top, each step the same
    ratio, whether smaller weights were drawn as low, the scale, and the masked mark."""
    text = Text(("colour " if depth is not None else "shade ") + short_number(low, precision)
                + " ", style="dim")
    if depth is not None:
        for i in range(steps):
            text.append("█", style=swatch(i / (steps - 1), depth).block())
    else:
        text.append(f"[{SHADES}]")
    ratio = (top / low) ** (1 / (steps - 1 if depth is not None else len(SHADES) - 1)) \
        if low > 0 else 1.0
    text.append(f" {short_number(top, precision)}   ", style="dim")
    below = f", less as {short_number(low, precision)}" if clipped else ""
    text.append(f"log scale (×{ratio:.2g} a step{below})   ", style="dim")
    return _tail(text, masked, scale)
