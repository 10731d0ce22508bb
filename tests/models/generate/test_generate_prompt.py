"""generate counts the prompt: a prompt (or --system) past the model's positions is one line,
refused before it is tokenized where its bytes alone say so; the byte bound never refuses a text
that fits; the memory estimate counts the caches, the prompt's pass and the weights; the
prefill's mask is its rows only."""

from __future__ import annotations

import json
import time
from functools import cache
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import attncli
from attncli.errors import AttnCliError
from attncli.models.decoding import Shape
from attncli.models.family import ModelSpec, open_model
from attncli.models.generate import prompt as prompt_module
from attncli.models.generate.engine import check_length, generation_bytes, holds, prefill_bytes
from attncli.models.generate.prompt import _longest_token, build_prompt, check_text_fits
from attncli.models.generate.sampling import Sampling
from attncli.models.hf_tokens import source_tokenizer
from attncli.models.llama.decode import window_rows
from attncli.models.llama.model import window_mask
from tests.cli.test_cli_generate import TEMPLATE
from tests.gguf_fixtures import smollm2
from tests.llama_fixtures import save_family


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Llama checkpoint of 128 positions with a chat template."""
    folder = tmp_path_factory.mktemp("prompt") / "llama"
    save_family(folder, "llama", seed=21)
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"chat_template": TEMPLATE, "eos_token": "<|im_end|>"}))
    return folder


@pytest.fixture
def untokenized(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tokenizing the prompt fails the test: it must be refused before."""
    def never(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the prompt was tokenized")

    monkeypatch.setattr(prompt_module, "hf_tokenize", never)


@pytest.mark.parametrize(("prompt", "system", "raw"), [
    ("the cat " * 12_500, None, False),  # about 100,000 tokens' worth
    ("hi", "the cat " * 12_500, False), ("the cat " * 12_500, None, True)])
def test_a_prompt_far_past_the_positions_is_refused_before_tokenizing(
        tiny: Path, untokenized: None, prompt: str, system: str | None, raw: bool) -> None:
    model = open_model(str(tiny))
    if raw:
        model.tokens = None  # type: ignore[method-assign] # the raw path tokenizes with it
    with pytest.raises(AttnCliError, match=r"the model's 128 positions can hold") as got:
        build_prompt(model, str(tiny), prompt, system, raw)
    assert "\n" not in str(got.value)


def test_three_million_characters_through_the_api_are_one_line_fast(tiny: Path,
                                                                    untokenized: None) -> None:
    start = time.process_time()
    with pytest.raises(AttnCliError, match="3,000,0.. bytes, more than the model's 128"):
        attncli.generate("x" * 3_000_000, str(tiny))
    assert time.process_time() - start < 60  # CPU seconds, not wall: a bound, not a timing


def test_a_prompt_just_past_the_positions_is_counted_in_tokens(tiny: Path) -> None:
    with pytest.raises(AttnCliError, match=r"the prompt's \d+ tokens and --max-new-tokens 8 go "
                                           "past the model's 128 positions"):
        attncli.generate("a b " * 40, str(tiny), max_new_tokens=8)


def test_smollm2_refuses_twenty_thousand_tokens() -> None:
    with pytest.raises(AttnCliError, match="go past the model's 8,192 positions"):
        attncli.generate("the cat " * 10_000, str(smollm2()), max_new_tokens=2)


@cache
def _vocabulary(path: Path) -> tuple[Any, int, int]:
    """The checkpoint's tokenizer, its longest token's bytes and its normalizer's shrink."""
    source = open_model(str(path)).vocabulary()
    return (source_tokenizer(source), *_longest_token(source))


@pytest.mark.parametrize("which", ["tiny", "smollm2"])
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=st.text(min_size=1, max_size=400))
def test_the_byte_bound_never_refuses_a_text_that_fits(tiny: Path, which: str,
                                                       text: str) -> None:
    """Every text's tokens spell it: its bytes are at most tokens × the longest token's bytes
    × the normalizer's shrink, so a text the bound refuses has more tokens than positions."""
    tokenizer, longest, shrink = _vocabulary(tiny if which == "tiny" else smollm2())
    tokens = len(tokenizer.encode(text, add_special_tokens=False).ids)
    assert len(text.encode("utf-8", "surrogatepass")) <= max(tokens, 1) * longest * shrink


def test_the_bound_reads_no_vocabulary_for_a_short_text(tiny: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prompt_module, "_longest_token", lambda source: 1 / 0)
    check_text_fits("x" * 128, open_model(str(tiny)), None)  # 128 bytes: 128 tokens at most


def _spec_model(num_heads: int, kv_heads: int, head_dim: int, d_model: int, layers: int,
                token_macs: int, row_bytes: int = 0, held_bytes: int = 0) -> Any:
    """A model as the estimates read it: its spec and its decode shape."""
    spec = ModelSpec(architecture="x", n_layer=layers, num_heads=num_heads, kv_heads=kv_heads,
                     head_dim=head_dim, d_model=d_model, windows=(None,) * layers,
                     positions=None)
    shape = Shape(layers=layers, d_in=d_model, d_out=num_heads * head_dim,
                  token_macs=token_macs, held_bytes=held_bytes, row_bytes=row_bytes)
    return SimpleNamespace(spec=spec, traits=SimpleNamespace(max_tokens=None),
                           decode_shape=lambda: shape)


