"""`attncli generate --numerics llama.cpp`: a GGUF's products on 8-bit activations and a float16
cache, as llama.cpp's CPU backend computes (the kernels are checked against exact integer sums and
ggml's quantizers in tests/models/gguf; here, that the option reaches them, is recorded, read
back, and refused where it cannot apply). Against llama.cpp itself: the runtime test below."""

from __future__ import annotations

import json
from pathlib import Path

import gguf
import numpy as np
import pytest
import torch

from tests.conftest import ROOT
from tests.gguf_fixtures import smollm2, write_k_llama
from tests.tolerance import assert_near
from tests.tools.benches import bench_module, skip_without_llama_cpp

ARGS = ("--raw", "--max-new-tokens", "4", "--view", "raw", "--json")


@pytest.fixture(scope="module")
def q4k(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("numerics") / "tiny-Q4_K.gguf"
    write_k_llama(path, gguf.GGMLQuantizationType.Q4_K, seed=3)
    return path


def _steps(doc: dict) -> list[float]:
    return [s["logprob"] for s in doc["steps"]]


def test_llama_cpp_numerics_reach_the_kernels_and_are_recorded(cli, q4k: Path) -> None:  # noqa: ANN001
    from attncli.models.generate.run import generate_model
    from attncli.models.sources.gguf.qmatmul import llama_cpp_numerics
    from attncli.records.asking import GenerationRequest, Sampling

    ran = cli("generate", "the cat sat on", "--model", str(q4k), *ARGS, "--numerics", "llama.cpp")
    assert ran.code == 0, ran.err
    doc = json.loads(ran.out)
    assert doc["config"]["numerics"] == "llama.cpp"
    request = GenerationRequest(str(q4k), "the cat sat on", raw=True, view="raw",
                                exclude_sinks=False, sampling=Sampling(max_new_tokens=4))
    with llama_cpp_numerics():  # the bench's way in, which bench/agreement.py measures
        ref = generate_model(request)
    assert [t["id"] for t in doc["answer"]] == [t.id for t in ref.answer]
    assert_near(_steps(doc), [s.logprob for s in ref.steps], atol=1e-5, rtol=1e-5)
    plain = json.loads(cli("generate", "the cat sat on", "--model", str(q4k), *ARGS).out)
    assert plain["config"]["numerics"] == "float32"
    # 8-bit activations move every log-probability: the option changed the arithmetic
    assert max(abs(a - b) for a, b in zip(_steps(doc), _steps(plain), strict=False)) > 1e-4


def test_the_api_takes_the_numerics_as_the_command_does(cli, q4k: Path) -> None:  # noqa: ANN001
    import attncli

    ran = cli("generate", "the cat sat on", "--model", str(q4k), *ARGS, "--numerics", "llama.cpp")
    assert ran.code == 0, ran.err
    doc = json.loads(ran.out)
    result = attncli.generate("the cat sat on", q4k, raw=True, max_new_tokens=4, view="raw",
                              numerics="llama.cpp")
    got = result.to_dict()
    assert got["config"]["numerics"] == "llama.cpp"
    assert [t["id"] for t in got["answer"]] == [t["id"] for t in doc["answer"]]
    assert_near(_steps(got), _steps(doc), atol=1e-5, rtol=1e-5)


def test_show_reads_the_numerics_back(cli, q4k: Path, tmp_path: Path) -> None:  # noqa: ANN001
    saved = tmp_path / "g.json"
    ran = cli("generate", "the cat", "--model", str(q4k), *ARGS, "--numerics", "llama.cpp",
              "--save-json", str(saved))
    assert ran.code == 0, ran.err
    shown = cli("show", str(saved), "--json")
    assert shown.code == 0, shown.err
    assert json.loads(shown.out)["config"]["numerics"] == "llama.cpp"
    text = cli("show", str(saved))
    assert "llama.cpp's numerics" in text.out
    doc = json.loads(saved.read_text())
    doc["config"]["numerics"] = "int4"
    saved.write_text(json.dumps(doc))
    bad = cli("show", str(saved))
    assert bad.code == 2 and "config.numerics" in bad.err and "\n" not in bad.err.rstrip("\n")


def test_refused_where_it_cannot_apply(cli) -> None:  # noqa: ANN001
    toy = ROOT / "samples" / "toy-gpt2"
    ran = cli("generate", "hi", "--model", str(toy), "--numerics", "llama.cpp")
    assert ran.code == 2 and "is not a GGUF file" in ran.err and ran.out == ""
    ran = cli("generate", "hi", "--model", str(toy), "--numerics", "int8")
    assert ran.code == 2 and "--numerics" in ran.err and ran.out == ""



def test_refused_where_the_kernels_are_off(cli, q4k: Path,  # noqa: ANN001
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # ATTNCLI_QMATMUL=0 (or ATTNCLI_FUSED=0, or no C compiler) leaves every product to
    # dequantize-then-float32: the answer was float32's, recorded as llama.cpp's numerics.
    from attncli.models.sources.gguf import qmatmul

    monkeypatch.setattr(qmatmul, "ENABLED", False)
    ran = cli("generate", "the cat", "--model", str(q4k), *ARGS, "--numerics", "llama.cpp")
    assert ran.code == 2 and ran.out == ""
    assert "ATTNCLI_QMATMUL=0" in ran.err and ran.err.count("\n") == 1
    assert cli("generate", "the cat", "--model", str(q4k), *ARGS).code == 0  # float32 is not


def test_a_nan_scale_is_refused_as_float32_refuses_it(cli, q4k: Path, tmp_path: Path) -> None:  # noqa: ANN001
    # The 8-bit quantizers skipped the NaN a hostile scale put in the activations: the answer
    # came out finite (exit 0) where the float32 run refuses the file in one line.
    import shutil

    bad = tmp_path / "nan-scale.gguf"
    shutil.copy(q4k, bad)
    down = next(t for t in gguf.GGUFReader(q4k).tensors if t.name == "blk.1.ffn_down.weight")
    with open(bad, "r+b") as f:  # the first block's fp16 d (Q4_K: d, dmin, scales, ...)
        f.seek(down.data_offset)
        f.write(np.array([np.nan], "<f2").tobytes())
    runs = [cli("generate", "the cat", "--model", str(bad), *ARGS, *numerics)
            for numerics in ((), ("--numerics", "llama.cpp"))]
    assert [r.code for r in runs] == [2, 2] and runs[0].err == runs[1].err
    assert "the logits are not numbers (NaN)" in runs[1].err and runs[1].out == ""
    assert "overflowed" not in runs[1].err  # a NaN is no overflow

@pytest.mark.slow
@pytest.mark.runtime
@pytest.mark.process  # llama.cpp runs in a child process
def test_smollm2_writes_llama_cpps_answer_where_float32_does_not(cli) -> None:  # noqa: ANN001
    # docs/performance.md's example: llama.cpp's own greedy answer to this chat prompt is
    # "L'Étoile, la Marseillaise,"; float32 answers "The capital of France is Paris."
    agreement = bench_module("agreement")  # its SmolLM2 and llama.cpp's install
    skip_without_llama_cpp(agreement)
    model = str(smollm2())
    ask = ("generate", "What is the capital of France?", "--model", model, "--max-new-tokens",
           "12", "--view", "raw", "--json")
    runtime = json.loads(cli(*ask, "--numerics", "llama.cpp").out)
    plain = json.loads(cli(*ask).out)
    prompt = [t["id"] for t in runtime["prompt"]]
    [(ids, _)] = agreement.llamacpp.greedy(Path(model), 1, [prompt], 12)
    ours = [t["id"] for t in runtime["answer"]]
    assert [t["id"] for t in plain["answer"]] != list(ids)
    if torch.backends.cpu.get_cpu_capability() in ("AVX2", "AVX512"):
        assert ours == list(ids)
        return
    # Torch's portable kernels (a CPU without AVX2) round SiLU, exp and softmax otherwise in
    # the last bit, which 8-bit activations carry on (docs/performance.md): the first token,
    # "L" 0.146 beside "The" 0.135, may then tip. Where it parts, it parts at such a tie:
    # llama.cpp's token is attncli's second, within 0.05 of its first.
    parted = next((k for k, (a, b) in enumerate(zip(ours, ids, strict=True)) if a != b), None)
    if parted is not None:
        top = runtime["steps"][parted]["top"]
        assert top[1]["id"] == ids[parted], (parted, top[:2])
        assert top[0]["prob"] - top[1]["prob"] < 0.05, (parted, top[:2])
