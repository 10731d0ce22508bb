"""`attncli scan`'s hostile options: numbers past any sensible bound, NaN, an --out that is a
link to nothing, a FIFO, a device or a kernel folder: each one line, exit 2, nothing written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import ROOT

TOY = str(ROOT / "samples" / "toy-gpt2")


@pytest.mark.parametrize("args, message", [
    (["--workers", "9223372036854775808"], "'--workers': 9223372036854775808 is not in the "
                                           "range 1<=x<=1024"),
    (["--workers", "0"], "'--workers': 0 is not in the range 1<=x<=1024"),
    (["--threshold", "nan"], "--threshold must be from 0 to 1 (got nan)"),
    (["--threshold", "inf"], "'--threshold': inf is not in the range 0.0<=x<=1.0"),
    (["--threshold", "-inf"], "'--threshold': -inf is not in the range 0.0<=x<=1.0"),
    (["--max-tokens", "9223372036854775808"], "'--max-tokens': 9223372036854775808 is not in "
                                              "the range 2<=x<=1048576"),
    (["--part-size", "0"], "'--part-size': 0 is not in the range x>=1"),
])
def test_numbers_out_of_bounds_are_one_line(cli, tmp_path: Path, args: list[str],  # noqa: ANN001
                                            message: str) -> None:
    corpus = tmp_path / "docs.txt"
    corpus.write_text("one two three\n", encoding="utf-8")
    cli("scan", str(corpus), "--model", TOY, "--out", str(tmp_path / "out"), *args
        ).assert_usage_error(message)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("make, message", [
    (lambda p: p.symlink_to(p.parent / "nowhere"), "is a link to"),
    (lambda p: os.mkfifo(p), "is a FIFO, socket or device, not a folder"),
    (lambda p: p.write_text("x"), "is a file, not a folder"),
])
def test_an_out_that_is_no_folder_is_one_line(cli, tmp_path: Path, make: object,  # noqa: ANN001
                                              message: str) -> None:
    corpus = tmp_path / "docs.txt"
    corpus.write_text("one two three\n", encoding="utf-8")
    out = tmp_path / "out"
    make(out)  # type: ignore[operator]
    cli("scan", str(corpus), "--model", TOY, "--out", str(out)).assert_usage_error(message)
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize("out", ["/dev/null", "/dev/attncli-atlas", "/proc/self/atlas"])
def test_no_scan_goes_under_the_kernels_folders(cli, tmp_path: Path, out: str) -> None:  # noqa: ANN001
    corpus = tmp_path / "docs.txt"
    corpus.write_text("one two three\n", encoding="utf-8")
    cli("scan", str(corpus), "--model", TOY, "--out", out).assert_usage_error(
        "where no scan is written")
    assert not Path("/dev/attncli-atlas").exists()
