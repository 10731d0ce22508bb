"""--open: the file --save wrote, opened in the web browser (Python's webbrowser, which reads
$BROWSER); --open without --save is one line before any work; no browser is a line, not a
failure."""

from __future__ import annotations

import os
import subprocess
import sys
import webbrowser
from pathlib import Path

import pytest

from tests.conftest import ROOT, SENTENCE

# A browser of the test's own: it writes the address it was given into a file.
FAKE = "import sys, pathlib; pathlib.Path(sys.argv[1]).write_text(sys.argv[2])"


def test_the_page_opens_in_the_browser_browser_names(tmp_path: Path) -> None:
    page, seen = tmp_path / "run page.html", tmp_path / "seen.txt"
    browser = f"{sys.executable} -c '{FAKE}' {seen} %s"
    proc = subprocess.run([sys.executable, "-m", "attncli", "run", SENTENCE, "--save", str(page),
                           "--open"], capture_output=True, text=True, timeout=600, check=False,
                          cwd=ROOT, env={**os.environ, "BROWSER": browser})
    assert proc.returncode == 0, proc.stderr
    assert page.is_file() and "Attention weights" in proc.stdout
    assert seen.read_text() == page.resolve().as_uri()  # file:///…/run%20page.html
    assert proc.stderr == ""


@pytest.mark.parametrize(("name", "args"), [
    ("explain.svg", ["explain", SENTENCE]), ("compare.txt", ["compare", SENTENCE]),
    pytest.param("demo.html", ["demo"], marks=pytest.mark.slow),  # the whole tour: seconds
])  # fmt: skip
def test_every_command_that_saves_opens_what_it_saved(cli, tmp_path: Path,  # noqa: ANN001
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      name: str, args: list[str]) -> None:
    opened: list[str] = []
    monkeypatch.setattr(webbrowser, "open", lambda url: opened.append(url) or True)
    path = tmp_path / name
    done = cli(*args, "--save", str(path), "--open")
    assert done.code == 0, done.err
    assert opened == [path.resolve().as_uri()] and path.is_file()


def test_open_without_save_is_refused_before_any_work(cli) -> None:  # noqa: ANN001
    cli("run", SENTENCE, "--open").assert_usage_error(
        "--open opens the file --save writes: add --save NAME.html (the interactive page), "
        ".svg or .txt")


def test_no_browser_is_one_line_and_the_file_stays(cli, tmp_path: Path,  # noqa: ANN001
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(webbrowser, "open", lambda url: False)
    page = tmp_path / "page.html"
    done = cli("run", SENTENCE, "--save", str(page), "--open")
    assert done.code == 0 and page.is_file()
    assert done.err == (f"attncli: no web browser opened {page}; open it yourself, or set "
                        "BROWSER\n")


def test_open_is_offered_only_where_save_is(cli) -> None:  # noqa: ANN001
    assert "--open" in cli("heads", "--help").out
    assert "--open" not in cli("models", "--help").out
    assert "--open" not in cli("tokens", "--help").out
