"""Property tests: arbitrary and hostile JSON in a checkpoint's config.json, its shard index, its
tokenizer.json and the folders `models` lists never give a traceback, only exit 0 or one line
and exit 2 (`models`: always exit 0, strict JSON, the folder listed or said unreadable)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attncli.models.hf_tokens import load_tokenizer
from tests.conftest import CliRun
from tests.llama_fixtures import save_family
from tests.redteam.test_redteam_configs import DEEP, HUGE_INT, RAW

# Property tests, each over 40 generated files: slow (make check leaves them to make test).
pytestmark = pytest.mark.slow

SETTINGS = settings(max_examples=40, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])
SCALARS = (st.none() | st.booleans() | st.integers(-(10**40), 10**40)
           | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12)
           | st.sampled_from([0, 1, 2, -1, 0.5, 1.0, 2**31, 2**63, 1e-300, 1e300, 3.5e38]))
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.text(max_size=10), inner, max_size=4), max_leaves=10)
HOSTILE = st.sampled_from([DEEP, HUGE_INT, "1e999", "-1e999", "NaN", "Infinity",
                           "[" + ",".join(["0"] * 50000) + "]", "{", '"\\ud800"'])
ROPE = st.fixed_dictionaries({"rope_type": st.sampled_from(
    ["default", "linear", "dynamic", "llama3", "yarn", "longrope"]) | VALUES},
    optional={"factor": VALUES | st.floats(0.5, 100), "low_freq_factor": VALUES,
              "high_freq_factor": VALUES, "original_max_position_embeddings": VALUES,
              "rope_theta": VALUES, "partial_rotary_factor": VALUES})
KEYS = ["num_hidden_layers", "num_attention_heads", "num_key_value_heads", "hidden_size",
        "head_dim", "intermediate_size", "vocab_size", "max_position_embeddings",
        "rms_norm_eps", "rope_theta", "rope_scaling", "rope_parameters", "sliding_window",
        "partial_rotary_factor", "layer_types", "hidden_act", "model_type", "max_window_layers",
        "use_sliding_window", "attention_bias", "n_layer", "n_head", "layer_norm_epsilon"]


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("prop") / "hub" / "models--Org--m" / "snapshots" / "a"
    save_family(folder, "mistral", seed=4, tokenizer="sp")
    return folder


def _usage_or_ok(got: CliRun) -> None:
    assert got.code in (0, 2), got.err
    if got.code == 2:
        assert got.out == ""
        assert got.err.startswith("attncli: error: ") and got.err.count("\n") == 1, got.err


def _models_lists(cli, folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(folder.parent.parent.parent))
    monkeypatch.setenv("ATTNCLI_MODEL_CACHE", str(folder.parent.parent.parent / "no-attncli"))
    got = cli("models", "--json")
    assert got.code == 0, got.err
    doc = got.json()
    assert len(doc["models"]) + len(doc["unreadable"]) == 1


def _text(value: Any, raw: str | None) -> str:
    return raw if raw is not None else json.dumps(value)


@SETTINGS
@given(key=st.sampled_from(KEYS), value=VALUES | ROPE, raw=st.none() | HOSTILE)
def test_any_config_value(cli, llama_dir: Path, monkeypatch: pytest.MonkeyPatch, key: str,
                          value: Any, raw: str | None) -> None:
    saved = (llama_dir / "config.json").read_text()
    base = json.loads(saved)
    try:
        text = json.dumps({**base, key: RAW}).replace(json.dumps(RAW), _text(value, raw))
        (llama_dir / "config.json").write_text(text)
        _usage_or_ok(cli("run", "The cat sat", "--model", str(llama_dir), "--json"))
        _models_lists(cli, llama_dir, monkeypatch)
    finally:
        (llama_dir / "config.json").write_text(saved)


@SETTINGS
@given(doc=VALUES, weight_map=st.dictionaries(st.text(max_size=30), VALUES, max_size=5),
       raw=st.none() | HOSTILE)
def test_any_shard_index(cli, llama_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                         doc: Any, weight_map: dict[str, Any], raw: str | None) -> None:
    folder = tmp_path / "hub" / "models--Org--m" / "snapshots" / "a"
    if not folder.exists():
        shutil.copytree(llama_dir, folder)
        (folder / "model.safetensors").rename(folder / "shard.safetensors")
    index = doc if isinstance(doc, list | str) else {"weight_map": weight_map}
    (folder / "model.safetensors.index.json").write_text(_text(index, raw))
    _usage_or_ok(cli("run", "The cat", "--model", str(folder)))
    _models_lists(cli, folder, monkeypatch)


TOKENIZER_KEYS = ["model", "pre_tokenizer", "decoder", "normalizer", "added_tokens",
                  "post_processor", "truncation", "padding", "version"]


@SETTINGS
@given(key=st.sampled_from(TOKENIZER_KEYS), value=VALUES, raw=st.none() | HOSTILE,
       whole=st.booleans())
def test_any_tokenizer_json(cli, llama_dir: Path, tmp_path: Path, key: str, value: Any,
                            raw: str | None, whole: bool) -> None:
    folder = tmp_path / "tok"
    if not folder.exists():
        shutil.copytree(llama_dir, folder)
    base = json.loads((llama_dir / "tokenizer.json").read_text())
    if whole:
        text = _text(value, raw)
    else:
        text = json.dumps({**base, key: RAW}).replace(json.dumps(RAW), _text(value, raw))
    (folder / "tokenizer.json").write_text(text)
    load_tokenizer.cache_clear()  # the folder's tokenizer is cached by path
    _usage_or_ok(cli("tokens", "The cat 猫", "--model", str(folder), "--json"))
    _usage_or_ok(cli("run", "The cat 猫", "--model", str(folder), "--json"))
