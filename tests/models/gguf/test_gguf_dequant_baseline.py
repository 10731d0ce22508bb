"""The dequantizers' baseline clone (a CPU without AVX2 runs it; this one loads the widest):
_dequant.c built without clones for plain x86-64 and loaded from a temporary folder, then every
one of the 65,536 halves, as F16 values and in every f16 scale field of every type (subnormals,
infinities, NaNs, -0), and random Q6_K blocks, against the gguf package, bit for bit (a NaN's
payload aside: tests/models/gguf/test_gguf_dequant.py says why)."""

from __future__ import annotations

import importlib.util
import platform
import shutil
import subprocess
import sysconfig
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from gguf import GGML_QUANT_SIZES

from attncli.models.sources.gguf import dequant
from tests.models.gguf.test_gguf_dequant import SCALES, Q, _gguf, assert_same_bits

pytestmark = pytest.mark.slow  # a build of the C code, and 65,536 blocks a scale field
EVERY_HALF = np.arange(1 << 16, dtype="<u2")  # (65536,)


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    if shutil.which("gcc") is None or platform.machine() != "x86_64":
        pytest.skip("needs gcc on x86-64")
    source = Path(dequant.__file__).with_name("_dequant.c")
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    built = tmp_path_factory.mktemp("baseline") / f"_dequant{suffix}"
    compiled = subprocess.run(
        ["gcc", "-shared", "-fPIC", "-O3", "-ffp-contract=off", "-march=x86-64",
         "-DATTNCLI_NO_CLONES", f"-I{sysconfig.get_paths()['include']}", str(source), "-o",
         str(built)], capture_output=True, text=True, check=False)
    assert compiled.returncode == 0, compiled.stderr
    spec = importlib.util.spec_from_file_location("attncli.models.sources.gguf._dequant", built)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(params=["baseline", "widest"])
def native(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """dequant.dequantize through the baseline build, or the installed one (its widest clone)."""
    if not dequant.ENABLED:
        pytest.skip("the C dequantizers are not built or are off")
    if request.param == "baseline":
        monkeypatch.setattr(dequant, "_native", request.getfixturevalue("baseline"))


@pytest.mark.usefixtures("native")
def test_every_half_as_an_f16_value() -> None:
    blocks = EVERY_HALF.view(np.uint8).reshape(64, -1)  # (64, 2,048): 1,024 halves a row
    assert_same_bits(dequant.dequantize(blocks, Q.F16), _gguf(blocks, Q.F16))


@pytest.mark.parametrize("qtype", list(SCALES), ids=lambda q: q.name)
def test_every_half_in_every_scale_field(qtype: Q, baseline: ModuleType,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Both builds against one reference a field (the gguf package's dequantizing of 65,536
    blocks is most of this test's time)."""
    if not dequant.ENABLED:
        pytest.skip("the C dequantizers are not built or are off")
    size = GGML_QUANT_SIZES[qtype][1]
    rng = np.random.default_rng(int(qtype))
    widest = dequant._native
    for offset in SCALES[qtype]:
        data = rng.integers(0, 256, (EVERY_HALF.size, size), dtype=np.uint8)  # (65536, size)
        data[:, offset:offset + 2] = EVERY_HALF.view(np.uint8).reshape(-1, 2)
        reference = _gguf(data, qtype)
        for build in (baseline, widest):
            monkeypatch.setattr(dequant, "_native", build)
            assert_same_bits(dequant.dequantize(data, qtype), reference)


@pytest.mark.usefixtures("native")
def test_random_q6_k_blocks() -> None:
    data = np.random.default_rng(6).integers(0, 256, (4096, 210), dtype=np.uint8)
    data[:, 208:210] = [0x00, 0x3C]  # d: 1.0, so every value's bits are the 6-bit code's own
    assert_same_bits(dequant.dequantize(data, Q.Q6_K), _gguf(data, Q.Q6_K))
