"""pipeline.run end to end: plain data out, the book's numbers, strict JSON values."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F

from attncli.core.inputs import load_inputs
from attncli.core.request import Request
from attncli.core.result import Result
from attncli.errors import AttnCliError
from attncli.long.path import run
from tests.conftest import JOURNEY, SENTENCE
from tests.tolerance import assert_near, near


def _floats(value: object) -> bool:
    if isinstance(value, list):
        return all(_floats(v) for v in value)
    return value is None or isinstance(value, float)


def test_book_simple_numbers_from_inputs() -> None:
    result = run(Request(inputs=load_inputs(JOURNEY), variant="simple"))
    assert [round(w, 4) for w in result.weights[0][1]] == [
        0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581]
    assert [round(c, 4) for c in result.context[1]] == [0.4419, 0.6515, 0.5683]
    assert result.labels[1] == "journey"
    assert result.tokens[1].id is None and "bytes" not in result.tokens[1].to_dict()


def test_book_causal_numbers_with_d_out_2() -> None:
    result = run(Request(inputs=load_inputs(JOURNEY), variant="causal", d_out=2))
    assert [round(c, 4) for c in result.context[0]] == [-0.4519, 0.2216]
    assert [round(c, 4) for c in result.context[5]] == [-0.5299, -0.1081]


@pytest.mark.parametrize("variant", ["simple", "qkv", "causal", "multihead"])
def test_shapes_plain_data_and_rows_sum_to_one(variant: str) -> None:
    result = run(Request(text=SENTENCE, variant=variant))
    heads = 2 if variant == "multihead" else 1
    assert isinstance(result, Result)
    assert len(result.weights) == heads and len(result.weights[0]) == 6
    assert len(result.context) == 6 and len(result.context[0]) == 8
    assert _floats(result.weights) and _floats(result.context)
    for head in result.weights:
        for row in head:
            assert_near(sum(row), 1.0)
    json.dumps(result.to_dict(), allow_nan=False)


def test_causal_json_masks_as_null_and_zero_weights() -> None:
    result = run(Request(text=SENTENCE, variant="multihead", heads=2))
    masked = result.stages["masked"]
    for h in range(2):
        for i in range(6):
            for j in range(6):
                assert (masked[h][i][j] is None) == (j > i)
                if j > i:
                    assert result.weights[h][i][j] == 0.0


def test_context_matches_sdpa_through_the_pipeline() -> None:
    result = run(Request(text=SENTENCE, variant="causal", d_out=4))
    q, k, v = (torch.tensor(result.stages[n]) for n in ("queries", "keys", "values"))
    reference = F.scaled_dot_product_attention(q, k, v, is_causal=True)[0]  # (T, d_out)
    assert_near(torch.tensor(result.context), reference)


def test_same_inputs_same_output_and_seed_matters() -> None:
    a = run(Request(text=SENTENCE, variant="multihead", dropout=0.2))
    b = run(Request(text=SENTENCE, variant="multihead", dropout=0.2))
    c = run(Request(text=SENTENCE, variant="multihead", dropout=0.2, seed=7))
    assert json.dumps(a.to_dict()) == json.dumps(b.to_dict())
    assert a.context != c.context


def test_dropout_is_visible() -> None:
    result = run(Request(text="one two three four five six seven eight nine ten",
                         variant="causal", dropout=0.5))
    dropped, softmax = result.stages["dropped"][0], result.stages["softmax"][0]
    zeros = sum(1 for i, row in enumerate(dropped) for j, w in enumerate(row)
                if j <= i and w == 0.0)
    assert zeros > 0
    for drow, srow in zip(dropped, softmax, strict=True):
        for d, s in zip(drow, srow, strict=True):
            assert d == 0.0 or near(d, s / 0.5)


@pytest.mark.parametrize(("settings", "message"), [
    ({"variant": "nope"}, "unknown variant"),
    ({"dropout": 1.0}, r"dropout must be in \[0, 1\) \(got 1.0\)"),
    ({"dropout": -0.1}, "dropout must be in"),
    ({"emb_dim": 0}, "emb-dim must be a positive integer"),
    ({"d_out": -2}, "d-out must be a positive integer"),
    ({"variant": "multihead", "heads": 3}, "heads must divide d_out"),
    ({"variant": "causal", "heads": 2}, "--num-heads applies to --variant multihead"),
    ({"text": "x y z", "context_length": 2}, "3 tokens, more than --context-length 2"),
    ({"variant": "simple", "dropout": 0.1}, "--dropout applies to causal"),
    ({"device": "tpu"}, "unknown device"),
    ({"seed": 2**64}, r"--seed 18446744073709551616 is out of range"),
    ({"layer": 2}, "--layer applies with --model only"),
    ({"impl": "naive", "top_k": 3}, "--top-keys applies to the tiled path"),
    ({"impl": "naive", "pool": "mean"}, "--pool applies to the tiled path"),
    ({"impl": "naive", "full": True}, "--full applies to the tiled path"),
])
def test_bad_requests(settings: dict[str, object], message: str) -> None:
    """Each bad setting is refused where the request is built (or, for sizes, when run)."""
    with pytest.raises(AttnCliError, match=message):
        run(Request(**{"text": "x", **settings}))  # type: ignore[arg-type]


def test_context_length_does_not_apply_to_inputs() -> None:
    with pytest.raises(AttnCliError, match="--context-length applies to text input"):
        Request(inputs=load_inputs(JOURNEY), context_length=8)


def test_overflow_is_an_error_not_nan(tmp_path) -> None:  # noqa: ANN001
    path = tmp_path / "big.json"
    path.write_text("[[1e30, 1e30], [1e30, -1e30]]")
    with pytest.raises(AttnCliError, match="overflowed"):
        run(Request(inputs=load_inputs(path), variant="simple"))


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA message")
def test_cuda_missing_is_a_clear_error() -> None:
    with pytest.raises(AttnCliError, match="no CUDA device"):
        run(Request(text="x", device="cuda"))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_matches_cpu() -> None:
    cpu = run(Request(text=SENTENCE, variant="multihead"))
    gpu = run(Request(text=SENTENCE, variant="multihead", device="cuda"))
    # Wider than the house bound: a GPU's float32 matmuls sum in other orders than the CPU's,
    # checked against the CPU run rather than a float64 truth.
    assert_near(torch.tensor(gpu.context), torch.tensor(cpu.context), atol=1e-4, rtol=1e-4)
