"""A GGUF whose metadata gives a value the family's config checks refuse is refused naming the
file, not a config.json it does not have (rt7): the checks are config.json's, the values the
file's metadata read as config.json's keys."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gguf
import pytest

from tests.gguf_fixtures import write_model
from tests.gguf_rewrite import T, rewrite

Q = gguf.GGMLQuantizationType

# (metadata key, (type, value)): the line names the key, where the check names config.json's
LIES = [
    ("llama.context_length", (T.UINT64, 2**63)),
    ("llama.attention.layer_norm_rms_epsilon", (T.FLOAT32, -1.0)),
]


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("named") / "llama.gguf"
    write_model(path, "llama", Q.F32)
    return path


@pytest.mark.parametrize(("key", "typed"), LIES, ids=[k for k, _ in LIES])
@pytest.mark.parametrize("command", [["run", "hi"], ["heads", "hi"],
                                     ["generate", "hi", "--max-new-tokens", "1", "--raw"]])
def test_a_metadata_value_the_config_checks_refuse_names_the_gguf(
        cli, base: Path, tmp_path: Path, key: str, typed: tuple[Any, Any],  # noqa: ANN001
        command: list[str]) -> None:
    path = tmp_path / "m.gguf"
    rewrite(base, path, {key: typed})
    got = cli(*command, "--model", str(path), "--json")
    got.assert_usage_error(f"attncli: error: {path}'s metadata: {key} must be")
    assert "config.json" not in got.err
