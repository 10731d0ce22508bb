"""Occlusion on a quantized GGUF, where the masked passes multiply on the dequantized matrices
(dense_rows) and run in flat batches of spans from different first positions: equal to
transformers' forward over the same GGUF file with the span's keys masked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gguf
import pytest
import torch

from attncli.models.family import open_model
from attncli.models.generate import occlusion as occlusion_module
from attncli.models.generate.occlusion import masked, occlusion
from tests.gguf_fixtures import write_model
from tests.models.gguf.test_gguf_cli import gguf_parsed_once
from tests.tolerance import assert_near

PROMPT = [5, 71, 200, 13, 97, 150, 31, 64]
ANSWER = [260, 8, 120, 44, 9, 77]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    from transformers import AutoModelForCausalLM

    path = tmp_path_factory.mktemp("occlusion") / "tiny-llama.gguf"
    write_model(path, "llama", gguf.GGMLQuantizationType.Q8_0, add_bos=True)
    with gguf_parsed_once():
        hf = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name,
                                                  attn_implementation="eager",
                                                  dtype=torch.float32)
    return path, hf.eval()


def _logprobs(hf: Any, mask: torch.Tensor) -> torch.Tensor:
    """transformers' log-probabilities (A,) of the answer, keys hidden where mask is False."""
    p, a = len(PROMPT), len(ANSWER)
    with torch.no_grad():
        logits = hf(torch.tensor([PROMPT + ANSWER]),
                    attention_mask=torch.where(mask, 0.0, -torch.inf)[None, None]).logits
    logprobs = torch.log_softmax(logits[0, p - 1:p + a - 1].double(), dim=-1)  # (A, vocab)
    return logprobs.gather(1, torch.tensor(ANSWER)[:, None])[:, 0]  # (A,)


@pytest.mark.parametrize("rows", [8192, 30])  # one batch; batches of a few spans each
def test_occlusion_on_a_gguf_equals_masking_in_transformers(
        tiny: tuple[Path, Any], rows: int, monkeypatch: pytest.MonkeyPatch) -> None:
    path, hf = tiny
    monkeypatch.setattr(occlusion_module, "BATCH_ROWS", rows)
    spans = [[6, 7], [1], [3, 4, 5], [2]]  # words, out of order, of different first positions
    drops = occlusion(open_model(str(path)), PROMPT, ANSWER, spans)
    n = len(PROMPT) + len(ANSWER)
    causal = torch.ones(n, n, dtype=torch.bool).tril()  # (T, T)
    base = _logprobs(hf, causal)
    for span in spans:
        want = base - _logprobs(hf, causal & masked(n, span))  # (A,)
        assert want.abs().max() > 1e-4  # the span mattered: the comparison means something
        for j in span:
            assert_near(torch.tensor([row[j] for row in drops], dtype=torch.float64), want,
                        atol=2e-5)  # a difference of two log-probs: twice the bound
