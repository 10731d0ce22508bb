"""The views of a generation's answer tokens, on hand-made weights: the value view is
α_ij·‖W_O^h v_j^h‖ combined over the shown layers and heads and renormalised; occlusion's row is
the drops; a token much looked at with a small value norm is found as a sink and left out."""

from __future__ import annotations

import numpy as np
import pytest

from attncli.core.result import ModelInfo, TokenInfo
from attncli.errors import AttnCliError
from attncli.records.asking import Sampling
from attncli.records.generation import AnswerStep, GenerateView, GenerationResult
from attncli.records.given import Template
from attncli.records.shown import check_view
from tests.tolerance import assert_near

P, A, L, H = 6, 2, 2, 3


def _result(weights: list[np.ndarray], norms: np.ndarray | None = None,
            occlusion: list[list[float]] | None = None) -> GenerationResult:
    prompt = [TokenInfo(i, i, f"t{i}", None) for i in range(P)]
    answer = [TokenInfo(P + s, 10 + s, f"a{s}", None) for s in range(A)]
    return GenerationResult(
        model=ModelInfo("m", L, H, 8), prompt=prompt, answer=answer, given="",
        template=Template(False, ""), sampling=Sampling(), stop_ids=[], stopped="given", sinks=[0],
        steps=[AnswerStep(s, P - 1 + s, 10 + s, 0.5, [], rank=1) for s in range(A)],
        weights=weights, norms=norms, occlusion=occlusion)


def _weights(rng: np.random.Generator) -> list[np.ndarray]:
    out = []
    for s in range(A):
        raw = rng.random((L, H, P + s))
        out.append((raw / raw.sum(-1, keepdims=True)).astype(np.float32))
    return out


def test_the_value_view_is_weights_times_value_norms_combined_and_renormalised() -> None:
    rng = np.random.default_rng(0)
    weights = _weights(rng)
    norms = rng.random((L, H, P + A)).astype(np.float32) + 0.5
    result = _result(weights, norms)
    for s in range(A):
        view = GenerateView(kind="value", layers=(1, 2), head=2, exclude_sinks=False)
        want = weights[s][1, 2].astype(np.float64) * norms[1, 2, :P + s]
        # float64 maths on both sides: a tighter, purely relative bound
        assert_near(result.row(s, view), want / want.sum(), atol=0, rtol=1e-6)
        mean = (weights[s].astype(np.float64) * norms[..., :P + s]).mean(axis=(0, 1))
        mean[0] = 0.0  # the first token, a sink, left out
        assert_near(result.row(s, GenerateView(kind="value")), mean / mean.sum(), atol=0,
                    rtol=1e-6)  # float64 on both sides: purely relative, tighter


def test_the_occlusion_row_is_the_drops_with_the_sinks_at_zero() -> None:
    drops = [[0.9, 0.1, -0.2, 0.5, 0.0, 0.3], [2.0, 0.0, 0.4, 0.1, 0.2, 0.0]]
    result = _result(_weights(np.random.default_rng(1)), occlusion=drops)
    row = result.row(1, GenerateView(kind="occlusion"))
    assert row.tolist() == [0.0, 0.0, 0.4, 0.1, 0.2, 0.0, 0.0]
    assert result.ranked(1, GenerateView(kind="occlusion", k=2)) == [(2, 0.4), (4, 0.2)]


def test_ranked_leaves_out_the_sinks_and_in_occlusion_what_no_pass_masked() -> None:
    """Masking every measured word raised the answer's log-prob (negative drops): the ranking
    lists those words, not the sink or the template's unmasked tokens at their 0.0 (they were
    shown as the top prompt tokens, at 0.000, above the words)."""
    from dataclasses import replace

    from attncli.records.given import Occluded

    drops = [[0.0, 0.0, -0.3, -0.3, -0.1, 0.0], [0.0, 0.0, -0.2, -0.2, 0.5, 0.0]]
    result = replace(_result(_weights(np.random.default_rng(1)), occlusion=drops),
                     occluded=Occluded("word", [[2, 3], [4]]))
    view = GenerateView(kind="occlusion", k=3)
    assert result.ranked(0, view) == [(4, -0.1), (2, -0.3), (3, -0.3)]
    assert result.ranked(1, view) == [(4, 0.5), (2, -0.2), (3, -0.2)]
    kept = GenerateView(kind="occlusion", k=3, exclude_sinks=False)  # the sink was never masked
    assert result.ranked(0, kept) == [(4, -0.1), (2, -0.3), (3, -0.3)]
    weights = GenerateView(kind="raw", k=P)  # every token but the sink (the first)
    assert [i for i, _ in result.ranked(0, weights)] != [] and 0 not in dict(
        result.ranked(0, weights))
    assert 0 in dict(result.ranked(0, replace(weights, exclude_sinks=False)))


def test_a_token_much_looked_at_with_a_small_value_norm_is_found_as_a_sink() -> None:
    weights = []
    for s in range(A):
        row = np.full(P + s, 1.0)
        row[3] = 6.0  # token 3 takes most of the attention
        weights.append(np.broadcast_to(row / row.sum(), (L, H, P + s)).astype(np.float32))
    norms = np.full((L, H, P + A), 10.0, dtype=np.float32)
    assert _result(weights, norms).found_sinks == []  # an ordinary value norm: not a sink
    norms[:, :, 3] = 2.0  # little taken from it
    result = _result(weights, norms)
    assert result.found_sinks == [3] and result.left_out() == [0, 3]
    assert result.row(0, GenerateView())[3] == 0.0
    assert _result(weights).found_sinks == []  # no value norms: only the sinks by position


def test_a_view_the_result_cannot_show_is_one_line() -> None:
    result = _result(_weights(np.random.default_rng(2)))
    with pytest.raises(AttnCliError, match="the value view needs"):
        check_view(result, GenerateView(kind="value"))
    with pytest.raises(AttnCliError, match="--view must be one of"):
        check_view(result, GenerateView(kind="flow"))
