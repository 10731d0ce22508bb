"""tests/tolerance.py: the bound |a - ref| <= atol + rtol*|ref|, its inputs and its messages."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.tolerance import ATOL, RTOL, assert_near, mismatch, near, row_atol


def test_the_house_bound_is_absolute_plus_relative() -> None:
    assert (ATOL, RTOL) == (1e-5, 1e-5)
    ref = 0.63
    edge = ATOL + RTOL * ref  # 1.63e-5: the kvcache steps differed by 1.04e-5 and 1.25e-5 here
    assert near(ref + 0.99 * edge, ref) and not near(ref + 1.01 * edge, ref)
    assert near(1e6 + 9.0, 1e6) and not near(1e6 + 11.0, 1e6)  # relative part dominates
    assert near(1e-9, 0.0) and not near(2e-5, 0.0)  # absolute part near zero


def test_the_bound_is_measured_against_ref_not_actual() -> None:
    assert near(100.0, 100.0 + 1e-3, atol=0, rtol=1e-5)  # 1e-3 <= 1e-5 * 100.001
    assert not near(0.0, 1.0, atol=0, rtol=0.5) and near(1.0, 2.0, atol=0, rtol=0.5)


@pytest.mark.parametrize("make", [torch.tensor, np.array, list, tuple])
def test_tensors_arrays_and_lists(make: object) -> None:
    values = [[0.5, 1.0], [2.0, -3.0]]
    shaped = make(values) if make in (torch.tensor, np.array) else make(map(list, values))  # type: ignore[operator]
    assert_near(shaped, torch.tensor(values, dtype=torch.float64))
    assert_near(shaped, np.array(values) + 1e-6)
    with pytest.raises(AssertionError, match=r"index \(1, 1\)"):
        assert_near(shaped, np.array(values) + np.array([[0, 0], [0, 1e-3]]))


def test_float32_against_float64_and_scalars() -> None:
    assert_near(torch.tensor([1 / 3], dtype=torch.float32), [1 / 3])
    assert_near(2.0 + 1e-6, 2)
    assert_near(torch.ones(3, 4) * 0.999999, 1.0)  # ref broadcast over actual
    assert_near(np.float32(0.1), 0.1)


def test_exact_comparisons() -> None:
    assert_near(torch.arange(5.0), list(range(5)), atol=0, rtol=0)
    assert not near(torch.tensor([1.0 + 2**-23]), [1.0], atol=0, rtol=0)


def test_shapes_must_agree() -> None:
    assert "shapes differ" in str(mismatch([1.0, 2.0], [1.0, 2.0, 3.0]))
    assert "shapes differ" in str(mismatch(1.0, [1.0, 1.0]))  # actual is never broadcast
    assert "shapes differ" in str(mismatch(torch.zeros(2, 3), torch.zeros(3, 2)))


def test_nan_and_masked_cells() -> None:
    assert not near([1.0, float("nan")], [1.0, float("nan")])
    assert "equal_nan=True" in str(mismatch([None, 1.0], [None, 1.0]))
    assert near([None, 1.0], [float("nan"), 1.0 + 1e-7], equal_nan=True)
    assert near(torch.tensor([float("nan"), 0.5]), [None, 0.5], equal_nan=True)
    why = mismatch([None, 1.0], [0.2, 1.0], equal_nan=True)
    assert why is not None and "one side only" in why and "index (0,)" in why
    assert not near([1.0, 2.0], [None, 2.0], equal_nan=True)


def test_infinities_must_match_exactly() -> None:
    inf = float("inf")
    assert near([inf, -inf, 1.0], [inf, -inf, 1.0])
    assert not near([inf], [-inf]) and not near([1e30], [inf]) and not near([inf], [1e30])


def test_mappings_compare_key_by_key() -> None:
    assert near({"a": 1.0, "b": [2.0, None]}, {"a": 1.0 + 1e-6, "b": [2.0, None]},
                equal_nan=True)
    assert "keys differ" in str(mismatch({"a": 1.0}, {"b": 1.0}))
    assert str(mismatch({"a": 1.0, "b": 2.0}, {"a": 1.0, "b": 3.0})).startswith("['b']")
    assert "mapping compared" in str(mismatch({"a": 1.0}, 1.0))


def test_the_message_names_the_worst_element_its_values_and_the_bound() -> None:
    got = torch.tensor([[0.63, 0.1], [0.2, 0.3]], dtype=torch.float64)
    ref = got.double().clone()
    ref[0, 0] += 2e-5  # worst: 2e-5 against a bound of 1.63e-5
    ref[1, 1] += 1.4e-5  # also out (bound 1.3e-5), but by less
    with pytest.raises(AssertionError) as caught:
        assert_near(got, ref, msg="layer 3")
    text = str(caught.value)
    assert text.startswith("layer 3: 2 of 4 elements outside |a - ref| <= 1e-05 + 1e-05*|ref|")
    assert "worst at index (0, 0)" in text and "a=0.63," in text and "ref=0.63002" in text
    assert "> bound 1.63" in text


def test_booleans_and_integers_are_numbers() -> None:
    assert_near(torch.tensor([True, False]), [1, 0], atol=0, rtol=0)
    assert_near(np.arange(3), [0, 1, 2], atol=0, rtol=0)


def test_complex_values_are_refused() -> None:
    with pytest.raises(TypeError):
        near(torch.tensor([1j]), [0.0])


def test_a_callable_message_is_given_the_reason() -> None:
    with pytest.raises(AssertionError, match=r"^layer 2 \(1 of 1 elements outside"):
        assert_near([1.0], [2.0], msg=lambda why: f"layer 2 ({why})")


def test_a_row_scaled_bound_for_vectors_made_by_sums() -> None:
    ref = np.array([[25.0, 0.1, -3.0], [0.5, 0.2, 0.1]])
    assert row_atol(ref).tolist() == [[25 * ATOL], [ATOL]]
    assert row_atol([0.1, -4.0]).tolist() == [4 * ATOL]
    got = ref + np.array([[0.0, 2e-4, 0.0], [0.0, 0.0, 0.0]])  # 2e-4 on the row reaching 25
    assert near(got, ref, atol=row_atol(ref)) and not near(got, ref)
    why = mismatch(ref + np.array([[0, 0, 0], [0, 2e-5, 0]]), ref, atol=row_atol(ref))
    assert why is not None and "atol per row, 1e-05 to 0.00025" in why and "index (1, 1)" in why
