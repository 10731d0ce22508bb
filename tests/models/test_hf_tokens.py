"""A checkpoint's tokenizer.json, streamed: the parts encode to the whole text's tokens, or the
text is encoded whole where the tokenizer's stages do not allow cutting it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attncli.models.hf_tokens import SPLIT_PATTERNS, hf_token_chunks, hf_tokenize, streams
from tests.llama_fixtures import byte_level_tokenizer, sentencepiece_tokenizer


def _variant(name: str) -> Any:
    """The test tokenizers, and what Llama 3, Qwen2 and others change in their stages."""
    from tokenizers import AddedToken, Regex, normalizers, pre_tokenizers

    tok = sentencepiece_tokenizer() if name.startswith("sp") else byte_level_tokenizer()
    if name in ("llama3", "qwen2"):
        pattern = SPLIT_PATTERNS[0 if name == "llama3" else 1]
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(pattern), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    if name in ("qwen2", "nfkc"):
        tok.normalizer = normalizers.NFC() if name == "qwen2" else normalizers.NFKC()
    if name == "prefix-space":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    if name == "sp-always":
        tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="always")
    if name == "added":
        tok.add_tokens([AddedToken("<tag>", special=False)])
    # Not streamed: these stages could give other tokens to a text cut before a space.
    if name == "rstrip":
        tok.add_tokens([AddedToken("<tag>", special=False, rstrip=True)])
    if name == "sp-legacy":  # Llama 2's own: the whole text is one word
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"),
                                               normalizers.Replace(" ", "▁")])
        tok.pre_tokenizer = None
    if name == "sp-nosplit":
        tok.pre_tokenizer = pre_tokenizers.Metaspace(split=False)
    if name == "other-split":
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(r"\w+|[^\w]+"), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    if name == "lowercase":
        tok.normalizer = normalizers.Lowercase()
    return tok


STREAMED = ["byte", "sp", "llama3", "qwen2", "nfkc", "prefix-space", "sp-always", "added"]
WHOLE = ["rstrip", "sp-legacy", "sp-nosplit", "other-split", "lowercase"]


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    found = {}
    for name in STREAMED + WHOLE:
        folder = tmp_path_factory.mktemp(name)
        _variant(name).save(str(folder / "tokenizer.json"))
        found[name] = folder
    return found


def test_which_tokenizers_stream(folders: dict[str, Path]) -> None:
    from attncli.models.hf_tokens import load_tokenizer

    assert {name for name, folder in folders.items()
            if streams(load_tokenizer(folder), False)} == set(STREAMED)


WORDS = ["The", " cat", " sat", "猫吃鱼", "，", "。", " 東京は", "🙂", "👩\u200d💻", " naïve",
         " café", "e\u0301", "\u00a8", " ", "  ", "\t", "\n", "\r\n", "\u3000", "\u00a0", "1234",
         "x'll",
         "<|begin|>", "<|end|>", "<s>", "<tag>", " <tag> ", "[bold]", "a" * 20]


@settings(max_examples=int(os.environ.get("ATTNCLI_HF_EXAMPLES", "60")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(words=st.lists(st.sampled_from(WORDS), max_size=30), special=st.booleans(),
       sizes=st.tuples(st.integers(1, 12), st.integers(1, 30)))
def test_streamed_tokens_equal_the_whole_texts(folders: dict[str, Path], words: list[str],
                                               special: bool, sizes: tuple[int, int]) -> None:
    text = "".join(words)
    for name, folder in folders.items():
        whole = hf_tokenize(folder, text, special)
        before, after, chunks = hf_token_chunks(folder, text, special, *sizes)
        lists = list(chunks)
        assert [p for chunk in lists for p in chunk] == whole.pieces, name
        assert (before, after) == (whole.before, whole.after), name
        if name in WHOLE:
            assert len(lists) == 1


def test_a_long_text_comes_in_pieces_from_the_first(folders: dict[str, Path]) -> None:
    text = "The cat sat on the mat. 猫吃鱼，狗吃肉。 " * 400
    for name in STREAMED:
        before, _, chunks = hf_token_chunks(folders[name], text, False, 50, 500)
        first = next(chunks)
        assert first[0].label == before[0] if before else True
        assert len(first) < 60 and sum(1 for _ in chunks) > 20, name


def test_the_json_lists_the_same_tokens(folders: dict[str, Path]) -> None:
    from unittest import mock

    from attncli.models.family import family_named
    from attncli.models.hf_tokens import model_tokens
    from attncli.models.sources.safetensors import SafetensorsSource

    text = "Emoji: 🙂 and naïve café. 東京は日本の首都です。 " * 300
    for name in ("byte", "sp", "rstrip"):
        # These folders hold only a tokenizer.json: no checkpoint to look up.
        held = (SafetensorsSource(folders[name]), family_named("llama"))
        with mock.patch("attncli.models.family.open_family", return_value=held):
            doc, _, _, (last, largest) = model_tokens(str(folders[name]), text, False)
        tokens = list(doc["tokens"])
        whole = hf_tokenize(folders[name], text)
        assert [t["id"] for t in tokens] == [p.id for p in whole.pieces]
        assert tokens[-1]["index"] <= last and max(t["id"] for t in tokens) <= largest
        assert doc["tokenizer"]["added_before"] == whole.before


def test_chatml_specials_follow_allow_special_and_the_files_padding_is_off(
        tmp_path: Path) -> None:
    """A byte-level tokenizer.json with <|im_start|> as a special token (SmolLM2's, Qwen's)
    that pads to 64 and truncates at 8: the text's own tokens, in one list or streamed, and
    <|im_start|> plain text unless allow_special; against the tokenizers library's encode."""
    from tokenizers import Tokenizer

    tok = byte_level_tokenizer()
    tok.add_special_tokens(["<|im_start|>"])
    tok.enable_padding(length=64, pad_id=0, pad_token="<pad>")
    tok.enable_truncation(8)
    tok.save(str(tmp_path / "tokenizer.json"))
    text = "<|im_start|>user The cat sat on the mat. 猫吃鱼 <|im_start|> " * 3
    reference = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    reference.no_padding()
    reference.no_truncation()
    special = reference.token_to_id("<|im_start|>")
    for allow in (False, True):
        reference.encode_special_tokens = not allow
        expected = reference.encode(text).ids
        assert len(expected) > 8 and (special in expected[1:]) == allow
        assert [p.id for p in hf_tokenize(tmp_path, text, allow).pieces] == expected
        _, _, chunks = hf_token_chunks(tmp_path, text, allow, 10, 20)
        assert [p.id for chunk in chunks for p in chunk] == expected


