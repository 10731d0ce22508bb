"""Red team, checkpoints: hostile config.json, shard indexes and tokenizer.json end in one line
and exit 2, read by the one JSON reader and checked as values, never a traceback or exit 0 with
nonsense; `models` lists a hostile folder as unreadable and still exits 0."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, CliRun
from tests.llama_fixtures import save_family
from tests.redteam.test_redteam import ATTNCLI, limit_memory

TOY = ROOT / "samples" / "toy-gpt2"
RAW = "@@raw@@"  # a placeholder that the JSON text of a value replaces
DEEP = "[" * 5000 + "]" * 5000
HUGE_INT = "9" * 5000


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("llama") / "m"
    save_family(folder, "mistral", seed=3, tokenizer="sp")
    return folder


def config_text(base: dict[str, Any], key: str, raw: str) -> str:
    """base as JSON text with config[key] written as raw (which may be JSON no dict holds)."""
    return json.dumps({**base, key: RAW}).replace(json.dumps(RAW), raw)


def hostile_copy(source: Path, target: Path, key: str, raw: str) -> Path:
    """A copy of the model folder source whose config.json has key set to the raw JSON."""
    shutil.copytree(source, target)
    base = json.loads((source / "config.json").read_text())
    (target / "config.json").write_text(config_text(base, key, raw))
    return target


def run_process(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[
        bytes]:
    """The installed attncli, under a memory limit."""
    import os

    full = {**os.environ, "NO_COLOR": "1", "COLUMNS": "100", **(env or {})}
    return subprocess.run([str(ATTNCLI), *args], capture_output=True, env=full, timeout=600,
                          check=False, preexec_fn=limit_memory)


def assert_one_line(proc: subprocess.CompletedProcess[bytes], *names: str) -> None:
    """Exit 2, nothing on stdout, one stderr line starting attncli: error: naming names."""
    err = proc.stderr.decode("utf-8", "replace")
    assert "Traceback" not in err, err
    assert proc.returncode == 2, err
    assert proc.stdout == b""
    assert err.startswith("attncli: error: ") and err.count("\n") == 1, err
    for name in names:
        assert name in err, err


LLAMA_HOSTILE = [
    ("rope_parameters", '{"rope_type": "default", "rope_theta": 1e999}', "non-finite"),
    ("rope_parameters", '{"rope_type": "default", "rope_theta": 1e300}', "rope_theta"),
    ("rope_parameters", '{"rope_type": "default", "rope_theta": 0}', "rope_theta"),
    ("rope_parameters", '{"rope_type": "default", "rope_theta": "big"}', "rope_theta"),
    ("rms_norm_eps", "1e999", "non-finite"),
    ("rms_norm_eps", "1e300", "rms_norm_eps"),
    ("rms_norm_eps", "0", "rms_norm_eps"),
    ("num_hidden_layers", HUGE_INT, "non-finite"),
    ("num_hidden_layers", "1e30", "num_hidden_layers"),
    ("num_hidden_layers", str(10**18), "num_hidden_layers"),
    ("num_hidden_layers", "4000", "num_hidden_layers=4,000"),
    ("sliding_window", str(10**30), "sliding_window"),
    ("sliding_window", str(2**40), "sliding_window"),
    ("sliding_window", "0", "sliding_window"),
    ("max_position_embeddings", str(10**25), "max_position_embeddings"),
    ("num_attention_heads", str(10**9), "q_proj.weight"),
    ("num_key_value_heads", "3", "num_key_value_heads"),
    ("head_dim", "7", "head_dim"),
    ("head_dim", str(10**12), "head_dim"),
    ("hidden_act", DEEP, "nested more than"),
    ("hidden_act", "[" * 1000 + "]" * 1000, "hidden_act"),
    ("vocab_size", HUGE_INT, "non-finite"),
    ("partial_rotary_factor", "2", "partial_rotary_factor"),
    ("partial_rotary_factor", "0", "partial_rotary_factor"),
    ("partial_rotary_factor", '"half"', "partial_rotary_factor"),
    ("rope_scaling", '{"rope_type": "yarn", "factor": 2.0}', "'yarn'"),
    ("rope_scaling", '{"rope_type": ["linear"]}', "rope_type"),
    ("rope_scaling", '{"rope_type": "linear"}', "factor"),
    ("rope_scaling", '{"rope_type": "linear", "factor": "2"}', "factor"),
    ("rope_scaling", '{"rope_type": "linear", "factor": 1e999}', "non-finite"),
    ("rope_scaling", '{"rope_type": "dynamic", "factor": 0.5}', "factor"),
    ("rope_scaling", '{"rope_type": "llama3", "factor": 8, "low_freq_factor": 4, '
                     '"high_freq_factor": 4}', "high_freq_factor"),
    ("rope_scaling", '{"rope_type": "llama3", "factor": 8, "high_freq_factor": 4}',
     "low_freq_factor"),
    ("rope_scaling", '{"rope_type": "llama3", "factor": 8, "low_freq_factor": 1, '
                     '"high_freq_factor": 4, "original_max_position_embeddings": 1e40}',
     "original_max_position_embeddings"),
    ("rope_scaling", '[1, 2]', "rope_scaling"),
    ("rope_scaling", '{"full_attention": {"rope_type": "default"}}', "per layer type"),
    ("rope_scaling", '{"rope_type": "linear", "factor": 2, "partial_rotary_factor": 0.5}',
     "partial_rotary_factor=0.5"),
    ("layer_types", '["full_attention"]', "layer_types"),
    ("layer_types", '[1, 2, 3]', "layer_types"),
    ("use_sliding_window", '"yes"', "use_sliding_window"),
    ("model_type", DEEP, "nested more than"),
]


@pytest.mark.parametrize(("key", "raw", "named"), LLAMA_HOSTILE,
                         ids=[f"{k}={r[:12]}" for k, r, _ in LLAMA_HOSTILE])
def test_a_hostile_llama_config_is_one_line(cli, llama_dir: Path, tmp_path: Path, key: str,
                                            raw: str, named: str) -> None:
    if key in ("use_sliding_window",):
        base = {**json.loads((llama_dir / "config.json").read_text()), "model_type": "qwen2"}
        shutil.copytree(llama_dir, tmp_path / "m")
        (tmp_path / "m" / "config.json").write_text(config_text(base, key, raw))
        folder = tmp_path / "m"
    else:
        folder = hostile_copy(llama_dir, tmp_path / "m", key, raw)
    for args in (("run", "The cat sat", "--model", str(folder), "--json"),
                 ("explain", "The cat", "--model", str(folder)),
                 ("heads", "The cat", "--model", str(folder))):
        cli(*args).assert_usage_error(named)


def test_dynamic_rope_with_a_two_wide_head_is_refused(cli, llama_dir: Path,
                                                     tmp_path: Path) -> None:
    folder = hostile_copy(llama_dir, tmp_path / "m", "rope_scaling",
                          '{"rope_type": "dynamic", "factor": 2.0}')
    config = json.loads((folder / "config.json").read_text())
    config["head_dim"] = 2
    (folder / "config.json").write_text(json.dumps(config))
    cli("run", "hi", "--model", str(folder)).assert_usage_error("dim / (dim - 2)")


def test_dynamic_rope_whose_base_overflows_is_refused(cli, llama_dir: Path,
                                                      tmp_path: Path) -> None:
    folder = hostile_copy(llama_dir, tmp_path / "m", "rope_scaling",
                          '{"rope_type": "dynamic", "factor": 1e38}')
    config = json.loads((folder / "config.json").read_text())
    config["max_position_embeddings"] = 1  # every text is past it: the base grows
    (folder / "config.json").write_text(json.dumps(config))
    cli("run", "The cat sat on the mat", "--model", str(folder)).assert_usage_error(
        "past what float32 holds")


GPT2_HOSTILE = [
    ("n_layer", HUGE_INT, "non-finite"),
    ("n_layer", str(10**30), "n_layer"),
    ("n_head", "1e30", "n_head"),
    ("n_positions", str(10**20), "n_positions"),
    ("layer_norm_epsilon", "1e999", "non-finite"),
    ("layer_norm_epsilon", "1e300", "layer_norm_epsilon"),
    ("layer_norm_epsilon", "Infinity", "Infinity"),
    ("activation_function", "[" * 1000 + "]" * 1000, "activation_function"),
    ("activation_function", json.dumps("x" * 100000), "activation_function"),
    ("scale_attn_weights", '"yes"', "scale_attn_weights"),
    ("add_cross_attention", DEEP, "nested more than"),
]


@pytest.mark.parametrize(("key", "raw", "named"), GPT2_HOSTILE,
                         ids=[f"{k}={r[:12]}" for k, r, _ in GPT2_HOSTILE])
def test_a_hostile_gpt2_config_is_one_line(cli, tmp_path: Path, key: str, raw: str,
                                           named: str) -> None:
    folder = hostile_copy(TOY, tmp_path / "m", key, raw)
    got = cli("run", "hello there", "--model", str(folder), "--json")
    got.assert_usage_error(named)
    assert len(got.err) < 500  # the value is named, not copied whole


INDEX_HOSTILE = [
    (DEEP, "nested more than"),
    ('{"weight_map": {"a": ' + HUGE_INT + '}}', "non-finite"),
    ('{"weight_map": [1, 2]}', "weight_map"),
    ('{"weight_map": {}}', "weight_map"),
    ('{"weight_map": {"model.embed_tokens.weight": "../model.safetensors"}}', "file name"),
    ('{"weight_map": {"model.embed_tokens.weight": ' + "[" * 900 + "]" * 900 + '}}',
     "file name"),
    ('{"weight_map": {"model.embed_tokens.weight": "' + "x" * 300 + '"}}', "file name"),
    ('{"weight_map": {"model.embed_tokens.weight": "absent.safetensors"}}', "absent"),
    ("[" + ",".join(["0"] * 200000) + "]", "weight_map"),
]


@pytest.mark.parametrize(("text", "named"), INDEX_HOSTILE, ids=lambda v: str(v)[:16])
def test_a_hostile_shard_index_is_one_line(cli, llama_dir: Path, tmp_path: Path, text: str,
                                           named: str) -> None:
    folder = tmp_path / "m"
    shutil.copytree(llama_dir, folder)
    (folder / "model.safetensors").unlink()
    (folder / "model.safetensors.index.json").write_text(text)
    cli("run", "hi", "--model", str(folder)).assert_usage_error(named)


TOKENIZER_HOSTILE = [
    (DEEP, "nested more than"),
    ('{"version": ' + HUGE_INT + '}', "non-finite"),
    ("[" + ",".join(["1"] * 300000) + "]", "not a JSON object"),
    ('{"model": ' + "[" * 1000 + "]" * 1000 + '}', "tokenizer.json"),
    ('{"model": {"type": "BPE", "vocab": 5}}', "tokenizer.json"),
    ('{"added_tokens": [{"id": -1, "content": "x"}]}', "tokenizer.json"),
    ('{"a": NaN}', "NaN"),
]


@pytest.mark.parametrize(("text", "named"), TOKENIZER_HOSTILE, ids=lambda v: str(v)[:16])
def test_a_hostile_tokenizer_json_is_one_line(cli, llama_dir: Path, tmp_path: Path, text: str,
                                              named: str) -> None:
    folder = tmp_path / "m"
    shutil.copytree(llama_dir, folder)
    (folder / "tokenizer.json").write_text(text)
    cli("run", "hi", "--model", str(folder)).assert_usage_error(named)
    cli("tokens", "hi", "--model", str(folder)).assert_usage_error(named)


def test_hostile_folders_as_real_runs(llama_dir: Path, tmp_path: Path) -> None:
    """The installed attncli on each kind of hostile file: one line, exit 2, no traceback."""
    config = hostile_copy(llama_dir, tmp_path / "config", "rope_parameters",
                          '{"rope_theta": 1e999}')
    assert_one_line(run_process("run", "hi", "--model", str(config)), "non-finite")
    gpt2 = hostile_copy(TOY, tmp_path / "gpt2", "n_layer", HUGE_INT)
    assert_one_line(run_process("run", "hi", "--model", str(gpt2)), "non-finite")
    index = tmp_path / "index"
    shutil.copytree(llama_dir, index)
    (index / "model.safetensors").unlink()
    (index / "model.safetensors.index.json").write_text(DEEP)
    assert_one_line(run_process("run", "hi", "--model", str(index)), "nested more than")
    tokenizer = tmp_path / "tokenizer"
    shutil.copytree(llama_dir, tokenizer)
    (tokenizer / "tokenizer.json").write_text('{"model": {"type": "BPE", "vocab": 5}}')
    assert_one_line(run_process("tokens", "hi", "--model", str(tokenizer)), "tokenizer.json")
    window = hostile_copy(llama_dir, tmp_path / "window", "sliding_window", str(10**30))
    assert_one_line(run_process("explain", "hi", "--model", str(window)), "sliding_window")


def _usage_or_ok(got: CliRun) -> None:
    assert got.code in (0, 2), got.err
    if got.code == 2:
        assert got.err.startswith("attncli: error: ") and got.err.count("\n") == 1, got.err
