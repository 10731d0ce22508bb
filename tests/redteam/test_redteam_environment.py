"""Hostile environment variables: a folder under a ~user who does not exist, and an
OMP_NUM_THREADS OpenMP cannot read, are one line (exit 2) naming the variable, never a
traceback, and never reported as something else (a quantization type the package "cannot
dequantize"); a blank OMP_NUM_THREADS is unset, without OpenMP's own warning."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from attncli.models.sources.gguf import dequant
from tests.conftest import ROOT
from tests.gguf_fixtures import smollm2

TOY = str(ROOT / "samples" / "toy-gpt2")
GONE = "~no_such_user_of_attncli/x"
HOME = f"but the home folder of {GONE.split('/')[0]} cannot be found; give the folder's full path"


@pytest.mark.parametrize(("variable", "model"), [
    ("HF_HOME", "org/name"), ("HF_HUB_CACHE", "org/name"), ("HUGGINGFACE_HUB_CACHE", "org/name"),
    ("XDG_CACHE_HOME", "org/name"), ("OLLAMA_MODELS", "ollama:llama3")])
def test_a_model_folder_under_an_unknown_user_is_one_line(
        cli, monkeypatch: pytest.MonkeyPatch, variable: str, model: str) -> None:  # noqa: ANN001
    for other in ("HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        monkeypatch.delenv(other, raising=False)
    monkeypatch.setenv(variable, GONE)
    cli("run", "x", "--model", model).assert_usage_error(f"{variable} is '{GONE}', {HOME}")


def test_a_model_path_under_an_unknown_user_is_one_line(cli) -> None:  # noqa: ANN001
    cli("run", "x", "--model", GONE).assert_usage_error(f"--model is '{GONE}', {HOME}")


def test_models_under_an_unknown_users_hub_cache_is_one_line(
        cli, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("HF_HUB_CACHE", GONE)
    cli("models", "--json").assert_usage_error(f"HF_HUB_CACHE is '{GONE}', {HOME}")


@pytest.mark.parametrize("args", [("config",), ("config", "set", "model", "smollm2"),
                                  ("heads", "the cat")])
def test_a_settings_file_under_an_unknown_user_is_one_line(
        cli, monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...]) -> None:  # noqa: ANN001
    monkeypatch.delenv("ATTNCLI_MODEL", raising=False)
    monkeypatch.setenv("ATTNCLI_CONFIG", GONE)
    cli(*args).assert_usage_error(f"ATTNCLI_CONFIG is '{GONE}', {HOME}")
    doc = cli("doctor", "--json").json()  # doctor says it, and goes on
    assert doc["settings"]["error"] == f"ATTNCLI_CONFIG is '{GONE}', {HOME}"


def test_attncli_s_cache_under_an_unknown_user_names_the_variable(
        cli, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    """It said 'set ATTNCLI_MODEL_CACHE', the variable that was set."""
    monkeypatch.setenv("ATTNCLI_MODEL_CACHE", GONE)
    cli("pull", "smollm2").assert_usage_error(f"ATTNCLI_MODEL_CACHE is '{GONE}', {HOME}")


BAD_THREADS = ["²", "٣", "0", "-1", "1e3", "2,", "two", "2 3", "99999999999999999999"]


@pytest.mark.parametrize("value", BAD_THREADS)
def test_a_bad_omp_num_threads_is_one_line(cli, monkeypatch: pytest.MonkeyPatch,  # noqa: ANN001
                                           value: str) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", value)
    cli("run", "x", "--model", TOY).assert_usage_error(
        f"OMP_NUM_THREADS must be a number of threads such as 2 (got {value!r}); unset it to use "
        "every core")


@pytest.mark.parametrize(("value", "count"), [("3", 3), (" +2 ", 2), ("02", 2), ("4,2", 4),
                                              ("4 , 2", 4)])
def test_the_dequantizer_reads_omp_num_threads_as_openmp_does(
        monkeypatch: pytest.MonkeyPatch, value: str, count: int) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", value)
    assert dequant.threads() == count


@pytest.mark.parametrize("value", BAD_THREADS)
def test_the_dequantizer_never_fails_on_omp_num_threads(monkeypatch: pytest.MonkeyPatch,
                                                        value: str) -> None:
    """The Python API reads it too (int('²') raised): a count of threads, whatever it holds."""
    monkeypatch.setenv("OMP_NUM_THREADS", value)
    count = dequant.threads()
    assert count >= 1 and (count == len(os.sched_getaffinity(0)) or value.isascii())


def test_the_api_is_not_told_a_quant_type_cannot_be_dequantized(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import gguf

    from attncli.models.sources.gguf.source import can_dequantize

    monkeypatch.setenv("OMP_NUM_THREADS", "²")
    can_dequantize.cache_clear()
    try:
        assert can_dequantize(gguf.GGMLQuantizationType.Q8_0)
    finally:
        can_dequantize.cache_clear()


def _attncli(*args: str, threads: str) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "OMP_NUM_THREADS": threads, "ATTNCLI_NO_CACHE": "1"}
    return subprocess.run([sys.executable, "-m", "attncli", *args], capture_output=True,
                          env=env, timeout=600, check=False)


def test_openmp_prints_nothing_of_its_own() -> None:
    """The one line comes before torch loads; a blank value runs as unset, quietly."""
    bad = _attncli("run", "x", "--model", str(smollm2()), threads="²")
    assert bad.returncode == 2 and bad.stderr.count(b"\n") == 1, bad.stderr
    assert bad.stderr.startswith(b"attncli: error: OMP_NUM_THREADS must be")
    blank = _attncli("run", "x", "--model", TOY, "--json", threads=" ")
    assert (blank.returncode, blank.stderr) == (0, b"")
