"""Colour maps at every depth: near their reference maps, neighbours distinct, text readable."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from attncli.render.draw.colors import cell_style, legend
from attncli.render.draw.palette import (
    ANSI_RGB,
    CUBE_RDBU,
    CUBE_VIRIDIS,
    EIGHT_BIT,
    NAMED_DIVERGING,
    NAMED_SEQUENTIAL,
    RDBU,
    STANDARD,
    TRUECOLOR,
    VIRIDIS,
    contrast,
    cube_rgb,
    depth_of,
    interpolate,
    lightness,
    luminance,
    swatch,
)
from tests.tolerance import assert_near

DEPTHS = (TRUECOLOR, EIGHT_BIT, STANDARD)


def _distance(a: tuple[int, int, int], b: tuple[int, int, int]) -> float:
    return sum((x - y) ** 2 for x, y in zip(a, b, strict=True)) ** 0.5


@pytest.mark.parametrize(("cube", "stops"), [(CUBE_VIRIDIS, VIRIDIS), (CUBE_RDBU, RDBU)])
def test_cube_entries_follow_their_map_and_neighbours_differ(cube, stops) -> None:  # noqa: ANN001
    rgbs = [cube_rgb(n) for n in cube]
    curve = [interpolate(stops, k / 400) for k in range(401)]
    # Each entry lies near the reference map, and each of its points near an entry (the cube
    # is coarse: 40 to 95 apart on each axis).
    assert all(min(_distance(c, p) for p in curve) < 70 for c in rgbs)
    assert all(min(_distance(p, c) for c in rgbs) < 70 for p in curve)
    assert all(a != b for a, b in zip(cube, cube[1:], strict=False))
    assert all(16 <= n <= 231 for n in cube)


def test_cube_rgb_is_xterm() -> None:
    assert cube_rgb(16) == (0, 0, 0) and cube_rgb(231) == (255, 255, 255)
    assert cube_rgb(60) == (95, 95, 135) and cube_rgb(220) == (255, 215, 0)


@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("diverging", [False, True])
def test_text_on_every_cell_has_wcag_contrast(depth: str, diverging: bool) -> None:
    text_rgb = {TRUECOLOR: lambda c: c.triplet, EIGHT_BIT: lambda c: cube_rgb(c.number),
                STANDARD: lambda c: ANSI_RGB[c.name]}[depth]
    for k in range(101):
        sw = swatch(k / 100, depth, diverging)
        assert contrast(text_rgb(sw.text), sw.rgb) >= 4.5, (depth, k, sw)


def test_256_colour_bins_separate_nearby_weights() -> None:
    colours = {cell_style(w, 0.0, 1.0, EIGHT_BIT).bgcolor.number
               for w in (0.2043, 0.2279, 0.2922)}
    assert len(colours) == 3


def test_diverging_map_is_centred_on_zero() -> None:
    for depth in DEPTHS:
        middle = cell_style(0.0, -3.0, 1.0, depth, diverging=True)
        assert middle == swatch(0.5, depth, True).cell()
    assert swatch(0.5, EIGHT_BIT, True).color.number == 231
    assert NAMED_DIVERGING[len(NAMED_DIVERGING) // 2] == "white"
    low = cell_style(-2.0, -2.0, 2.0, TRUECOLOR, diverging=True).bgcolor.triplet
    high = cell_style(2.0, -2.0, 2.0, TRUECOLOR, diverging=True).bgcolor.triplet
    assert low.blue > low.red and high.red > high.blue
    assert len(NAMED_SEQUENTIAL) == len(set(NAMED_SEQUENTIAL))


@pytest.mark.parametrize(("system", "expected"), [("truecolor", TRUECOLOR), ("256", EIGHT_BIT),
                                                  ("standard", STANDARD), (None, None)])
def test_depth_follows_rich(system: str | None, expected: str | None) -> None:
    console = Console(file=io.StringIO(), force_terminal=system is not None,
                      color_system=system, no_color=False)
    assert depth_of(console) == expected
    assert depth_of(Console(file=io.StringIO(), force_terminal=True, no_color=True)) is None


def test_legend_names_the_scale() -> None:
    assert "shared scale" in legend(0.0, 1.0, 2, scale="shared").plain
    assert "-2.00" in legend(-1.0, 2.0, 2, diverging=True).plain


# xterm's default sixteen colours (its XTerm-col.ad), a second common theme beside Rich's.
XTERM_RGB = dict(zip(ANSI_RGB, [
    (0, 0, 0), (205, 0, 0), (0, 205, 0), (205, 205, 0), (0, 0, 238), (205, 0, 205),
    (0, 205, 205), (229, 229, 229), (127, 127, 127), (255, 0, 0), (0, 255, 0), (255, 255, 0),
    (92, 92, 255), (255, 0, 255), (0, 255, 255), (255, 255, 255)], strict=True))


@pytest.mark.parametrize("theme", [ANSI_RGB, XTERM_RGB], ids=["rich", "xterm"])
def test_sixteen_colour_weight_ramp_rises_in_lightness(theme: dict[str, tuple[int, int, int]]) \
        -> None:
    # The colours the ramp really shows, bin by bin from 0 to 1, each brighter than the last.
    names = list(dict.fromkeys(swatch(k / 200, STANDARD).color.name for k in range(201)))
    assert names == list(NAMED_SEQUENTIAL) and len(names) >= 6
    stars = [lightness(theme[name]) for name in names]
    lumas = [luminance(theme[name]) for name in names]
    assert all(b > a for a, b in zip(stars, stars[1:], strict=False)), stars
    assert all(b > a for a, b in zip(lumas, lumas[1:], strict=False)), lumas


def test_lightness_is_cie_l_star() -> None:
    assert lightness((0, 0, 0)) == 0.0
    assert_near(lightness((255, 255, 255)), 100.0)
    # 0.3: grey 119 is the sRGB level nearest L* 50, not exactly it (118.9 would be)
    assert_near(lightness((119, 119, 119)), 50.0, atol=0.3, rtol=0)
