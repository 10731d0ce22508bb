"""The real SmolLM2 GGUF: a given answer teacher-forced equals transformers' full forward over
the templated prompt + answer (its GGUF loader), weights row by row and log-probabilities, and
the greedy answer given back equals generate's own steps (skipped where the file is absent)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from attncli.models.generate.run import generate_model
from attncli.models.generate.sampling import Sampling
from attncli.records.asking import GenerationRequest
from tests.gguf_fixtures import smollm2
from tests.models.gguf.test_gguf_cli import _transformers
from tests.tolerance import assert_near

pytestmark = pytest.mark.slow

CHAT = [{"role": "system", "content": "Answer in one sentence."},
        {"role": "user", "content": "What is the capital of France?"},
        {"role": "assistant", "content": "Paris."},
        {"role": "user", "content": "And of Italy?"}]


@pytest.fixture(scope="module")
def hf() -> Any:
    """transformers' model of the file, loaded once for the module's two comparisons with it
    (each loaded its own: 6 s of CPU)."""
    return _transformers(smollm2())


def test_a_given_answer_equals_transformers_full_forward(hf: Any) -> None:
    path = smollm2()
    result = generate_model(GenerationRequest(str(path), messages=CHAT,
                                              answer="The capital of Italy is Milan.",
                                              view="raw", exclude_sinks=False))
    assert result.given_answer and result.stopped == "given"
    assert [t.role for t in result.turns] == ["system", "user", "assistant", "user"]
    ids = [t.id for t in result.prompt + result.answer]
    p = len(result.prompt)
    with torch.no_grad():
        out = hf(torch.tensor([ids]), output_attentions=True)
    logprobs = torch.log_softmax(out.logits[0].double(), dim=-1)  # (T, vocab)
    for s, step in enumerate(result.steps):
        ref = torch.stack([a[0, :, p - 1 + s, :p + s] for a in out.attentions])  # (30, 9, P+s)
        assert_near(torch.from_numpy(result.weights[s]), ref)
        # the bound this test has always used: 1e-5 flat
        assert_near(step.logprob, float(logprobs[p - 1 + s, step.id]), rtol=0)
    assert any((step.rank or 0) > 1 for step in result.steps)  # Milan is not the model's choice


def test_the_greedy_answer_given_back_equals_generates_steps() -> None:
    path = str(smollm2())
    made = generate_model(GenerationRequest(path, "Name a fruit.", view="raw", exclude_sinks=False,
                                            sampling=Sampling(max_new_tokens=6)))
    text = "".join(t.text for t in made.answer if t.id not in made.stop_ids)
    given = generate_model(GenerationRequest(path, "Name a fruit.", answer=text, view="raw",
                                             exclude_sinks=False))
    n = len(given.answer)
    assert [t.id for t in given.answer] == [t.id for t in made.answer][:n]
    for s in range(n):
        assert given.steps[s].rank == 1
        assert_near(torch.from_numpy(given.weights[s]), torch.from_numpy(made.weights[s]))
        # the bound this test has always used: 1e-5 flat
        assert_near(given.steps[s].logprob, made.steps[s].logprob, rtol=0)


def test_occlusion_by_word_equals_masking_the_word_in_transformers(hf: Any) -> None:
    """The batched masked passes on the real file (dense products on its Q4_1/Q8_0 matrices):
    each word's drop equals transformers' forward with the word's keys masked."""
    from attncli.models.generate.occlusion import masked

    path = smollm2()
    result = generate_model(GenerationRequest(
        str(path), messages=CHAT, answer="The capital of Italy is Milan.", view="raw",
        exclude_sinks=False, also=("occlusion",), occlude="word"))
    assert result.occlusion is not None and result.occluded is not None
    ids = [t.id for t in result.prompt + result.answer]
    p, a, n = len(result.prompt), len(result.answer), len(ids)
    causal = torch.ones(n, n, dtype=torch.bool).tril()  # (T, T)
    chosen = torch.tensor(ids[p:])[:, None]  # (A, 1)

    def logprobs(mask: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            logits = hf(torch.tensor([ids]),
                        attention_mask=torch.where(mask, 0.0, -torch.inf)[None, None]).logits
        return torch.log_softmax(logits[0, p - 1:p + a - 1].double(), dim=-1).gather(
            1, chosen)[:, 0]  # (A,)

    base = logprobs(causal)
    drops = torch.tensor(result.occlusion, dtype=torch.float64)  # (A, P)
    spans = result.occluded.spans
    for span in spans[::3]:  # every third word: a third of the masked forwards
        want = base - logprobs(causal & masked(n, span))  # (A,)
        assert_near(drops[:, span[0]], want, atol=2e-5)  # a difference of two log-probs