def test_text_no_tokenizer_encodes_is_named(folders: dict[str, Path]) -> None:
    """A lone surrogate (the API's, or a JSON escape's) is named where it is: the tokenizer's
    own refusal was "TextInputSequence must be str"."""
    from attncli.errors import AttnCliError

    with pytest.raises(AttnCliError, match=r"^the text is not valid UTF-8 \(a lone surrogate "
                                           r"\\udfff at character 2\)$"):
        hf_tokenize(folders["byte"], "ab\udfff")


def test_a_text_whose_encoding_would_not_fit_is_refused_before_encoding(
        folders: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """The tokenizers' Rust aborts the process (SIGABRT, no message) when an allocation fails:
    a 62 MB text did so under a 4 GB address-space limit in run, heads and tokens --model. The
    text is weighed first (200 bytes a byte; measured 150-195), against half the memory."""
    from attncli import machine
    from attncli.errors import AttnCliError
    from attncli.models import hf_tokens

    monkeypatch.setattr(hf_tokens, "CHECKED_CHARS", 4096)  # 1 MiB, a 4 s encoding, scaled down
    text = "the cat " * (hf_tokens.CHECKED_CHARS // 8 + 1)  # just past the size weighed
    monkeypatch.setattr(machine, "available_bytes", lambda: 2 * len(text) * 200 - 2)
    with pytest.raises(AttnCliError, match=r"^the tokenizer would hold about 200 bytes for each "
                                           r"of the text's 4,104 \(.+\), more than half the "
                                           r".+ available; give a shorter text$"):
        hf_tokenize(folders["byte"], text)
    monkeypatch.setattr(machine, "available_bytes", lambda: 2 * len(text) * 200)
    assert len(hf_tokenize(folders["byte"], text).pieces) > len(text) // 8
