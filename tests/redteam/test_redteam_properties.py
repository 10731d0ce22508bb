"""Property tests: arbitrary --inputs JSON, safetensors headers and config.json values.

Whatever the file holds, attncli either succeeds with strict JSON or exits 2 with one line; never
a traceback, never a hang, and never growth past an address-space limit (set on this process's
soft RLIMIT_AS for the call, then restored).
"""

from __future__ import annotations

import io
import json
import resource
import struct
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attncli.cli.main import execute
from tests.conftest import ROOT
from tests.gpt2_fixtures import tiny_tensors

HEADROOM = 2 * 2**30  # bytes of address space a call may add
PROPERTY = settings(max_examples=20, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])
TOY_CONFIG = json.loads((ROOT / "samples" / "toy-gpt2" / "config.json").read_text())


def _address_space() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize:"))


@contextmanager
def _memory_limit() -> Iterator[None]:
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = _address_space() + HEADROOM
    resource.setrlimit(resource.RLIMIT_AS, (min(limit, hard) if hard > 0 else limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def run_cli(*args: str) -> tuple[int, bytes, str]:
    """execute(args) with stdout and stderr captured, under the memory limit."""
    out, err = io.BytesIO(), io.StringIO()
    saved = sys.stdout, sys.stderr
    wrapper = io.TextIOWrapper(out, encoding="utf-8", errors="replace")
    sys.stdout, sys.stderr = wrapper, err
    try:
        with _memory_limit():
            code = execute(list(args))
        wrapper.flush()
        data = out.getvalue()
    finally:
        sys.stdout, sys.stderr = saved
    return code, data, err.getvalue()


def _strict(name: str) -> None:
    raise AssertionError(f"non-strict JSON: {name}")


def check_outcome(code: int, out: bytes, err: str, as_json: bool) -> None:
    """Success with strict JSON, or exit 2 with exactly one line, never out of memory."""
    assert "Traceback" not in err
    if code == 0:
        if as_json:
            json.loads(out, parse_constant=_strict)
        return
    assert code == 2, err
    assert err.startswith("attncli: error: ") and err.count("\n") == 1, err
    assert "out of memory" not in err, err


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=30)
numbers = st.integers(-10**30, 10**30) | st.floats()
shaped_inputs = st.integers(1, 5).flatmap(lambda width: st.fixed_dictionaries({
    "tokens": st.lists(st.text(max_size=6), min_size=1, max_size=5),
    "vectors": st.lists(st.lists(numbers, min_size=width, max_size=width), min_size=1,
                        max_size=5)}))


@PROPERTY
@given(doc=json_values | shaped_inputs, as_json=st.booleans())
def test_any_inputs_json(doc: Any, as_json: bool) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "inputs.json"
        path.write_text(json.dumps(doc))  # NaN and Infinity may appear: JSON's hostile corner
        args = ["run", "--inputs", str(path), "--variant", "simple"] + (["--json"] if as_json
                                                                         else [])
        check_outcome(*run_cli(*args), as_json=as_json)


TENSOR_NAMES = ["wte.weight", "wpe.weight", "h.0.ln_1.weight", "h.0.attn.c_attn.weight",
                "h.1.mlp.c_fc.bias", "h.99999999.ln_1.bias", "transformer.wte.weight"]
header_entries = st.fixed_dictionaries({
    "dtype": st.sampled_from(["F32", "F16", "BF16", "F64", "I64", "U8", "BOOL", "F8_E4M3"])
    | st.text(max_size=5),
    "shape": st.lists(st.integers(-2, 2**40), max_size=3),
    "data_offsets": st.lists(st.integers(-1, 2**40), min_size=0, max_size=3),
})
headers = st.dictionaries(st.sampled_from(TENSOR_NAMES) | st.text(max_size=10),
                          header_entries | json_values, max_size=6)


@PROPERTY
@given(header=headers, data=st.binary(max_size=256), config=st.none() | json_values)
def test_any_safetensors_header(header: dict[str, Any], data: bytes, config: Any) -> None:
    with tempfile.TemporaryDirectory() as folder:
        raw = json.dumps(header).encode()
        Path(folder, "model.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw + data)
        if config is not None:
            Path(folder, "config.json").write_text(json.dumps(config))
        check_outcome(*run_cli("run", "!#", "--model", folder, "--num-heads", "2", "--json"),
                      as_json=True)


CONFIG_KEYS = ["n_layer", "n_head", "n_embd", "n_inner", "n_positions", "vocab_size",
               "layer_norm_epsilon", "model_type", "activation_function", "scale_attn_weights"]


@PROPERTY
@given(changes=st.dictionaries(st.sampled_from(CONFIG_KEYS),
                               json_values | st.integers(-2, 10**12), max_size=3),
       command=st.sampled_from(["run", "heads"]))
def test_any_config_values(changes: dict[str, Any], command: str) -> None:
    from safetensors.torch import save_file

    with tempfile.TemporaryDirectory() as folder:
        save_file(tiny_tensors(), str(Path(folder, "model.safetensors")))
        config = {**TOY_CONFIG, "n_embd": 8, "n_head": 2, "n_layer": 2, "n_positions": 8,
                  "vocab_size": 16, **changes}
        Path(folder, "config.json").write_text(json.dumps(config))
        check_outcome(*run_cli(command, "!#", "--model", folder, "--json"), as_json=True)
