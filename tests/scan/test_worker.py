"""scan's worker: short documents run together, layer by layer (each layer's weights read
once), and each document's heads equal its own pass's: on the toy GPT-2, on a tiny checkpoint of
every decoder family (windows, per-length RoPE, NoPE layers, parallel blocks), against
transformers too, and on the real SmolLM2."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import torch

from attncli.core.request import Measure, Request
from attncli.models.family import ManyTexts
from attncli.models.heads import HeadsPass, heads_pass, texts_passes
from attncli.models.run import open_checked
from attncli.scan import worker
from attncli.scan.worker import Ready, ScanSettings, Scorer, packs
from tests.conftest import ROOT
from tests.family_fixtures import FAMILY_CASES, reference, save_decoder
from tests.gguf_fixtures import smollm2
from tests.llama_fixtures import FAMILIES, save_family
from tests.tolerance import assert_near

TOY = str(ROOT / "samples" / "toy-gpt2")
TOL = {"atol": 1e-5, "rtol": 1e-5}
TEXTS = ["The cat sat", "Alice went to the market and Alice bought bread and went home",
         "one two three four one two three four one two three four five six seven",
         "a b", "Your journey starts with one step", "x"]


def _same_pass(got: HeadsPass, want: HeadsPass) -> None:
    """Every layer's weights, scores and sink of got are want's, within the house tolerance."""
    assert len(got.weights) == len(want.weights)
    for mine, theirs in zip(got.weights, want.weights, strict=True):
        assert_near(mine, theirs, **TOL)
    for mine, theirs in zip(got.scores, want.scores, strict=True):
        assert mine.keys() == theirs.keys()
        for name in mine:
            assert_near(mine[name], theirs[name], **TOL)
    for mine, theirs in zip(got.sinks, want.sinks, strict=True):
        assert mine.keys() == theirs.keys()
        for name, value in mine.items():
            assert_near(value, theirs[name], equal_nan=True, msg=name)  # None on both sides


def _alone(model: Any, texts: list[list[int]]) -> list[HeadsPass]:
    n_layer = model.spec.n_layer
    return [heads_pass(model, ids, 0, n_layer, Measure.weights, None) for ids in texts]


def test_texts_run_together_equal_their_own_passes_on_the_toy_gpt2() -> None:
    model = open_checked(Request(text="", model=TOY))
    assert isinstance(model, ManyTexts)
    texts = [model.tokens(Request(text=t, model=TOY)).ids for t in TEXTS if len(t) > 1]
    together = texts_passes(model, texts, model.spec.n_layer)
    for got, want in zip(together, _alone(model, texts), strict=True):
        _same_pass(got, want)


def test_a_batch_scores_as_one_document_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    scorer = Scorer(ScanSettings(model=TOY, max_tokens=12))
    batch = [(f"d{k}", text, None, False) for k, text in enumerate(TEXTS)]
    batch += [("unreadable", None, "not UTF-8 (byte 3)", False),
              ("long", TEXTS[1] * 30, None, True)]
    together = scorer.score_batch(batch)
    monkeypatch.setattr(worker, "PACK_TOKENS", 1)  # every document a pack of its own
    alone = scorer.score_batch(batch)
    assert [(d["document"], d["status"], d["reason"], d["tokens"]) for d in together] == \
        [(d["document"], d["status"], d["reason"], d["tokens"]) for d in alone]
    assert [(d["status"], d["tokens"]) for d in together] == [
        ("scored", 3), ("scored", 12), ("cut", 12), ("scored", 2), ("scored", 6),
        ("skipped", 1), ("skipped", 0), ("cut", 12)]
    for mine, theirs in zip(together, alone, strict=True):
        for name, values in mine["rows"].items():
            if name in ("document", "layer", "head"):
                assert values == theirs["rows"][name]
            else:
                assert_near(values, theirs["rows"][name], msg=name)


def test_packs_keep_order_and_the_token_budget() -> None:
    ready = [Ready(f"d{k}", [0] * n, "scored", k) for k, n in enumerate([3, 4, 9, 2, 2, 20])]
    got = [[d.id for d in pack] for pack in packs(ready, 9)]
    assert got == [["d0", "d1"], ["d2"], ["d3", "d4"], ["d5"]]  # a longer one alone


def _tokens(folder: Path, text: str) -> list[int]:
    from tokenizers import Tokenizer

    return list(Tokenizer.from_file(str(folder / "tokenizer.json")).encode(text).ids)


FAMILY_NAMES = [*FAMILIES, *FAMILY_CASES]
# Lengths around each family's feature: Mistral's window 5, Gemma's 4, Phi-3's longrope
# (short factors up to 8 tokens, long ones past it), so a batch mixes both sides.
FAMILY_TEXTS = ["The", "The cat sat on the mat because it was tired.",
                "Attention is all you need; rotary position embeddings turn queries and keys.",
                "猫吃鱼", "Your journey starts with one step."]


@pytest.mark.slow
@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_texts_run_together_equal_their_own_passes_and_transformers(
        tmp_path: Path, name: str) -> None:
    folder = tmp_path / name
    hf = (save_family(folder, name, seed=5) if name in FAMILIES
          else save_decoder(folder, name, seed=5))
    model = open_checked(Request(text="", model=str(folder)))
    assert isinstance(model, ManyTexts)
    texts = [_tokens(folder, text) for text in FAMILY_TEXTS]
    assert min(map(len, texts)) <= 4 < 9 < max(map(len, texts))  # both sides of each feature
    together = texts_passes(model, texts, model.spec.n_layer)
    for ids, got, want in zip(texts, together, _alone(model, texts), strict=True):
        _same_pass(got, want)
        ref = reference(hf, ids)["attentions"]  # transformers' float32 eager pass
        exact = reference(copy.deepcopy(hf).double(), ids)["attentions"]  # and in float64
        for layer, weights in enumerate(got.weights):
            # Within TOL of float64, widened by as much as transformers' float32 misses it.
            slack = float((ref[layer].double() - exact[layer]).abs().max())
            assert_near(weights.double(), exact[layer], atol=TOL["atol"] + slack,
                         rtol=TOL["rtol"])


@pytest.mark.slow
def test_texts_run_together_equal_their_own_passes_on_smollm2() -> None:
    path = str(smollm2())
    model = open_checked(Request(text="", model=path))
    lines = ["The quick brown fox jumps over the lazy dog.", "猫吃鱼 42", "Hello there",
             "Alice went to the market, and Alice bought bread before she went home."]
    texts = [model.tokens(Request(text=line, model=path)).ids for line in lines]
    torch.set_num_threads(1)
    together = texts_passes(model, texts, model.spec.n_layer)
    for got, want in zip(together, _alone(model, texts), strict=True):
        _same_pass(got, want)


def test_a_document_whose_pass_does_not_fit_is_skipped_saying_why(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A document's pass keeps every layer's N × N weights, as `heads` does: one that would
    need more than half the memory available is skipped, naming its size and the option,
    before its pass runs, where it ended the whole scan with out of memory (SmolLM2, whose
    RoPE has no position limit, at --max-tokens 1048576); the others are scored."""
    import attncli.machine as machine
    from attncli.models.heads import heads_bytes

    scorer = Scorer(ScanSettings(model=TOY, max_tokens=128))
    spec = scorer.model.spec
    monkeypatch.setattr(machine, "available_bytes",
                        lambda: 2 * heads_bytes(spec.n_layer, spec.num_heads, 40))
    short, long = "The cat sat on the mat", " ".join(["word"] * 100)
    got = scorer.score_batch([("short", short, None, False), ("long", long, None, False)])
    assert [d["status"] for d in got] == ["scored", "skipped"]
    assert got[1]["reason"].startswith(f"heads keeps {spec.n_layer} layers' {spec.num_heads} "
                                       "heads of 100 × 100 weights (")
    assert got[1]["reason"].endswith("), more than half the memory available; give a smaller "
                                     "--max-tokens")  # no amount: such documents count as one
