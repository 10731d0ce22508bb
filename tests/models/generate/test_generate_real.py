"""The real SmolLM2-135M-Instruct Q4_1 GGUF answers as transformers' generate does (its GGUF
loader), with and without the chat template, and each step's weights are the step's own
(skipped, with the path it looked for, where the file has not been fetched)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from attncli.models.family import open_model
from attncli.models.generate.run import generate_model
from attncli.models.generate.sampling import Sampling
from attncli.records.asking import GenerationRequest
from attncli.records.generation import GenerateView
from tests.gguf_fixtures import smollm2
from tests.models.gguf.test_gguf_cli import _transformers, gguf_parsed_once
from tests.tolerance import assert_near

# The real SmolLM2 against transformers' own generate: slow (make check leaves it to make test).
pytestmark = pytest.mark.slow

N = 10
CASES = [("What is the capital of France?", False), ("Write one word: a colour.", False),
         ("The three primary colours are", True)]  # (prompt, raw)


@pytest.fixture(scope="module")
def real() -> tuple[Path, Any, Any]:
    """The file, transformers' model of it and transformers' tokenizer of it, the GGUF parsed
    once for both (each from_pretrained parsed it again: 5 s of CPU)."""
    from transformers import AutoTokenizer

    path = smollm2()
    with gguf_parsed_once():
        model = _transformers(path)
        tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    return path, model, tokenizer


@pytest.mark.parametrize(("prompt", "raw"), CASES)
def test_greedy_answer_and_weights_equal_transformers_generate(real: tuple[Path, Any, Any],
                                                               prompt: str, raw: bool) -> None:
    path, hf, _ = real
    result = generate_model(GenerationRequest(str(path), prompt, raw=raw, view="raw",
                                              exclude_sinks=False,
                                              sampling=Sampling(max_new_tokens=N)))
    ids = [t.id for t in result.prompt]
    assert result.template.used is (not raw)
    out = hf.generate(torch.tensor([ids]), do_sample=False, max_new_tokens=N,
                      output_attentions=True, return_dict_in_generate=True,
                      eos_token_id=result.stop_ids, pad_token_id=result.stop_ids[0])
    assert [t.id for t in result.answer] == out.sequences[0, len(ids):].tolist()
    assert result.stopped == ("eos" if result.answer[-1].id in result.stop_ids
                              else "max_new_tokens")
    for s, layers in enumerate(out.attentions):
        ref = torch.stack([a[0, :, -1, :] for a in layers])  # (30, 9, P + s)
        assert_near(torch.from_numpy(result.weights[s]), ref)


def test_the_chat_template_makes_the_prompt_transformers_tokenizer_makes(
        real: tuple[Path, Any, Any]) -> None:
    path, _, tokenizer = real
    messages = [{"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Name a fruit."}]
    want = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    want = want["input_ids"] if isinstance(want, dict) or hasattr(want, "keys") else want
    result = generate_model(GenerationRequest(str(path), "Name a fruit.", system="Be brief.",
                                              sampling=Sampling(max_new_tokens=1),
                                              view="raw", exclude_sinks=False))
    assert [t.id for t in result.prompt] == list(want)
    assert result.given == tokenizer.apply_chat_template(messages, add_generation_prompt=True,
                                                         tokenize=False)


def test_steps_are_rows_of_the_teacher_forced_pass_and_views_add_up() -> None:
    path = smollm2()
    result = generate_model(GenerationRequest(str(path), "What is 2 + 2?", view="raw",
                                              exclude_sinks=False,
                                              sampling=Sampling(max_new_tokens=6)))
    ids = [t.id for t in result.prompt + result.answer]
    every = open_model(str(path)).all_layers(ids)  # (30, 9, T, T)
    p = len(result.prompt)
    for s, weights in enumerate(result.weights):
        assert_near(torch.from_numpy(weights), every[:, :, p - 1 + s, :p + s])
    view = GenerateView()
    for s in range(len(result.answer)):
        row = result.row(s, view)
        assert_near(row.sum(), 1)
        assert not row[result.sinks].any()
        raw = result.row(s, GenerateView(exclude_sinks=False))
        assert_near(raw.sum(), 1)  # the mean of rows that each sum to 1
    to_prompt, to_answer = result.shares(view)
    assert_near(to_prompt + to_answer, 1)
