"""Hostile GGUF counts: a block_count of 10**7, 2**31 or 2**64 - 1, or a count that is NaN, ±inf,
negative, fractional, a string, a bool or an array, is one line naming the key and exit 2, found
before anything is built per layer. Each run is in-process under an address-space limit
(tests.redteam.test_redteam.memory_headroom), and the per-layer name table is watched: it may
never be asked for more layers than the file holds tensors for."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import gguf
import pytest

from attncli.errors import AttnCliError
from attncli.models.sources.gguf import describe_gguf, names, open_gguf, source
from attncli.models.sources.gguf.config import build_config
from attncli.models.sources.gguf.header import read_header
from tests.gguf_fixtures import LAYERS, write_model
from tests.gguf_rewrite import T, rewrite
from tests.redteam.test_redteam import memory_headroom

Q = gguf.GGMLQuantizationType
U64_MAX = 2**64 - 1


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("counts") / "llama.gguf"
    write_model(path, "llama", Q.F32)
    return path


@pytest.fixture
def layer_table(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The layer counts the per-layer name table is built for, in this test."""
    asked: list[int] = []
    real = names.hf_to_gguf

    def watched(layout: names.Layout, layers: int) -> dict[str, str]:
        asked.append(layers)
        return real(layout, layers)

    monkeypatch.setattr(source, "hf_to_gguf", watched)
    return asked


# (key, (type, value), what the line says after "metadata KEY is ")
BAD = [
    ("block_count", (T.UINT32, 10**7), "10,000,000, but the file holds tensors for 2 layers "
                                       "(blk.0 .. blk.1)"),
    ("block_count", (T.UINT64, 2**31), "2,147,483,648, but the file holds tensors for 2 layers"),
    ("block_count", (T.UINT64, U64_MAX), "18,446,744,073,709,551,615, but the file holds"),
    ("block_count", (T.UINT32, LAYERS + 1), "3, but the file holds tensors for 2 layers"),
    ("block_count", (T.UINT32, 1), "1, but the file holds tensors for 2 layers"),
    ("block_count", (T.UINT32, 0), "0, less than 1"),
    ("block_count", (T.INT64, -(2**63)), "-9,223,372,036,854,775,808, less than 1"),
    ("block_count", (T.FLOAT32, math.nan), "nan, not a whole number of at least 1"),
    ("block_count", (T.FLOAT64, 2.0), "2.0, not a whole number of at least 1"),
    ("block_count", (T.STRING, "2"), "the string '2', not a whole number"),
    ("block_count", (T.BOOL, True), "the boolean True, not a whole number"),
    ("block_count", (T.ARRAY, (T.UINT32, [1, 1])), "an array of 2 values, one per layer"),
    ("embedding_length", (T.FLOAT32, math.inf), "inf, not a whole number"),
    ("embedding_length", (T.FLOAT64, -math.inf), "-inf, not a whole number"),
    ("embedding_length", (T.UINT64, U64_MAX), "18,446,744,073,709,551,615, but token_embd.weight "
                                              "is 64 wide"),
    ("embedding_length", (T.UINT32, 32), "32, but token_embd.weight is 64 wide"),
    ("attention.head_count", (T.FLOAT64, math.nan), "nan, not a whole number"),
    ("attention.head_count", (T.UINT64, 2**40), "1,099,511,627,776, more than the 64 rows of "
                                                "blk.0.attn_q.weight"),
    ("attention.head_count", (T.INT32, -4), "-4, less than 1"),
    ("attention.head_count_kv", (T.FLOAT32, 1.5), "1.5, not a whole number"),
    ("attention.head_count_kv", (T.UINT32, 0), "0, less than 1"),
    ("attention.head_count_kv", (T.UINT32, 10**9), "1,000,000,000, more than the 64 rows"),
    ("context_length", (T.FLOAT32, -math.inf), "-inf, not a whole number"),
    ("context_length", (T.INT64, -1), "-1, less than 1"),
    ("feed_forward_length", (T.UINT64, 2**50), "1,125,899,906,842,624, but "
                                               "blk.0.ffn_down.weight takes 96 inputs"),
    ("feed_forward_length", (T.FLOAT64, 96.5), "96.5, not a whole number"),
    ("rope.dimension_count", (T.UINT32, 2**31), "2,147,483,648, more than the 64 rows"),
    ("rope.dimension_count", (T.ARRAY, (T.STRING, ["a"])), "an array of 1 values"),
]


