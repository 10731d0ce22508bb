"""core/sizes.py: estimates, their messages, bounded reads and checkpoint claims."""

from __future__ import annotations

import io
import resource
from pathlib import Path

import pytest

from attncli import machine
from attncli.cli.streams import clamp_width
from attncli.core import sizes
from attncli.errors import AttnCliError

GB18 = 36 * 10**9  # half of it, 18.0 GB, may be used


@pytest.fixture
def memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(machine, "available_bytes", lambda: GB18)


def test_embedding_message_names_the_option_and_the_size(memory: None) -> None:
    with pytest.raises(AttnCliError) as err:
        sizes.check_embedding(50257, 100_000, 6)
    assert str(err.value) == ("--emb-dim 100000 needs a 50,257 × 100,000 embedding table "
                              "(20.1 GB), more than half the 36.0 GB available")
    with pytest.raises(AttnCliError, match=r"--context-length 10000000000 needs a "
                                           r"10,000,000,000 × 8 positional embedding table"):
        sizes.check_embedding(50257, 8, 10**10)
    sizes.check_embedding(50257, 768, 1024)  # GPT-2's own tables fit


def test_module_counts_the_four_matrices_of_multihead(memory: None) -> None:
    sizes.check_module(768, 768, 1024, True, "--d-out 768")
    with pytest.raises(AttnCliError, match=r"^--d-out 100000 needs three 8 × 100,000 weight "
                                           r"matrices and a 100,000 × 100,000 out_proj"):
        sizes.check_module(8, 100_000, 6, True, "--d-out 100000")
    sizes.check_module(8, 100_000, 6, False, "--d-out 100000")  # 9.6 MB without out_proj


def test_available_bytes_sees_an_address_space_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    unlimited = machine.available_bytes()
    try:
        used = machine._address_space_left()
        assert used is None or soft != resource.RLIM_INFINITY
        resource.setrlimit(resource.RLIMIT_AS, (machine._vm_size() + 2**30, hard))
        assert machine.available_bytes() <= min(unlimited, 2**30)
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@pytest.mark.parametrize("seed", [-(2**63), 0, 2**64 - 1])
def test_seeds_in_torchs_range(seed: int) -> None:
    import torch

    sizes.check_seed(seed)
    torch.manual_seed(seed)  # the reference: torch takes every seed the check lets through


@pytest.mark.parametrize("seed", [-(2**63) - 1, 2**64])
def test_seeds_out_of_range(seed: int) -> None:
    import torch

    with pytest.raises(AttnCliError, match=f"--seed {seed} is out of range"):
        sizes.check_seed(seed)
    with pytest.raises((RuntimeError, ValueError)):
        torch.manual_seed(seed)


def test_reads_are_bounded(tmp_path: Path) -> None:
    assert machine.read_limited(io.BytesIO(b"abc"), "standard input", limit=3) == b"abc"
    with pytest.raises(AttnCliError, match="goes on past the 0 MiB"):
        machine.read_limited(io.BytesIO(b"abcd"), "standard input", limit=3)
    big = tmp_path / "big.txt"
    big.write_bytes(b"x" * 10)
    with open(big, "rb") as stream, pytest.raises(AttnCliError, match="holds 10 bytes"):
        machine.read_limited(stream, "--file", limit=9)


def test_checkpoint_claims() -> None:
    from attncli.models.gpt2.config import check_checkpoint_claims

    blocks, file = {0, 1}, Path("m.safetensors")
    check_checkpoint_claims({"n_layer": 2}, blocks, file)
    check_checkpoint_claims({"n_layer": 3}, blocks, file)  # listed by name later
    with pytest.raises(AttnCliError, match="claims n_layer=10,000,000, but m.safetensors holds "
                                           "tensors for 2 block"):
        check_checkpoint_claims({"n_layer": 10**7}, blocks, file)
    with pytest.raises(AttnCliError, match="names a tensor for layer 100,000,000"):
        check_checkpoint_claims({}, {0, 10**8}, file)
    with pytest.raises(AttnCliError, match=r"n_head must be a positive integer \(got '4'\)"):
        check_checkpoint_claims({"n_head": "4"}, blocks, file)


def test_finite_is_float32s_range() -> None:
    assert sizes.finite(3.0e38) and sizes.finite(-(10**38))
    assert not sizes.finite(10**500) and not sizes.finite(1e39) and not sizes.finite(float("nan"))


@pytest.mark.parametrize(("width", "clamped"), [(0, 20), (-5, 20), (100, 100), (10**8, 1000)])
def test_console_width_is_clamped(width: int, clamped: int) -> None:
    assert clamp_width(width) == clamped


def test_heads_counts_every_layers_weights(memory: None) -> None:
    from attncli.models.heads import heads_bytes

    # 30 layers × 9 heads of 8,192 × 8,192 float32 weights, held about seven times, and one
    # layer's five stages: SmolLM2's heads on its whole context.
    assert heads_bytes(30, 9, 8192) == 4 * 9 * 8192**2 * (7 * 30 + 5)
    with pytest.raises(AttnCliError, match=r"\(519\.4 GB\), more than half the 36\.0 GB"):
        machine.check_fits(heads_bytes(30, 9, 8192), "heads")
    machine.check_fits(heads_bytes(30, 9, 1000), "heads")  # 7.7 GB: measured 5.8 GB peak
