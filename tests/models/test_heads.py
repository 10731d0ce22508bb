"""Head measures against values worked out by hand on small attention matrices."""

from __future__ import annotations

import math

import pytest
import torch

from attncli.errors import AttnCliError
from attncli.models.measures import SORT_KEYS, head_measures, sort_measures
from tests.tolerance import assert_near

T = 4


def _stack(*heads: list[list[float]]) -> torch.Tensor:
    return torch.tensor([heads], dtype=torch.float32)  # (1, heads, T, T)


IDENTITY = torch.eye(T).tolist()
PREVIOUS = [[1, 0, 0, 0], [1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0]]
SINK = [[1, 0, 0, 0]] * T
UNIFORM = [[1 / (j + 1) if k <= j else 0 for k in range(T)] for j in range(T)]


def test_one_hot_heads() -> None:
    identity, previous, sink = head_measures(_stack(IDENTITY, PREVIOUS, SINK))
    assert identity == {"layer": 0, "head": 0, "entropy": 0.0, "prev": 0.0, "first": 0.0,
                        "self": 1.0, "distance": 0.0}
    assert previous == {"layer": 0, "head": 1, "entropy": 0.0, "prev": 1.0, "first": 1 / 3,
                        "self": 0.0, "distance": 1.0}
    # Rows 1..3 put everything on token 0, which lies 1, 2 and 3 tokens back.
    assert sink == {"layer": 0, "head": 2, "entropy": 0.0, "prev": 1 / 3, "first": 1.0,
                    "self": 0.0, "distance": 2.0}


def test_uniform_causal_head() -> None:
    (row,) = head_measures(_stack(UNIFORM))
    # Row i spreads 1/(i+1) over keys 0..i, for i = 1, 2, 3.
    assert_near(row["entropy"], (math.log(2) + math.log(3) + math.log(4)) / 3)
    assert_near(row["prev"], (1 / 2 + 1 / 3 + 1 / 4) / 3)
    assert_near(row["first"], (1 / 2 + 1 / 3 + 1 / 4) / 3)
    assert_near(row["self"], (1 / 2 + 1 / 3 + 1 / 4) / 3)
    # Mean distance back in row i is i/2.
    assert_near(row["distance"], (1 / 2 + 2 / 2 + 3 / 2) / 3)


def test_rows_come_in_layer_then_head_order_as_plain_python() -> None:
    weights = torch.stack([_stack(IDENTITY, SINK)[0], _stack(PREVIOUS, UNIFORM)[0]])
    rows = head_measures(weights)
    assert [(r["layer"], r["head"]) for r in rows] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert all(type(v) in (int, float) for r in rows for v in r.values())


def test_one_token_is_too_few() -> None:
    with pytest.raises(AttnCliError) as err:
        head_measures(torch.ones(1, 2, 1, 1))
    assert str(err.value) == "head measures need at least 2 tokens (got 1)"


def test_sort_measures() -> None:
    weights = torch.stack([_stack(IDENTITY, SINK)[0], _stack(PREVIOUS, UNIFORM)[0]])
    rows = head_measures(weights)
    # The head scores' keys sort rows that have them (tests/models/test_head_scores.py).
    order = {key: [(r["layer"], r["head"]) for r in sort_measures(rows, key)]
             for key in SORT_KEYS if key in rows[0]}
    assert set(SORT_KEYS) - set(order) == {"previous_token", "duplicate_token", "induction"}
    assert order["prev"] == [(1, 0), (1, 1), (0, 1), (0, 0)]
    assert order["first"] == [(0, 1), (1, 1), (1, 0), (0, 0)]
    assert order["self"][0] == (0, 0)
    assert order["entropy"][0] == (1, 1)  # ties at 0 keep layer, head order after it
    assert order["entropy"][1:] == [(0, 0), (0, 1), (1, 0)]
    assert order["distance"][0] == (0, 1) and order["distance"][-1] == (0, 0)
    assert order["head"] == [(0, 0), (1, 0), (0, 1), (1, 1)]
    assert order["layer"] == [(0, 0), (0, 1), (1, 0), (1, 1)]


def test_unknown_sort_key() -> None:
    with pytest.raises(AttnCliError) as err:
        sort_measures([], "sink")
    assert str(err.value) == (
        "unknown sort key 'sink' (choose from layer, head, entropy, prev, first, self, distance, "
        "previous_token, duplicate_token, induction)")
