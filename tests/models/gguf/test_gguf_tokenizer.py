"""tokenizer.json built from GGUF metadata: the same ids as transformers' GGUF tokenizer.

One known difference, on purpose: for `tokenizer.ggml.pre = smollm` llama.cpp (llama-vocab.cpp)
splits every digit off before the GPT-2 regex, as SmolLM2's own tokenizer.json does (Digits with
individual_digits), while transformers' GGUF path uses the plain GPT-2 split. The real SmolLM2
vocabulary has no multi-digit tokens so both agree there; the tiny vocabulary has a "12" merge, so
its digit texts are checked against a tokenizer built from `tokenizers` parts the way SmolLM2's
tokenizer.json is built.
"""

from __future__ import annotations

from pathlib import Path

import gguf
import pytest
from tokenizers import Tokenizer, models, pre_tokenizers

from attncli.errors import AttnCliError
from attncli.models.sources.gguf import open_gguf
from tests.gguf_fixtures import smollm2, write_model

DIGITS = "digits 1234567 3.14159 12 1"
TEXTS = ["Hello world, it's the 2024 release!", "  spaces   and\ttabs\n\nnew lines ",
         "日本語のテキスト 中文 한국어", DIGITS, "emoji 👍🏽 🎉 👨‍👩‍👧",
         "<|im_start|>user\nhi<|im_end|>", "don't I'LL we've", "hello world the", ""]


def _theirs(path: Path) -> object:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)


def _ours(path: Path) -> Tokenizer:
    text = open_gguf(path).tokenizer_json()
    assert text is not None
    return Tokenizer.from_str(text)


def _smollm_reference(path: Path) -> Tokenizer:
    """SmolLM2's tokenizer.json shape: Digits(individual), then byte-level GPT-2."""
    from gguf import GGUFReader

    fields = GGUFReader(str(path)).fields
    tokens = fields["tokenizer.ggml.tokens"].contents()
    merges = [tuple(m.split(" ")) for m in fields["tokenizer.ggml.merges"].contents()]
    reference = Tokenizer(models.BPE({t: i for i, t in enumerate(tokens)}, merges))
    reference.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    return reference


@pytest.mark.parametrize(("tokenizer", "pre", "add_bos"),
                         [("gpt2", "smollm", None), ("gpt2", "gpt-2", True),
                          ("gpt2", "qwen2", False), ("gpt2", "default", None),
                          ("gpt2", "llama-bpe", None), ("gpt2", "llama3", True),
                          ("llama", "", None), ("llama", "", False)])
def test_ids_match_transformers(tmp_path: Path, tokenizer: str, pre: str,
                                add_bos: bool | None) -> None:
    path = tmp_path / "m.gguf"
    write_model(path, "llama", gguf.GGMLQuantizationType.F32, tokenizer=tokenizer, pre=pre,
                add_bos=add_bos)
    ours, theirs = _ours(path), _theirs(path)
    for text in TEXTS:
        if pre == "smollm" and text == DIGITS:
            assert ours.encode(text).ids == _smollm_reference(path).encode(text).ids
            continue
        if pre == "default" and any(ch.isdigit() for ch in text):
            continue  # transformers ignores "default"'s digit rules: the next test checks them
        assert ours.encode(text).ids == theirs(text)["input_ids"], text  # type: ignore[operator]


def test_bos_follows_the_file(tmp_path: Path) -> None:
    for add_bos in (True, False):
        path = tmp_path / f"{add_bos}.gguf"
        write_model(path, "llama", gguf.GGMLQuantizationType.F32, add_bos=add_bos)
        assert (_ours(path).encode("he").ids[0] == 1) is add_bos  # 1 is <|im_start|>, the BOS
    path = tmp_path / "sp.gguf"
    write_model(path, "llama", gguf.GGMLQuantizationType.F32, tokenizer="llama")
    assert _ours(path).encode("hello").ids[0] == 1  # SentencePiece files add BOS by default


def test_an_unknown_pre_tokenizer_is_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    write_model(path, "llama", gguf.GGMLQuantizationType.F32, pre="tekken")
    with pytest.raises(AttnCliError, match=r"pre-tokenizer 'tekken'.*knows default, gpt-2"):
        open_gguf(path).tokenizer_json()


@pytest.mark.slow
def test_smollm2_ids_match_transformers() -> None:
    path = smollm2()
    ours, theirs = _ours(path), _theirs(path)
    for text in TEXTS:
        assert ours.encode(text).ids == theirs(text)["input_ids"], text  # type: ignore[operator]


def test_a_gpt2_file_tokenises_with_its_own_vocabulary(cli, tmp_path: Path) -> None:
    """A gpt2-architecture GGUF carries its vocabulary: attncli uses it, not tiktoken's GPT-2
    (whose ids fall outside this file's 267-token vocabulary)."""
    path = tmp_path / "gpt2.gguf"
    write_model(path, "gpt2", gguf.GGMLQuantizationType.F32, pre="gpt-2")
    theirs = _theirs(path)
    for text in ("hello world the", "the 12 the 1"):
        doc = cli("run", text, "--model", str(path), "--json").json()
        assert [t["id"] for t in doc["tokens"]] == theirs(text)["input_ids"]  # type: ignore[operator]
        assert doc["config"]["tokenizer"]["file"] == path.name
    listed = cli("tokens", "the 12", "--model", str(path), "--json").json()
    assert [t["id"] for t in listed["tokens"]] == theirs("the 12")["input_ids"]  # type: ignore[operator]


def test_the_default_pre_tokenizer_splits_as_llama_cpp_does(tmp_path: Path) -> None:
    """llama.cpp's LLAMA_VOCAB_PRE_TYPE_DEFAULT applies four regexes in turn: punctuation runs,
    GPT-2's, digit runs, then runs of three digits. Worked by hand from that list (transformers'
    GGUF converter applies GPT-2's alone, so it is no reference here)."""
    path = tmp_path / "m.gguf"
    write_model(path, "llama", gguf.GGMLQuantizationType.F32, pre="default")
    pieces = [piece for piece, _ in _ours(path).pre_tokenizer.pre_tokenize_str(DIGITS)]
    assert pieces == ["digits", "Ġ", "123", "456", "7", "Ġ", "3", ".", "141", "59", "Ġ", "12",
                      "Ġ", "1"]
