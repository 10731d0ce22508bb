"""The lessons estimate their sizes before work: hostile sizes exit 2 at once, in one line naming
the option and the size. Each runs in-process (attncli.cli.main.execute, which decides the exit
code and the line) under an address-space limit: this process's soft RLIMIT_AS set to 3 GiB past
what it holds, for the call (tests.redteam.test_redteam.memory_headroom), so attncli's estimates
see at least the address space that a fresh attncli process under a 3 GiB limit would have."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from attncli.errors import AttnCliError
from attncli.lessons.budget import (
    COST_MACS,
    LESSON_CELLS,
    LESSON_MACS,
    check_cost,
    check_flash,
    check_kvcache,
    check_model_kvcache,
    check_permute,
)
from tests.gpt2_fixtures import save_hf_gpt2
from tests.llama_fixtures import save_family
from tests.redteam.test_redteam import memory_headroom

LONG = "a b " * 1500  # 3,000 tokens: more than a lesson lists (4,194,304 weights)


@pytest.fixture
def refused(cli: Any, monkeypatch: pytest.MonkeyPatch) -> Callable[..., str]:
    """Run attncli under the limit; it must exit 2 with one line on stderr, nothing on stdout."""
    monkeypatch.setenv("COLUMNS", "80")

    def call(*args: str) -> str:
        with memory_headroom():
            done = cli(*args)
        err = done.err
        assert done.code == 2, err
        assert done.out == "" and err.startswith("attncli: error: ") and err.count("\n") == 1, err
        assert "Traceback" not in err
        return err

    return call


HUGE = "1" + "0" * 400


@pytest.mark.parametrize(("args", "named"), [
    (("cost", "--max-tokens", "10000000"),
     ["--max-tokens 10000000 with --emb-dim 64", "up to 65,536 tokens", "--max-tokens 32768"]),
    (("cost", "--max-tokens", "65536"), ["--max-tokens 65536", "use --max-tokens 32768 or less"]),
    (("cost", "--max-tokens", HUGE), [f"--max-tokens {HUGE}", "use --max-tokens 32768"]),
    (("cost", "--emb-dim", "10000000"), ["--emb-dim 10000000", "up to 128 tokens",
                                         "use a smaller --emb-dim"]),
    (("cost", "--emb-dim", HUGE), [f"--emb-dim {HUGE}", "about 10^404 multiply-adds"]),
    (("cost", "--emb-dim", "2000000", "--max-tokens", "128"),
     ["--emb-dim 2000000 needs 8.2 GB at 128 tokens, more than half the"]),
    (("cost", "--num-heads", "65536", "--emb-dim", "65536"),
     ["--num-heads 65536 (65,536 × 128 × 128 tiles) needs", "GB at 128 tokens"]),
    (("kvcache", LONG), ["kvcache on the text (3,001 tokens × 1 head(s)) lists 4,504,501 "
                         "attention weights", "at most 2,895 tokens"]),
    (("kvcache", "a b " * 750, "--variant", "multihead", "--num-heads", "4"),
     ["kvcache on the text (1,501 tokens × 4 head(s))", "at most 1,447 tokens"]),
    (("flash", LONG, "--block", "1"),
     ["flash on the text (3,001 tokens × 1 head(s)) is checked against a naive pass of "
      "9,006,001 attention weights", "at most 2,048 tokens"]),
    (("permute", LONG, LONG), ["permute on two texts of 3,001 tokens × 1 head(s) lists "
                               "36,024,004 attention weights", "at most 1,024 tokens"]),
    (("kvcache", "x", "--emb-dim", "100000000"), ["--emb-dim 100000000 needs"]),
    (("permute", "猫鱼", "鱼猫", "--emb-dim", "20000", "--d-out", "20000"),
     ["--d-out 20000 needs permute's float64 weights and stages (9.6 GB)"]),
    (("permute", "猫鱼", "鱼猫", "--variant", "multihead", "--num-heads", "100000", "--d-out",
      "100000"), ["permute on two texts of 6 tokens × 100000 head(s) lists 14,400,000"]),
])
def test_sizes_past_the_budget_exit_2_naming_them(refused: Callable[..., str],
                                                  args: tuple[str, ...],
                                                  named: list[str]) -> None:
    err = refused(*args)
    for part in named:
        assert part in err, err


def test_flash_on_many_input_vectors(refused: Callable[..., str], tmp_path: Path) -> None:
    vectors = tmp_path / "x.json"
    vectors.write_text(json.dumps({"tokens": [f"t{i}" for i in range(2100)],
                                   "vectors": [[1.0, float(i % 7)] for i in range(2100)]}))
    err = refused("flash", "--inputs", str(vectors))
    assert "flash on --inputs (2,100 tokens × 1 head(s))" in err, err


def test_kvcache_model_on_a_long_text(refused: Callable[..., str], tmp_path: Path) -> None:
    model = tmp_path / "gpt2"
    save_hf_gpt2(model, seed=3, n_layer=1, n_head=2, n_embd=16, n_positions=4096)
    err = refused("kvcache", LONG, "--model", str(model))
    assert f"kvcache --model {model} on 3,001 tokens × 2 head(s) lists" in err, err


def test_kvcache_llama_model_on_a_long_text(refused: Callable[..., str],
                                            tmp_path: Path) -> None:
    model = tmp_path / "llama"
    save_family(model, "llama", seed=5)  # 4 query heads share 2 kv heads; no position limit
    err = refused("kvcache", "ab" * 1500, "--model", str(model))
    # 3,000 bytes and the tokenizer's BOS.
    assert f"kvcache --model {model} on 3,001 tokens × 4 head(s) lists 18,018,004" in err, err


def test_the_work_of_a_model_is_bounded() -> None:
    # A model of 1e9 multiply-adds per token: 60 tokens decoded and checked are 1.2e11.
    with pytest.raises(AttnCliError, match=r"kvcache --model big on 60 tokens needs about "
                       r"1\.2e\+11 multiply-adds \(16 layers.*about 50 tokens here\)"):
        check_model_kvcache(60, 8, 16, 62_500_000, 60 * 10**9, 0, "big")
    check_model_kvcache(40, 8, 16, 1000, 40 * 10**9, 0, "small")  # 8e10: within the bound
    assert LESSON_MACS == 10**11 and LESSON_CELLS == 2**22


def test_cost_work_is_counted_over_every_size() -> None:
    sizes = [128 * 2**k for k in range(9)]  # 128 … 32,768: about 1.8e11 at --emb-dim 64
    check_cost(32768, sizes, 1, 64, 128)
    with pytest.raises(AttnCliError, match="use --max-tokens 32768 or less"):
        check_cost(65536, [*sizes, 65536], 1, 64, 128)
    assert 2 * 64 * sum(n * n for n in sizes) <= COST_MACS


def test_a_huge_block_is_bounded_by_the_text(cli) -> None:  # noqa: ANN001
    doc = cli("flash", "a b c", "--block", "9" * 30, "--json").json()
    assert [step["keys"] for step in doc["steps"]] == [[0, 3]] and doc["block"] == 3


@pytest.mark.parametrize("heads", [1, 2, 3, 12, 100_000])
def test_the_hinted_token_count_is_the_largest_that_runs(heads: int) -> None:
    checks = {"kvcache": lambda t: check_kvcache(t, heads, 8, "the text"),
              "flash": lambda t: check_flash(t, heads, 4, "the text"),
              "permute": lambda t: check_permute(t, heads, 8, 8, False, "--emb-dim 8"),
              "model": lambda t: check_model_kvcache(t, heads, 1, 1, t, 0, "m")}
    for check in checks.values():
        with pytest.raises(AttnCliError, match=r"at most ([\d,]+) tokens here") as refused:
            check(3000)
        most = int(refused.value.args[0].rsplit("at most ", 1)[1].split()[0].replace(",", ""))
        if most > 1:
            check(most)  # the hint runs
        with pytest.raises(AttnCliError):
            check(most + 1)  # and one token more does not
        assert most >= 1
