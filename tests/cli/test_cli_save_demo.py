"""--save/--save-json from the CLI, compare and demo as users run them, and their --help."""

from __future__ import annotations

import json
import os
import sys
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.conftest import JOURNEY, ROOT, SENTENCE, attncli_process

BOOK_X2 = ("0.1385", "0.2379", "0.2333", "0.1240", "0.1082", "0.1581", "0.4419", "0.6515",
           "0.5683")


def _svg_text(path: Path) -> str:
    return "".join(ET.parse(path).getroot().itertext()).replace("\xa0", " ")


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


@pytest.mark.parametrize("command", ["run", "explain"])
def test_save_svg_html_text(cli, tmp_path: Path, command: str) -> None:  # noqa: ANN001
    # .term.html is the terminal's copy; .html is the interactive page (tests/render/test_page.py).
    for name in ("out.svg", "out.term.html", "out.txt"):
        res = cli(command, SENTENCE, "--query", "journey", "--save", str(tmp_path / name))
        assert res.code == 0 and res.err == ""
        assert "Attention" in res.out  # the terminal still gets its render
    svg = _svg_text(tmp_path / "out.svg")
    parser = _Text()
    parser.feed((tmp_path / "out.term.html").read_text())
    html = "".join(parser.parts).replace("\xa0", " ")
    text = (tmp_path / "out.txt").read_text()
    for content in (svg, html, text):
        for label in ("Your", " journey", " starts", " step"):
            assert label in content
        assert "What query 1 (' journey') attends to" in content
    assert "\x1b[" not in text
    # The files are coloured although the terminal (NO_COLOR in these tests) is not.
    assert "#440154" in (tmp_path / "out.svg").read_text().lower()
    assert sorted(os.listdir(tmp_path)) == ["out.svg", "out.term.html", "out.txt"]


def test_save_json_alongside_the_render(cli, tmp_path: Path) -> None:  # noqa: ANN001
    target = tmp_path / "run.json"
    res = cli("explain", SENTENCE, "--save-json", str(target))
    assert res.code == 0 and "Step 1 of" in res.out
    saved = json.loads(target.read_text())
    assert saved == cli("explain", SENTENCE, "--json").json()


@pytest.mark.parametrize(("args", "message"), [
    (("run", SENTENCE, "--save", "out.pdf"), "--save 'out.pdf': unknown extension '.pdf'"),
    (("run", "--file", "/nonexistent.txt", "--save", "x.png"), "unknown extension"),
    (("run", SENTENCE, "--save", "/nonexistent-dir/x.svg"), "does not exist"),
    (("explain", SENTENCE, "--save-json", "/nonexistent-dir/x.json"), "--save-json"),
    (("demo", "--save", "tour.doc"), "unknown extension '.doc'"),
    (("demo", "--lang", "de"), "'de' is not one of"),
    (("compare", SENTENCE, "--variants", "simple,nope"), "--variants: unknown name 'nope'"),
    (("compare", SENTENCE, "--variants", ""), "--variants needs a comma-separated list"),
    (("compare", SENTENCE, "--variants", "qkv,qkv"), "--variants lists 'qkv' more than once"),
    (("compare", SENTENCE, "--rows", "3:1"), "--rows 3:1 selects nothing"),
    (("compare", "--inputs", str(JOURNEY)), "heads must divide d_out (got d_out=3, heads=2)"),
])
def test_bad_input_one_line_exit_2(cli, args: tuple[str, ...], message: str) -> None:  # noqa: ANN001
    cli(*args).assert_usage_error(message)


def test_save_onto_a_directory_is_one_line(cli, tmp_path: Path) -> None:  # noqa: ANN001
    (tmp_path / "d.svg").mkdir()
    res = cli("run", SENTENCE, "--save", str(tmp_path / "d.svg"))
    assert res.code == 2 and res.out == "" and res.err.count("\n") == 1
    assert "is a directory, not a file" in res.err


def test_compare_json_and_view(cli) -> None:  # noqa: ANN001
    doc = cli("compare", SENTENCE, "--variants", "simple,causal,multihead", "--json").json()
    assert [v["variant"] for v in doc["variants"]] == ["simple", "causal", "multihead"]
    single = cli("run", SENTENCE, "--variant", "causal", "--json").json()
    assert doc["variants"][1] == single
    res = cli("compare", SENTENCE, "--variants", "qkv,causal", "--rows", "2:4")
    assert res.code == 0 and "QKV self-attention" in res.out and "causal attention" in res.out
    assert "\n5 " not in res.out
    windowed = cli("compare", SENTENCE, "--variants", "qkv", "--cols", "1:3", "--json").json()
    assert windowed["variants"][0]["window"] == {"rows": [0, 6], "cols": [1, 3]}


def test_demo_in_process_both_languages(cli, tmp_path: Path) -> None:  # noqa: ANN001
    res = cli("demo", "--no-pause", "--save", str(tmp_path / "tour.html"))
    assert res.code == 0 and res.err == ""
    for number in (*BOOK_X2, "-0.0739", "0.0713", "-0.4519", "0.2216", "0.3190", "0.4858"):
        assert number in res.out, number
    assert "0.1385" in (tmp_path / "tour.html").read_text()
    zh = cli("demo", "--lang", "zh")
    assert "注意力权重" in zh.out and "多头注意力" in zh.out and "0.4419" in zh.out


def test_demo_pauses_on_a_terminal_and_q_quits(monkeypatch: pytest.MonkeyPatch, capsys) -> None:  # noqa: ANN001
    from attncli.cli import output

    answers = iter(["", "q"])
    monkeypatch.setattr("builtins.input", lambda *_: next(answers))
    pages = [lambda c, k=k: f"page {k}" for k in range(5)]
    output.deliver_pages(pages, None, "en")
    out = capsys.readouterr().out
    assert "page 2" in out and "page 3" not in out
    assert out.count("Enter: next step · q: quit") == 2


def test_demo_piped_from_another_directory(tmp_path: Path) -> None:
    env = {"PYTHONPATH": str(ROOT), "COLUMNS": "80"}
    proc = _in(tmp_path, attncli_process, "demo", env=env)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.decode()
    assert all(number in out for number in BOOK_X2)
    assert "\x1b[" not in out and proc.stderr == b""


def test_demo_into_a_closed_pipe_is_quiet() -> None:
    import subprocess

    cmd = f"{sys.executable} -m attncli demo | head -c 200"
    proc = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True,
                          timeout=600, check=False)
    assert len(proc.stdout) == 200
    assert proc.stderr == b"" and proc.returncode == 0


def _in(directory: Path, func, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
    old = Path.cwd()
    os.chdir(directory)
    try:
        return func(*args, **kwargs)
    finally:
        os.chdir(old)


def test_new_commands_have_help_with_examples_without_torch(cli) -> None:  # noqa: ANN001
    import subprocess

    for command in ("explain", "compare", "demo"):
        res = cli(command, "--help")
        assert res.code == 0 and "Examples" in res.out
    code = ("import sys; sys.argv = ['attncli'] + sys.argv[1:]; "
            "from attncli.cli.main import execute; "
            "execute(); print('torch' in sys.modules)")
    for command in ("explain", "compare", "demo"):
        proc = subprocess.run([sys.executable, "-c", code, command, "--help"],
                              capture_output=True, text=True, timeout=600, check=False)
        assert proc.stdout.strip().splitlines()[-1] == "False", command
