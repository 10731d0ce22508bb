"""Every string exists in English and Chinese, with the same placeholders and the book's terms."""

from __future__ import annotations

import string

import pytest

from attncli.i18n import LANGS, STRINGS, resolve_lang, text

BOOK_TERMS = ("注意力分数", "注意力权重", "上下文向量", "因果掩码", "多头注意力")


def _fields(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


@pytest.mark.parametrize("key", sorted(STRINGS))
def test_both_languages_with_the_same_placeholders(key: str) -> None:
    en, zh = STRINGS[key]
    assert en.strip() and zh.strip()
    assert _fields(en) == _fields(zh), key
    assert en != zh or key.startswith("variant")


def test_chinese_uses_the_books_terms() -> None:
    chinese = " ".join(zh for _, zh in STRINGS.values())
    for term in BOOK_TERMS:
        assert term in chinese, term
    assert STRINGS["variant.multihead"][1] == "多头注意力"
    assert "因果掩码" in STRINGS["title.masked"][1]


def test_text_fills_placeholders_and_keeps_numbers() -> None:
    assert text("en", "step", k=2, n=9) == "Step 2 of 9"
    assert text("zh", "step", k=2, n=9) == "第 2 步（共 9 步）"
    assert "d_k = 4" in text("zh", "title.scaled", d_k=4, root="2.0000")
    assert LANGS == ("en", "zh")


@pytest.mark.parametrize(("option", "env", "expected"), [
    (None, {}, "en"),
    (None, {"LANG": "zh_CN.UTF-8"}, "zh"),
    (None, {"LANG": "zh_TW.UTF-8"}, "zh"),
    (None, {"LANG": "en_US.UTF-8"}, "en"),
    (None, {"LANG": "zh_CN.UTF-8", "LC_ALL": "C"}, "en"),
    (None, {"LANG": "C", "LC_ALL": "zh_CN.UTF-8"}, "zh"),
    (None, {"LC_ALL": "", "LANG": "zh_CN"}, "zh"),
    (None, {"LC_MESSAGES": "zh_CN.UTF-8", "LANG": "en_US.UTF-8"}, "zh"),
    ("en", {"LANG": "zh_CN.UTF-8"}, "en"),
    ("zh", {}, "zh"),
])
def test_language_from_option_then_locale(option: str | None, env: dict[str, str],
                                          expected: str) -> None:
    assert resolve_lang(option, env) == expected
