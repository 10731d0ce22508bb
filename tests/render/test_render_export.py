"""--save: SVG, HTML and text files that parse, keep colours and labels, and are written whole."""

from __future__ import annotations

import os
import stat
import threading
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import pytest
from rich.text import Text

from attncli.cli.export import (
    check_save,
    check_writable,
    export,
    recording_console,
    save_format,
    write_atomic,
)
from attncli.errors import AttnCliError
from tests.conftest import full_device


class _Collect(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.data: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)

    def handle_data(self, data: str) -> None:
        self.data.append(data)


def _recorded(monkeypatch: pytest.MonkeyPatch):  # noqa: ANN202
    monkeypatch.setenv("NO_COLOR", "1")  # the file is coloured whatever the terminal is
    console = recording_console(60)
    console.print(Text("weights of [journey]", style="#fde725 on #440154"))
    return console


@pytest.mark.parametrize(("name", "kind"), [
    ("a.svg", "svg"), ("a.SVG", "svg"), ("a.html", "page"), ("a.htm", "page"),
    ("a.term.html", "html"), ("a.TERM.HTML", "html"), ("a.txt", "text"),
])
def test_format_by_extension(name: str, kind: str) -> None:
    assert save_format(Path(name)) == kind


@pytest.mark.parametrize("name", ["a.pdf", "a", "a.svg.bak"])
def test_unknown_extension(name: str) -> None:
    with pytest.raises(AttnCliError, match="unknown extension"):
        save_format(Path(name))


def test_svg_parses_and_keeps_text_and_colour(monkeypatch: pytest.MonkeyPatch) -> None:
    svg = export(_recorded(monkeypatch), Path("x.svg"))
    root = ET.fromstring(svg)
    assert root.tag.endswith("svg")
    assert "weights of [journey]" in "".join(root.itertext()).replace("\xa0", " ")
    assert "#fde725" in svg.lower() and "#440154" in svg.lower()


def test_html_parses_and_keeps_text_and_colour(monkeypatch: pytest.MonkeyPatch) -> None:
    page = export(_recorded(monkeypatch), Path("x.html"))
    parser = _Collect()
    parser.feed(page)
    assert {"html", "body", "pre"} <= set(parser.tags)
    assert "weights of [journey]" in "".join(parser.data)
    assert "#fde725" in page.lower()


def test_text_has_no_escape_codes(monkeypatch: pytest.MonkeyPatch) -> None:
    assert export(_recorded(monkeypatch), Path("x.txt")) == "weights of [journey]\n"


def test_write_atomic_leaves_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    write_atomic(target, "one", "--save")
    write_atomic(target, "two", "--save")
    assert target.read_text() == "two"
    assert os.listdir(tmp_path) == ["out.txt"]
    assert target.stat().st_mode & 0o777 == 0o666 & ~_umask()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_failed_write_keeps_the_old_file_and_cleans_up(tmp_path: Path) -> None:
    (tmp_path / "dir.svg").mkdir()
    with pytest.raises(AttnCliError, match="cannot write --save"):
        write_atomic(tmp_path / "dir.svg", "x", "--save")
    assert os.listdir(tmp_path) == ["dir.svg"]


@pytest.mark.parametrize(("path", "message"), [
    ("/nonexistent-dir/out.svg", "the directory '/nonexistent-dir' does not exist"),
    (".", "is a directory"),
])
def test_unwritable_paths(path: str, message: str) -> None:
    with pytest.raises(AttnCliError, match=message):
        check_writable(Path(path), "--save")


def test_check_save_checks_extension_then_paths(tmp_path: Path) -> None:
    check_save(tmp_path / "a.svg", tmp_path / "a.json")
    check_save(None, None)
    with pytest.raises(AttnCliError, match="unknown extension '.png'"):
        check_save(tmp_path / "a.png", None)
    with pytest.raises(AttnCliError, match="--save-json"):
        check_save(None, tmp_path / "missing" / "a.json")


@pytest.mark.parametrize("path", ["/dev/attncli-new.json", "/proc/attncli-new.txt",
                                  "/sys/attncli-new.svg", "/dev/shm/../attncli-new.txt"])
def test_no_file_is_created_under_the_kernels_folders(path: str) -> None:
    with pytest.raises(AttnCliError, match="attncli creates no file under /"):
        check_writable(Path(path), "--save")
    with pytest.raises(AttnCliError, match="cannot write --save"):
        write_atomic(Path(path), "x", "--save")  # not even when the check was skipped
    assert not os.path.lexists(path)


def test_a_link_into_dev_is_refused_too(tmp_path: Path) -> None:
    (tmp_path / "o.json").symlink_to("/dev/attncli-new.json")
    with pytest.raises(AttnCliError, match="creates no file under /dev"):
        check_writable(tmp_path / "o.json", "--save-json")
    assert not os.path.lexists("/dev/attncli-new.json")


def test_an_existing_device_is_written_into() -> None:
    check_writable(Path("/dev/null"), "--save-json")
    write_atomic(Path("/dev/null"), "into the device", "--save-json")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_a_full_device_is_a_write_error_with_exit_1() -> None:
    with pytest.raises(AttnCliError) as caught:
        write_atomic(full_device(), "x" * 100_000, "--save-json")
    assert str(caught.value) == "write error: --save-json '/dev/full': No space left on device"
    assert caught.value.exit_code == 1


def test_a_fifo_that_takes_the_name_meanwhile_is_written_into_not_replaced(
        tmp_path: Path) -> None:
    target = tmp_path / "o.json"
    target.write_text("old")
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(target.read_bytes()), daemon=True)

    def pieces() -> Iterator[str]:
        yield "first, "
        target.unlink()
        os.mkfifo(target)  # while the temporary file is being written
        reader.start()
        yield "second"

    write_atomic(target, pieces(), "--save-json")
    reader.join(600)
    assert stat.S_ISFIFO(os.lstat(target).st_mode)
    assert received == [b"first, second"] and os.listdir(tmp_path) == ["o.json"]