@pytest.mark.parametrize(("key", "typed", "said"), BAD, ids=[f"{k}={v[1]!r}"[:40]
                                                                for k, v, _ in BAD])
def test_a_hostile_count_is_one_line_naming_the_key(cli, base: Path, tmp_path: Path,  # noqa: ANN001
                                                    layer_table: list[int], key: str,
                                                    typed: tuple[Any, Any], said: str) -> None:
    path = tmp_path / "m.gguf"
    rewrite(base, path, {f"llama.{key}": typed})
    for command in (["run", "hi"], ["heads", "hi"], ["tokens", "hi"]):
        with memory_headroom(2**30):
            got = cli(*command, "--model", str(path), "--json")
        got.assert_usage_error(f"attncli: error: {path}: metadata llama.{key} is {said}")
    assert all(layers <= LAYERS for layers in layer_table), layer_table
    assert said in describe_gguf(path)["reason"]


def test_the_counts_are_checked_before_the_layer_types_are_listed(tmp_path: Path,
                                                                  base: Path) -> None:
    """build_config itself refuses, so no caller builds a per-layer list first."""
    path = tmp_path / "m.gguf"
    rewrite(base, path, {"llama.block_count": (T.UINT64, U64_MAX)})
    with memory_headroom(2**30), pytest.raises(AttnCliError, match="holds tensors for 2 layers"):
        build_config(read_header(path))


def test_the_unchanged_file_still_opens(base: Path, layer_table: list[int]) -> None:
    """The control: the same copy with the counts as written opens, with its two layers."""
    copy = base.with_name("copy.gguf")
    rewrite(base, copy, {"llama.block_count": (T.UINT32, LAYERS)})
    opened = open_gguf(copy)
    assert opened.config()["num_hidden_layers"] == LAYERS and layer_table == [LAYERS]
    assert "model.layers.1.self_attn.q_proj.weight" in opened.shapes()


def test_a_layer_index_with_many_digits_is_not_a_layer(tmp_path: Path) -> None:
    """blk.<4,000 digits>.x is never turned into an int (Python refuses such a string)."""
    from attncli.models.sources.gguf.counts import _LAYER

    assert _LAYER.match("blk." + "9" * 4000 + ".attn_q.weight") is None
    assert _LAYER.match("blk.007.attn_q.weight") is None  # not how llama.cpp names layer 7
    match = _LAYER.match("blk.12.attn_q.weight")
    assert match is not None and match.group(1) == "12"


