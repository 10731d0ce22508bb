"""The real SmolLM2-135M-Instruct Q4_1 GGUF against transformers' GGUF loader (skipped, with the
path it looked for, where the file has not been fetched). transformers dequantizes the whole
model once for the module; the checks look at a few tensors."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from attncli.models.sources.gguf import describe_gguf, open_gguf
from tests.gguf_fixtures import smollm2
from tests.models.gguf.test_gguf_cli import gguf_parsed_once
from tests.models.gguf.test_gguf_source import transformers_tensors
from tests.tolerance import assert_near

# The real SmolLM2 against transformers' GGUF loader: slow (make check leaves it to make test).
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def real() -> tuple[Path, dict[str, torch.Tensor]]:
    path = smollm2()
    config = open_gguf(path).config()
    with gguf_parsed_once():  # only transformers' loader runs with gguf's parses made once
        return path, transformers_tensors(path, "llama", config)


@pytest.mark.parametrize("layer", [0, 29])
@pytest.mark.parametrize("proj", ["q", "k", "v", "o"])
def test_attention_weights_match_transformers(real: tuple, layer: int, proj: str) -> None:
    path, reference = real
    name = f"model.layers.{layer}.self_attn.{proj}_proj.weight"
    assert_near(open_gguf(path).tensor(name), reference[name])


def test_embedding_rows_match_transformers(real: tuple) -> None:
    path, reference = real
    ids = [0, 1, 2, 19556, 49151]
    rows = open_gguf(path).rows("model.embed_tokens.weight", ids)
    assert_near(rows, reference["model.embed_tokens.weight"][ids])


def test_config_and_description() -> None:
    path = smollm2()
    config = open_gguf(path).config()
    assert {k: config[k] for k in ("num_hidden_layers", "num_attention_heads",
                                   "num_key_value_heads", "head_dim", "vocab_size",
                                   "tie_word_embeddings")} == \
        {"num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3,
         "head_dim": 64, "vocab_size": 49152, "tie_word_embeddings": True}
    info = describe_gguf(path)
    assert (info["quantization"], info["readable"], info["size"]) == \
        ("Q4_1", True, path.stat().st_size)


def test_every_tensor_of_every_layer_matches_transformers(real: tuple) -> None:
    """The same dequantized numbers go in on both sides: every tensor agrees closely."""
    path, reference = real
    source = open_gguf(path)
    names = [n for n in source.shapes() if n != "model.embed_tokens.weight"]
    assert len(names) == 30 * 9 + 1  # nine tensors a layer, and the final norm
    for name in names:
        assert_near(source.tensor(name), reference[name],
                    msg=lambda m, name=name: f"{name}: {m}")

