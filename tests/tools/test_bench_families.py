"""bench/families.py at a tiny size: a checkpoint per family, its parameters counted as
transformers counts them, a text of at most 50 tokens, and a table row per family (no timings
are checked)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from tests.tools.benches import bench_module


@pytest.fixture(scope="module")
def families() -> ModuleType:
    return bench_module("families")


def test_params_are_transformers_count(families: ModuleType, tmp_path: Path) -> None:
    from tokenizers import Tokenizer
    from transformers import AutoModelForCausalLM, AutoModelForMaskedLM

    for name, auto in (("phi3", AutoModelForCausalLM), ("bert", AutoModelForMaskedLM)):
        directory = tmp_path / name
        directory.mkdir()
        params = families.build(directory, name, families.TINY)
        model = auto.from_pretrained(directory)
        assert params == sum(p.numel() for p in model.parameters()), name
        text = families.text_of(directory, 20)
        count = len(Tokenizer.from_file(str(directory / "tokenizer.json")).encode(text).ids)
        assert count == 20, (name, count, text)


def test_table_has_a_row_per_family(families: ModuleType, tmp_path: Path) -> None:
    rows = families.measure(tmp_path, families.FAMILIES, families.TINY, repeats=1, whole=False)
    assert [r["family"] for r in rows] == list(families.FAMILIES)
    assert rows[0]["pass_ratio"] == 1.0
    assert all(r["pass_s"] and r["num_tokens"] <= families.NUM_TOKENS for r in rows)
    lines = families.table(rows).splitlines()
    assert len(lines) == 1 + len(families.FAMILIES)
    assert [line.split()[0] for line in lines[1:]] == list(families.FAMILIES)
