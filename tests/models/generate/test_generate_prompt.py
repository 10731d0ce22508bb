"""generate counts the prompt: a prompt (or --system) past the model's positions is one line,
refused before it is tokenized where its bytes alone say so; the byte bound never refuses a text
that fits; the memory estimate counts the prompt's pass; the prefill's mask is its rows only."""

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
from attncli.models.family import ModelSpec, open_model
from attncli.models.generate import prompt as prompt_module
from attncli.models.generate.engine import check_length
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


def test_the_estimate_counts_the_prompts_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the kept weights and caches need fits; the prompt's chunk of float64 scores over
    every key (4 copies of heads × 256 × P × 8 bytes) does not: refused."""
    from attncli import machine

    spec = ModelSpec(architecture="x", n_layer=1, num_heads=8, kv_heads=8, head_dim=4,
                     d_model=32, windows=(None,), positions=None)
    model: Any = SimpleNamespace(spec=spec, traits=SimpleNamespace(max_tokens=None))
    prompt_len, n = 10_000, 1
    linear = (8 * n * (prompt_len + n) + 2 * 8 * 4 * (prompt_len + n)) * 4
    monkeypatch.setattr(machine, "available_bytes", lambda: 4 * linear)
    check_length(model, 100, Sampling(max_new_tokens=n))
    with pytest.raises(AttnCliError, match="more than half"):
        check_length(model, prompt_len, Sampling(max_new_tokens=n))


@pytest.mark.parametrize("window", [None, 1, 7, 300])
def test_the_prefill_builds_only_its_chunks_mask_rows(window: int | None) -> None:
    for num_tokens in (1, 9, 600):
        for start in range(0, num_tokens, 256):
            end = min(start + 256, num_tokens)
            assert torch.equal(window_rows(start, end, num_tokens, window),
                               window_mask(num_tokens, window)[start:end])
