"""Sampling settings: checked in one line each; temperature, top-k and top-p leave the logits as
transformers' warpers do; a seed reproduces a sampled answer."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from attncli.errors import AttnCliError
from attncli.models.family import open_model
from attncli.models.generate.engine import decode
from attncli.models.generate.sampling import Sampling, warped, with_seed
from tests.llama_fixtures import save_family
from tests.tolerance import assert_near


@pytest.mark.parametrize(("temperature", "top_k", "top_p"),
                         [(1.0, 0, 1.0), (0.7, 0, 1.0), (1.3, 5, 1.0), (1.0, 0, 0.8),
                          (0.5, 10, 0.9), (2.0, 1, 0.3), (1.0, 0, 1e-6)])
def test_warped_logits_match_transformers_warpers(temperature: float, top_k: int,
                                                  top_p: float) -> None:
    from transformers.generation.logits_process import (
        TemperatureLogitsWarper,
        TopKLogitsWarper,
        TopPLogitsWarper,
    )

    torch.manual_seed(7)
    logits = torch.randn(1, 300) * 3
    ref = logits.clone()
    if temperature != 1.0:
        ref = TemperatureLogitsWarper(temperature)(None, ref)
    if top_k:
        ref = TopKLogitsWarper(top_k)(None, ref)
    if top_p < 1.0:
        ref = TopPLogitsWarper(top_p)(None, ref)
    got = warped(logits[0], Sampling(sample=True, temperature=temperature, top_k=top_k,
                                     top_p=top_p))
    assert torch.equal(torch.isinf(got), torch.isinf(ref[0]))
    kept = ~torch.isinf(got)
    assert_near(got[kept], ref[0][kept])


@pytest.mark.parametrize(("settings", "named"), [
    ({"max_new_tokens": 0}, "--max-new-tokens"), ({"max_new_tokens": True}, "--max-new-tokens"),
    ({"temperature": 0.0}, "--temperature"), ({"temperature": float("nan")}, "--temperature"),
    ({"top_k": -1}, "--top-k"), ({"top_p": 0.0}, "--top-p"), ({"top_p": 1.5}, "--top-p"),
    ({"seed": -1}, "--sample-seed"), ({"seed": 2**64}, "--sample-seed"),
    ({"top_p": 0.9}, "--top-p applies with --sample only"),
    ({"seed": 0}, "--sample-seed applies with --sample only")])
def test_bad_settings_are_one_line_naming_the_option(settings: dict, named: str) -> None:
    with pytest.raises(AttnCliError, match=named) as caught:
        Sampling(**settings)
    assert "\n" not in str(caught.value)


def test_with_seed_records_a_seed_only_when_sampling() -> None:
    assert with_seed(Sampling()).seed is None
    seeded = with_seed(Sampling(sample=True))
    assert isinstance(seeded.seed, int) and seeded.to_dict()["seed"] == seeded.seed
    assert with_seed(Sampling(sample=True, seed=5)).seed == 5


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("sampling") / "llama"
    save_family(folder, "llama", seed=11)
    return folder


def _answer(folder: Path, sampling: Sampling) -> list[int]:
    model = open_model(str(folder))
    return [s.token_id for s in decode(model, [5, 71, 200, 13], sampling, frozenset())]


def test_a_seed_reproduces_a_sampled_answer(tiny: Path) -> None:
    settings = Sampling(max_new_tokens=12, sample=True, temperature=1.5, seed=42)
    first = _answer(tiny, settings)
    assert _answer(tiny, settings) == first
    others = {tuple(_answer(tiny, Sampling(max_new_tokens=12, sample=True, temperature=1.5,
                                           seed=seed))) for seed in (1, 2, 3)}
    assert others != {tuple(first)}  # the seed decides the draw


def test_top_k_1_samples_the_greedy_answer(tiny: Path) -> None:
    greedy = _answer(tiny, Sampling(max_new_tokens=8))
    assert _answer(tiny, Sampling(max_new_tokens=8, sample=True, top_k=1, seed=3)) == greedy