@pytest.fixture(scope="module")
def gemma3(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.gguf_fixtures import write_family
    from tests.models.gguf.test_gguf_families import FAMILIES, _model

    path = tmp_path_factory.mktemp("gemma3") / "gemma3.gguf"
    write_family(path, "gemma3", _model("gemma3"), FAMILIES["gemma3"][2])
    return path


def _swa(period: int, layers: int) -> list[str]:
    """llama.cpp's llama_hparams::set_swa_pattern, written out: local where n == 0 or
    il % n < n - 1."""
    return ["sliding_attention" if period == 0 or il % period < period - 1 else "full_attention"
            for il in range(layers)]


@pytest.mark.parametrize(("typed", "local"), [
    ((T.UINT32, 2), _swa(2, 7)),
    ((T.UINT32, 0), _swa(0, 7)),
    ((T.INT32, 6), _swa(6, 7)),
    ((T.ARRAY, (T.BOOL, [True, False] * 3 + [True])), _swa(2, 7)),
    ((T.ARRAY, (T.UINT8, [0] * 7)), ["full_attention"] * 7),
])
def test_a_sliding_window_pattern_is_a_period_or_one_flag_per_layer(
        gemma3: Path, tmp_path: Path, typed: tuple[Any, Any], local: list[str]) -> None:
    path = tmp_path / "m.gguf"
    rewrite(gemma3, path, {"gemma3.attention.sliding_window_pattern": typed})
    assert open_gguf(path).config()["layer_types"] == local


@pytest.mark.parametrize(("typed", "said"), [
    ((T.STRING, "6"), "the string '6', not a period or one flag per layer"),
    ((T.FLOAT32, math.nan), "nan, not a period or one flag per layer"),
    ((T.INT32, -6), "-6, not a period or one flag per layer"),
    ((T.ARRAY, (T.BOOL, [True] * 3)), "a sliding-window pattern of 3 layers, not 7"),
    ((T.ARRAY, (T.STRING, ["a"] * 7)), "an array of 7 values, not a period or one flag"),
])
def test_a_hostile_sliding_window_pattern_is_one_line(gemma3: Path, tmp_path: Path,
                                                      typed: tuple[Any, Any], said: str) -> None:
    path = tmp_path / "m.gguf"
    rewrite(gemma3, path, {"gemma3.attention.sliding_window_pattern": typed})
    with pytest.raises(AttnCliError, match=f"^{path}: a gemma3 GGUF has ") as caught:
        open_gguf(path)
    assert said in str(caught.value)


@pytest.mark.parametrize(("no", "said"), [(0, "part 1 of"), (1, "part 2 of"), (7, "one of")])
def test_a_split_gguf_part_is_named_as_one(cli, base: Path, tmp_path: Path,  # noqa: ANN001
                                           no: int, said: str) -> None:
    """gguf-split's parts (LM Studio keeps them as MODEL-00001-of-00003.gguf) said 'metadata
    block_count is 30, but the file holds tensors for 11 layers', which names no cause."""
    path = tmp_path / "tiny-00001-of-00002.gguf"
    rewrite(base, path, {"split.no": (T.UINT16, no), "split.count": (T.UINT16, 2)})
    cli("run", "the cat", "--model", str(path)).assert_usage_error(
        f"{path} is {said} a GGUF split into 2 files; attncli reads a model kept in one file: "
        "join them once with `llama-gguf-split --merge FIRST-PART.gguf MODEL.gguf`")
    assert "a GGUF split into 2 files" in describe_gguf(path)["reason"]
    rewrite(base, path, {"split.no": (T.UINT16, 0), "split.count": (T.UINT16, 1)})  # whole
    assert cli("run", "the cat", "--model", str(path)).code == 0


# (metadata changed, what the line says): checks the family makes of the config the metadata is
# read into, which name config.json's keys (rope_theta, num_key_value_heads, rope_scaling) in a
# folder's checkpoint, said of the GGUF's own metadata keys.
SAID_OF_METADATA = [
    ({"llama.rope.freq_base": (T.FLOAT32, -5.0)},
     "'s metadata: llama.rope.freq_base must be a finite number above 1 (got -5.0)"),
    ({"llama.attention.head_count_kv": (T.UINT32, 3)},
     ": llama.attention.head_count_kv must divide llama.attention.head_count (got 3 and "),
    ({"llama.rope.scaling.type": (T.STRING, "weird")},
     "'s metadata sets llama.rope.scaling.type='weird', which attncli does not implement"),
]


@pytest.mark.parametrize(("changes", "said"), SAID_OF_METADATA,
                         ids=[next(iter(c)) for c, _ in SAID_OF_METADATA])
def test_a_config_check_names_the_metadata_key_not_config_json(
        cli, base: Path, tmp_path: Path, changes: dict[str, Any], said: str) -> None:  # noqa: ANN001
    """A GGUF has no config.json: a line that named it and its keys sent the reader to a file
    that is not there, under names the file does not use."""
    path = tmp_path / "m.gguf"
    rewrite(base, path, changes)
    for command in (["run", "hi"], ["heads", "hi"], ["generate", "hi", "--max-new-tokens", "1"]):
        got = cli(*command, "--model", str(path))
        got.assert_usage_error(f"attncli: error: {path}{said}")
        assert "config.json" not in got.err
