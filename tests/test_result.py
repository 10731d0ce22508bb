"""The JSON contract: stages, query and window additions; the stages a run has."""

from __future__ import annotations

from attncli.core.result import Result, TokenInfo


def _result() -> Result:
    weights = [[[1.0, 0.0], [0.25, 0.75]], [[1.0, 0.0], [0.5, 0.5]]]
    masked = [[[0.3, None], [0.1, 0.2]], [[0.4, None], [0.0, 0.0]]]
    return Result(variant="multihead", config={}, tokens=[TokenInfo(0, 1, "a"),
                                                          TokenInfo(1, 2, " b")],
                  weights=weights, context=[[0.1], [0.2]],
                  stages={"masked": masked, "weights": weights, "context": [[0.1], [0.2]],
                          "dropped": None})


def test_available_stages_in_computation_order() -> None:
    assert _result().available_stages() == ["masked", "weights", "context"]


def test_to_dict_additions() -> None:
    result = _result()
    assert set(result.to_dict()) == {"variant", "config", "tokens", "weights", "context"}
    doc = result.to_dict(stages=["masked"], query=1, window={"rows": [1, 2], "cols": [0, 2]})
    assert doc["stages"] == {"masked": [[[0.3, None], [0.1, 0.2]], [[0.4, None], [0.0, 0.0]]]}
    assert doc["query"] == {"index": 1, "token": " b", "weights": [[0.25, 0.75], [0.5, 0.5]]}
    assert doc["window"] == {"rows": [1, 2], "cols": [0, 2]}


def test_long_result_json_has_no_maps_and_query_only_when_asked() -> None:
    from attncli.core.result import LongResult, PooledMap

    pmap = PooledMap(head=0, edges=[0, 2], values=[[1.0]], counts=[[3]])
    result = LongResult(
        variant="causal", config={"impl": "tiled"}, tokens=[TokenInfo(0, 1, "a"),
                                                            TokenInfo(1, 2, " b")],
        context=[[0.1], [0.2]], stats={"lse": [[0.0, 0.5]]},
        summary=[{"head": 0, "mean_entropy": 0.5}], window={"rows": [1, 2], "cols": [0, 2]},
        weights=[[[0.25, 0.75]]], maps=[pmap])
    assert result.to_dict() == {
        "variant": "causal", "config": {"impl": "tiled"},
        "tokens": [{"index": 0, "id": 1, "text": "a"}, {"index": 1, "id": 2, "text": " b"}],
        "context": [[0.1], [0.2]], "stats": {"lse": [[0.0, 0.5]]},
        "summary": [{"head": 0, "mean_entropy": 0.5}], "window": {"rows": [1, 2], "cols": [0, 2]},
        "weights": [[[0.25, 0.75]]]}
    assert result.num_heads == 1 and result.labels == ["a", " b"]
    query = {"index": 1, "token": " b", "weights": [[0.25, 0.75]]}
    assert LongResult(**{**result.__dict__, "query": query}).to_dict()["query"] == query
