"""The JSON contract: one to_dict for both paths; typed config; the stages a run has."""

from __future__ import annotations

from attncli.core.result import (
    LongStats,
    PooledMap,
    QueryRow,
    Result,
    RunConfig,
    TextConfig,
    TokenInfo,
)

TOKENS = [TokenInfo(0, 1, "a"), TokenInfo(1, 2, " b")]


def _config(impl: str = "naive", head: int | None = None) -> RunConfig:
    return RunConfig(source="text", num_tokens=2, d_in=4, d_out=4, heads=2, impl=impl,
                     version="0", variant="multihead", seed=1, dropout=0.0, qkv_bias=False,
                     device="cpu", text=TextConfig("gpt2", False, 4, None, True),
                     top_k=5 if impl == "tiled" else None, pool="max" if impl == "tiled" else None,
                     head=head)


def _result(**extra: object) -> Result:
    weights = [[[1.0, 0.0], [0.25, 0.75]], [[1.0, 0.0], [0.5, 0.5]]]
    return Result(variant="multihead", config=_config(), tokens=TOKENS, weights=weights,
                  context=[[0.1], [0.2]], present=("masked", "weights", "context"),
                  **extra)  # type: ignore[arg-type]


def test_available_stages_in_computation_order() -> None:
    assert _result().available_stages() == ["masked", "weights", "context"]


def test_config_is_serialised_in_one_place() -> None:
    assert _config().to_dict() == {
        "variant": "multihead", "encoding": "gpt2", "allow_special": False, "seed": 1,
        "emb_dim": 4, "context_length": None, "positions": True, "dropout": 0.0, "qkv_bias": False,
        "device": "cpu", "source": "text", "num_tokens": 2, "d_in": 4, "d_out": 4, "heads": 2,
        "impl": "naive", "version": "0"}
    assert _config("tiled", head=1).to_dict() | {} == {
        **_config().to_dict(), "impl": "tiled", "top_k": 5, "pool": "max", "head": 1}


def test_to_dict_additions() -> None:
    result = _result()
    assert set(result.to_dict()) == {"kind", "variant", "config", "tokens", "weights", "context"}
    masked = [[[0.3, None], [0.1, 0.2]], [[0.4, None], [0.0, 0.0]]]
    doc = _result(stages={"masked": masked},
                  query=QueryRow(1, " b", [[0.25, 0.75], [0.5, 0.5]]),
                  window={"rows": [1, 2], "cols": [0, 2]}).to_dict()
    assert doc["stages"] == {"masked": masked}
    assert doc["query"] == {"index": 1, "token": " b", "weights": [[0.25, 0.75], [0.5, 0.5]]}
    assert doc["window"] == {"rows": [1, 2], "cols": [0, 2]}


def test_a_long_result_has_no_maps_in_its_json() -> None:
    pmap = PooledMap(head=0, edges=[0, 2], values=[[1.0]], counts=[[3]])
    long = LongStats(stats={"lse": [[0.0, 0.5]]}, summary=[{"head": 0, "entropy": 0.5}],
                     maps=[pmap])
    result = Result(variant="causal", config=_config("tiled"), tokens=TOKENS,
                    weights=[[[0.25, 0.75]]], context=[[0.1], [0.2]],
                    window={"rows": [1, 2], "cols": [0, 2]}, long=long)
    assert result.to_dict() == {
        "kind": "run", "variant": "causal", "config": _config("tiled").to_dict(),
        "tokens": [{"index": 0, "id": 1, "text": "a"}, {"index": 1, "id": 2, "text": " b"}],
        "weights": [[[0.25, 0.75]]], "context": [[0.1], [0.2]], "stats": {"lse": [[0.0, 0.5]]},
        "summary": [{"head": 0, "entropy": 0.5}], "window": {"rows": [1, 2], "cols": [0, 2]}}
    assert result.num_heads == 1 and result.labels == ["a", " b"]