# The Llama 3.1 8B's sizes as the estimates read them, held as a Q4_K_M file.
LLAMA_8B = {"num_heads": 32, "kv_heads": 8, "head_dim": 128, "d_model": 4096, "layers": 32,
            "token_macs": 218_103_808, "row_bytes": 16 * 14_336, "held_bytes": 4_916_520_448}


@pytest.mark.parametrize("held_bytes", [0, 10**9], ids=["float32", "blocks"])
def test_the_estimate_counts_the_caches_the_prompts_pass_and_a_layer(
        held_bytes: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The need is every step's kept weights, every layer's float32 keys and values of prompt
    and answer, the prompt's pass (the widest span's work, a chunk's float64 scores over every
    key in four stages, a dense product's scratch where the weights are a file's blocks, each
    row's stream, queries and float64 keys) and one layer's float32 weights: half the memory
    available holds it to the byte, and a byte less refuses it in one line."""
    from attncli import machine
    from attncli.models.decoding import PREFILL_ROWS, prefill_queries

    model = _spec_model(8, 2, 4, 32, 3, token_macs=5_000, row_bytes=1000,
                        held_bytes=held_bytes)
    prompt_len, n = 10_000, 2
    tokens = prompt_len + n
    kept = 3 * 8 * n * tokens * 4  # layers × heads × steps × keys, float32
    cache = 2 * 3 * 2 * 4 * tokens * 4  # keys and values: layers × kv_heads × head_dim
    span = max(PREFILL_ROWS, (128 << 20) // 1000) * 1000  # 10,000 rows: one span of them all
    assert span > prompt_len * 1000
    scores = 4 * 8 * 8 * prefill_queries(8, prompt_len) * prompt_len
    scratch = 4 * 5_000 if held_bytes else 0  # a layer's weights, less than DENSE_PIECE
    rows = prompt_len * (4 * (32 + 32) + 8 * 2 * 4)
    work = prompt_len * 1000 + scores + scratch + rows
    assert generation_bytes(model, prompt_len, n) == kept + cache + work
    need = kept + cache + work + 4 * 5_000  # and one layer's float32 weights
    monkeypatch.setattr(machine, "available_bytes", lambda: 2 * need)
    check_length(model, prompt_len, Sampling(max_new_tokens=n))
    monkeypatch.setattr(machine, "available_bytes", lambda: 2 * need - 2)
    with pytest.raises(AttnCliError, match="more than half") as refused:
        check_length(model, prompt_len, Sampling(max_new_tokens=n))
    assert "\n" not in str(refused.value) and "keys and values" in str(refused.value)


def test_a_prefill_without_spans_counts_its_whole_stages() -> None:
    """GPT-2's prefill takes the prompt at once: its (heads, T, T) float32 scores, masked
    scores and softmax are counted whole (150 MB for GPT-2's 12 heads at 1,024 tokens)."""
    spanned = _spec_model(12, 12, 64, 768, 12, token_macs=7_077_888, row_bytes=1)
    whole = _spec_model(12, 12, 64, 768, 12, token_macs=7_077_888)
    extra = prefill_bytes(whole, 1024) - prefill_bytes(spanned, 1024)
    assert extra == 3 * 4 * 12 * 1024 * 1024 - 1024  # the stages, less the 1-byte rows' span


def test_the_8bs_prompt_pass_is_bounded_but_for_its_rows() -> None:
    """On the 8B's sizes the prompt's pass beside the weights and the caches is about 0.3 GB
    at 2,000 tokens (a span of 500 rows' feed-forward, a chunk of scores, a 64 MB scratch, the
    rows), where the whole prompt's feed-forward alone held 0.46 GB; past that it grows by
    each row's stream, queries and keys, under a fifth of the row's cache."""
    model = _spec_model(**LLAMA_8B)
    at_2000 = prefill_bytes(model, 2000)
    assert at_2000 < 300 * 10**6
    assert 16 * 14_336 * 2000 > 450 * 10**6
    per_row = (prefill_bytes(model, 8000) - at_2000) / 6000
    cache_row = 2 * 32 * 8 * 128 * 4  # every layer's float32 keys and values
    assert per_row < cache_row / 5


def test_held_counts_the_generation_beside_the_weights(monkeypatch: pytest.MonkeyPatch) -> None:
    """A held decoder's weights and what the generation needs beside them fit half the memory
    available, or each step streams its layers (an 8B Q4_K's 4.9 GB and a 2,000-token
    prompt's 0.5 GB cache)."""
    from attncli import machine

    model = _spec_model(**LLAMA_8B)
    beside = generation_bytes(model, 2000, 16)
    assert beside > 2 * 32 * 8 * 128 * 4 * 2016  # the caches at least
    monkeypatch.setattr(machine, "available_bytes", lambda: 2 * (4_916_520_448 + beside))
    assert holds(model, beside)
    assert not holds(model, beside + 2)
    assert holds(model)  # the weights alone would fit


@pytest.mark.parametrize("window", [None, 1, 7, 300])
def test_the_prefill_builds_only_its_chunks_mask_rows(window: int | None) -> None:
    for num_tokens in (1, 9, 600):
        for start in range(0, num_tokens, 256):
            end = min(start + 256, num_tokens)
            assert torch.equal(window_rows(start, end, num_tokens, window),
                               window_mask(num_tokens, window)[start:end])
