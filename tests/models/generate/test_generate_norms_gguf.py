"""A generation's value norms from the caches of a GGUF's decoder, whose W_O the kernels hold as
the file's blocks (LlamaDecoder.value_norms dequantizes each layer's into one scratch): held and
streamed, after a prompt of DENSE_FROM tokens or more (its products on the dense path), against
transformers reading the same file (the gguf package dequantizes it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gguf
import pytest
import torch

from attncli.models.decoding import DecodeStep
from attncli.models.family import open_model
from attncli.models.generate import engine
from attncli.models.generate.engine import cached_norms, decode
from attncli.models.generate.sampling import Sampling
from attncli.models.sources.gguf.qmatmul import DENSE_FROM
from tests.gguf_fixtures import write_k_llama, write_model
from tests.models.generate.test_generate_norms import _reference
from tests.models.gguf.test_gguf_cli import _transformers
from tests.tolerance import assert_near

Q = gguf.GGMLQuantizationType
PROMPT = [(7 * i + 3) % 250 + 3 for i in range(DENSE_FROM + 8)]


@pytest.fixture(scope="module", params=[Q.Q4_K, Q.Q8_0], ids=lambda q: q.name)
def written(request: pytest.FixtureRequest,
            tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    path = tmp_path_factory.mktemp("norms") / f"llama-{request.param.name}.gguf"
    if request.param == Q.Q8_0:
        write_model(path, "llama", Q.Q8_0)
    else:
        write_k_llama(path, request.param)
    return path, _transformers(path)


@pytest.mark.parametrize("held", [True, False], ids=["held", "streamed"])
def test_norms_from_a_gguf_decoders_caches_equal_transformers(
        written: tuple[Path, Any], held: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    path, hf = written
    monkeypatch.setattr(engine, "holds", lambda _model, _beside=0: held)
    model = open_model(str(path))
    assert model.ckpt.weights.quantized(  # type: ignore[attr-defined]
        "layers.0.self_attn.o_proj.weight") is not None  # W_O as the file's blocks
    decoders: list[DecodeStep] = []
    made = list(decode(model, PROMPT, Sampling(max_new_tokens=3), frozenset(),
                       on_decoder=decoders.append))
    assert decoders[0].held is held  # type: ignore[attr-defined]
    ids = PROMPT + [s.token_id for s in made]
    norms = cached_norms(decoders[0], ids)
    assert norms is not None
    assert_near(torch.from_numpy(norms), _reference(hf, ids))
