"""The fast JSON writer: strict, float32-exact, the same bytes however it is cut into pieces."""

from __future__ import annotations

import json

import numpy as np
import pytest

from attncli.render import jsonout
from attncli.render.jsonout import dumps, json_pieces

DOCS = [{}, [], {"a": []}, {"a": [1.5, None, "x"], "b": {"c": [[1, 2], [3]]}}, [[{"k": 1}]],
        {"t": "猫 \"quoted\" \n"}, 0.1, None, [True, False, 3]]


@pytest.mark.parametrize("doc", DOCS)
def test_plain_data_reads_back_as_the_standard_library_writes_it(doc: object) -> None:
    assert json.loads(dumps(doc)) == json.loads(json.dumps(doc))
    assert dumps(doc).endswith(b"\n")


@pytest.mark.parametrize("shape", [(0,), (7,), (5, 3), (300, 500), (3, 200, 300), (2, 0)])
def test_float32_arrays_round_trip_exactly_with_nan_as_null(shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(1)
    a = (rng.standard_normal(shape) * rng.choice([1e-30, 1.0, 1e20], shape)).astype(np.float32)
    a[rng.random(shape) < 0.2] = np.nan
    back = json.loads(dumps({"a": a}))["a"]
    assert np.array_equal(np.array(back, dtype=np.float64).shape, a.shape)
    flat, want = np.array(back, dtype=np.float64).ravel(), a.ravel()
    nulls = [v is None for v in np.array(back, dtype=object).ravel()]
    assert nulls == np.isnan(want).tolist()
    assert np.array_equal(flat[~np.isnan(want)].astype(np.float32), want[~np.isnan(want)])


def test_pieces_join_to_the_same_bytes_whatever_the_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(2)
    doc = {"w": rng.standard_normal((4, 50, 30)).astype(np.float32),
           "i": np.arange(120).reshape(40, 3), "l": [[0.5, None]] * 3}
    whole = dumps(doc)
    monkeypatch.setattr(jsonout, "CHUNK_CELLS", 7)
    pieces = list(json_pieces(doc))
    assert len(pieces) > 20 and b"".join(pieces) == whole
    assert json.loads(whole)["i"] == np.arange(120).reshape(40, 3).tolist()


@pytest.mark.parametrize("doc", [float("nan"), {"a": [1.0, float("inf")]}, [[float("nan")]],
                                 {"a": np.array([1.0, np.inf], dtype=np.float32)},
                                 [0.5, float("-inf"), None]])
def test_infinity_and_nan_outside_arrays_are_refused(doc: object) -> None:
    with pytest.raises(ValueError):
        dumps(doc)


def test_same_data_same_bytes() -> None:
    a = np.random.default_rng(3).standard_normal((64, 64)).astype(np.float32)
    assert dumps({"a": a}) == dumps({"a": a.copy()})


def test_an_iterator_is_written_as_a_list_item_by_item() -> None:
    doc = {"tokens": ({"index": i, "text": f"t{i}"} for i in range(3)), "none": iter(())}
    assert json.loads(dumps(doc)) == {"tokens": [{"index": i, "text": f"t{i}"} for i in range(3)],
                                      "none": []}


@pytest.mark.parametrize("doc", [{"name": "na\u009bme", "path": "/x/\u0085\u009f"},
                                 ["\u0080", {"k\u009b": ["a\u009bb"] * 3}],
                                 [{"name": "c1/na\u009bme", "size": 1}] * 3])
def test_c1_controls_are_escaped_so_no_raw_csi_reaches_a_terminal(doc: object) -> None:
    # orjson writes U+0080-U+009F raw (C2 9B is a CSI to some terminals): `models --json`
    # printed a cache folder's name so; the escape reads back as the same string
    text = dumps(doc)
    assert not any(bytes([0xC2, low]) in text for low in range(0x80, 0xA0))
    assert b"\\u009b" in text or b"\\u0080" in text
    assert json.loads(text) == doc
    assert "é\u00a0".encode() in dumps("é\u00a0")  # printable Latin-1 stays as it is


@pytest.mark.parametrize("value", [
    {"path": "odd\udcffdir/model.safetensors", "layers": 3},  # a flat dict: one orjson call
    {"model": {"path": "odd\udcffdir"}, "rows": [[1.0]]},  # nested
    [{"name": "a\udcfe"}, {"name": "b"}],  # a batch of flat dicts
    {"key\udcff": "v"},  # a key
    "lone \ud800 surrogate",  # one that stands for no byte
])  # fmt: skip
def test_a_file_name_s_undecodable_bytes_are_written_as_escapes(value: object) -> None:
    """A --model path with a byte that is not UTF-8 (Python's surrogate escape) ended `run
    --json` in orjson's TypeError traceback."""
    text = dumps(value).decode("utf-8")  # strict UTF-8
    assert "\\\\xff" in text or "\\\\xfe" in text or "\\\\ud800" in text, text
    assert json.loads(text) is not None


def test_the_escaped_name_reads_back_as_models_writes_it() -> None:
    doc = {"model": {"path": "odd\udcffdir/m.safetensors"}, "w": np.zeros((2, 2), np.float32)}
    assert json.loads(dumps(doc))["model"] == {"path": "odd\\xffdir/m.safetensors"}
