"""core/saved.py: saved documents back into result records, checked."""

from __future__ import annotations

import pytest

from attncli.core.pipeline import Request, run
from attncli.core.saved import result_from_dict, saved_from, weights_stack
from attncli.errors import AttnCliError
from tests.conftest import SENTENCE


@pytest.mark.parametrize("variant", ["simple", "qkv", "causal", "multihead"])
def test_a_runs_json_gives_back_its_result(variant: str) -> None:
    result = run(Request(text=SENTENCE, variant=variant))
    doc = result.to_dict(stages=result.available_stages())
    back = result_from_dict(doc)
    assert back.to_dict(stages=back.available_stages()) == doc
    assert back.available_stages() == result.available_stages()


def test_the_causal_mask_is_rebuilt_without_the_masked_stage() -> None:
    result = run(Request(text=SENTENCE, variant="causal"))
    back = result_from_dict(result.to_dict())
    assert back.stages["masked"][0][1] == [0.0, 0.0, None, None, None, None]
    assert "masked" not in back.available_stages()
    plain = result_from_dict(run(Request(text=SENTENCE, variant="qkv")).to_dict())
    assert plain.stages["masked"] is None


def test_shapes() -> None:
    assert weights_stack([[1, 0], [0, 1]]) == [[[1.0, 0.0], [0.0, 1.0]]]
    assert len(weights_stack([[[1]], [[1]]])) == 2
    with pytest.raises(AttnCliError, match="square"):
        weights_stack([[0.5, 0.5]])
    with pytest.raises(AttnCliError, match="head 1 is 1×2"):
        weights_stack([[[1, 0], [0, 1]], [[1, 0]]])
    with pytest.raises(AttnCliError, match="cell \\[0\\]\\[0\\] is True"):
        weights_stack([[True]])


def test_kinds() -> None:
    assert saved_from([[1.0]]).kind == "weights"
    pair = saved_from({"tokens": [{"text": "a"}, "b"], "weights": [[1, 0], [0.5, 0.5]]})
    assert pair.kind == "weights" and pair.results[0].labels == ["a", "b"]
    doc = run(Request(text=SENTENCE, variant="causal")).to_dict(query=2)
    saved = saved_from(doc)
    assert saved.kind == "run" and saved.query == 2 and saved.stages is None
    assert saved_from({"variants": [doc]}).kind == "compare"
    with pytest.raises(AttnCliError, match="no weights"):
        saved_from({"encoding": "gpt2", "tokens": []})
