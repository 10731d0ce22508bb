"""Model runs on a GPU: a device torch lacks refused in one line, each tensor moved to the
device as the family reads it, the device's free memory checked, and (with CUDA) the same
numbers as the CPU's."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from attncli.core.request import Request
from attncli.errors import AttnCliError
from attncli.models import memory
from attncli.models.memory import computing_on, on_device
from attncli.models.sources.device import OnDevice
from attncli.models.sources.formats import open_source
from bench.shapes import LlamaShape, Q, write_llama_shape
from tests.tolerance import assert_near

TOY = "samples/toy-gpt2"
TINY = LlamaShape("tiny", 2, 256, 4, 2, 512, vocab=600)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA message")
@pytest.mark.parametrize("command", ["run", "explain"])
def test_cuda_missing_is_one_line_exit_2(cli, command: str) -> None:  # noqa: ANN001
    cli(command, "the cat sat", "--model", TOY, "--device", "cuda").assert_usage_error(
        "--device cuda was asked for, but no CUDA device is available")


@pytest.mark.skipif(torch.backends.mps.is_available(), reason="checks the no-MPS message")
def test_mps_missing_is_one_line_exit_2(cli) -> None:  # noqa: ANN001
    cli("run", "the cat sat", "--model", TOY, "--device", "mps").assert_usage_error(
        "--device mps was asked for, but no MPS device")
    cli("run", "the cat sat", "--device", "mps").assert_usage_error("no MPS device")


def test_auto_without_a_gpu_runs_on_the_cpu_with_the_same_numbers(cli) -> None:  # noqa: ANN001
    if torch.cuda.is_available():
        pytest.skip("auto picks CUDA here; test_cuda_numbers_equal_the_cpus compares it")
    auto = cli("run", "the cat sat", "--model", TOY, "--device", "auto", "--json").json()
    cpu = cli("run", "the cat sat", "--model", TOY, "--json").json()
    assert auto["weights"] == cpu["weights"] and auto["context"] == cpu["context"]


def test_each_tensor_moves_to_the_device_as_it_is_read(tmp_path: Path) -> None:
    """The meta device stands in for a GPU: shapes and config pass through, data moves."""
    source = open_source(write_llama_shape(tmp_path / "t.gguf", TINY, Q.Q8_0))
    moved = on_device(source, torch.device("meta"), "t.gguf")
    assert isinstance(moved, OnDevice)
    assert moved.shapes() == source.shapes() and moved.config() == source.config()
    name = "model.layers.0.self_attn.q_proj.weight"
    assert moved.tensor(name).device.type == "meta"
    assert moved.tensor(name).shape == source.tensor(name).shape
    assert moved.rows("model.embed_tokens.weight", [3, 1]).shape == (2, TINY.hidden)
    assert on_device(source, torch.device("cpu"), "t.gguf") is source
    with computing_on(torch.device("meta")):
        assert torch.ones(2).device.type == "meta"
    assert torch.ones(2).device.type == "cpu"


def test_a_layer_that_cannot_fit_on_the_device_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = open_source(write_llama_shape(tmp_path / "t.gguf", TINY, Q.Q8_0))
    monkeypatch.setattr(memory, "device_free_bytes", lambda device: 1 << 20)
    with pytest.raises(AttnCliError, match=r"needs one layer's weights as float32 at a time "
                       r"\(3 MB\) on meta, more than half its 1 MB free"):
        on_device(source, torch.device("meta"), "t.gguf")


@pytest.mark.skipif(not torch.cuda.is_available(),
                    reason="no CUDA device here: GPU numbers are compared on a machine with one")
@pytest.mark.parametrize("measure", ["weights", "norm"])
def test_cuda_numbers_equal_the_cpus(tmp_path: Path, measure: str) -> None:
    from attncli.models.run import run_heads, run_model

    path = str(write_llama_shape(tmp_path / "t.gguf", TINY, Q.Q4_K))
    req = Request(text="the cat sat on the mat", model=path, layer=-1, measure=measure)
    cpu, gpu = run_model(req), run_model(Request(**{**req.__dict__, "device": "cuda"}))
    # Wider than the house bound: a GPU's float32 matmuls sum in other orders (and blocks)
    # than the CPU's over the model's whole depth, against the CPU run, not a float64 truth.
    assert_near(torch.tensor(gpu.context), torch.tensor(cpu.context), atol=1e-4, rtol=1e-4)
    assert_near(torch.tensor(gpu.weights), torch.tensor(cpu.weights), atol=1e-5, rtol=1e-4)
    heads_cpu = run_heads(req)
    heads_gpu = run_heads(Request(**{**req.__dict__, "device": "cuda"}))
    for a, b in zip(heads_cpu.measures, heads_gpu.measures, strict=True):
        assert a["layer"] == b["layer"] and a["head"] == b["head"]
        assert_near(a["entropy"], b["entropy"], atol=1e-4, rtol=1e-4)  # the GPU bound above
