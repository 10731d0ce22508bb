"""The demo's lesson chapters, `demo --chapter`, and the lessons' texts in both languages."""

from __future__ import annotations

import re

import pytest
from rich.cells import cell_len

from attncli.lessons.chapters import CHAPTERS, chapter
from attncli.render.lessons.chapters import render_chapter
from attncli.render.lessons.lesson_text import STRINGS, size_text
from tests.conftest import rendered


def test_every_text_has_both_languages_with_the_same_placeholders() -> None:
    for key, (en, zh) in STRINGS.items():
        assert en and zh, key
        assert set(re.findall(r"{\w+}", en)) == set(re.findall(r"{\w+}", zh)), key


def test_chinese_uses_the_chapters_terms() -> None:
    zh = " ".join(pair[1] for pair in STRINGS.values())
    for term in ("键值缓存", "在线 softmax", "分块", "置换不变", "位置嵌入"):
        assert term in zh, term


@pytest.mark.parametrize("key", [k for k in CHAPTERS if k != "cost"])
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_chapters_render_within_the_width(key: str, lang: str) -> None:
    result = chapter(key)
    text = rendered(lambda c: render_chapter(c, key, result, 8, 11, lang), 80)
    assert "8/11 · " in text
    assert max(cell_len(line) for line in text.splitlines()) <= 80


def test_demo_chapter_option(cli) -> None:  # noqa: ANN001
    res = cli("demo", "--chapter", "order", "--no-pause")
    assert res.code == 0 and "8/11 · Why positions matter" in res.out
    assert "1/11" not in res.out and "permutation-invariant" in res.out
    zh = cli("demo", "--chapter", "kvcache", "--lang", "zh")
    assert "9/11 · " in zh.out and "键值缓存" in zh.out.replace("\n", "")
    book = cli("demo", "--chapter", "query")
    assert "2/11 · " in book.out and "0.4419" in book.out
    cli("demo", "--chapter", "nope").assert_usage_error("unknown chapter 'nope'")


def test_demo_cost_chapter_is_quick(cli) -> None:  # noqa: ANN001
    res = cli("demo", "--chapter", "cost")
    assert res.code == 0 and "11/11 · " in res.out and "1,024" in res.out


def test_size_text() -> None:
    assert [size_text(v) for v in (512, 1536, 3 * 2**20)] == ["512 B", "1.5 KiB", "3.0 MiB"]


def test_lesson_commands_have_help_with_examples_without_torch(cli) -> None:  # noqa: ANN001
    import subprocess
    import sys

    code = ("import sys; sys.argv = ['attncli'] + sys.argv[1:]; "
            "from attncli.cli.main import execute; "
            "execute(); print('torch' in sys.modules)")
    for command in ("permute", "kvcache", "flash", "cost"):
        res = cli(command, "--help")
        assert res.code == 0 and "Examples" in res.out, command
        proc = subprocess.run([sys.executable, "-c", code, command, "--help"],
                              capture_output=True, text=True, timeout=600, check=False)
        assert proc.stdout.strip().splitlines()[-1] == "False", command
