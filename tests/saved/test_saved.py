"""saved/files.py: saved documents back into result records, checked."""

from __future__ import annotations

import json

import pytest

from attncli.core.request import Extract, Request
from attncli.errors import AttnCliError
from attncli.long.path import run
from attncli.render.jsonout import dumps
from attncli.saved.kinds import saved_from
from attncli.saved.run import result_from_dict
from attncli.saved.weights import weights_stack
from tests.conftest import SENTENCE


@pytest.mark.parametrize("variant", ["simple", "qkv", "causal", "multihead"])
def test_a_runs_json_gives_back_its_result(variant: str) -> None:
    result = run(Request(text=SENTENCE, variant=variant), Extract(query="2"))
    doc = result.to_dict()
    back = result_from_dict(doc)
    assert back.to_dict() == doc
    assert back.available_stages() == result.available_stages()
    assert back.traits == result.traits


def test_a_long_runs_json_gives_back_its_result() -> None:
    result = run(Request(text=SENTENCE, variant="causal", impl="tiled"), Extract(query="3"))
    doc = json.loads(dumps(result.to_dict()))  # as the file holds it: lists, null for masked
    back = result_from_dict(doc)
    assert json.loads(dumps(back.to_dict())) == doc and back.long is not None


def test_saved_weights_assume_no_mask() -> None:
    back = saved_from([[1.0, 0.0], [0.5, 0.5]]).results[0]
    assert not back.traits.causal and back.weights == [[[1.0, 0.0], [0.5, 0.5]]]


def test_shapes() -> None:
    assert weights_stack([[1, 0], [0, 1]]) == [[[1.0, 0.0], [0.0, 1.0]]]
    assert len(weights_stack([[[1]], [[1]]])) == 2
    with pytest.raises(AttnCliError, match="square"):
        weights_stack([[0.5, 0.5]])
    with pytest.raises(AttnCliError, match="head 1 is 1×2"):
        weights_stack([[[1, 0], [0, 1]], [[1, 0]]])
    with pytest.raises(AttnCliError, match=r"weights\[0\]\[0\] is true"):
        weights_stack([[True]])


def test_kinds() -> None:
    assert saved_from([[1.0]]).kind == "weights"
    pair = saved_from({"tokens": [{"text": "a"}, "b"], "weights": [[1, 0], [0.5, 0.5]]})
    assert pair.kind == "weights" and pair.results[0].labels == ["a", "b"]
    doc = run(Request(text=SENTENCE, variant="causal"), Extract(query="2")).to_dict()
    saved = saved_from(doc)
    assert saved.kind == "run" and saved.results[0].query.index == 2
    assert saved_from({"variants": [doc]}).kind == "compare"
    with pytest.raises(AttnCliError, match="cannot draw `tokens`"):
        saved_from({"encoding": "gpt2", "tokens": []})
