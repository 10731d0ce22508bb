"""JSON nested 100,000 deep in every JSON file attncli reads from a user's folder (a checkpoint's
config, tokenizer, chat and generation settings, shard index; a scan's JSONL corpus and its
manifest): one line naming the file, or a document skipped and counted, never Python's
RecursionError. The hidden-state cache's entries: tests/models/hidden/test_store.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.llama_fixtures import save_family

TOY = str(ROOT / "samples" / "toy-gpt2")
DEEP = "[" * 100_000 + "]" * 100_000
NESTED = "cannot be read: its lists or objects are nested more than 1,024 deep"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sharded Llama folder with a chat template and generation settings."""
    folder = tmp_path_factory.mktemp("deep") / "llama"
    save_family(folder, "llama", seed=3, shard="40KB")
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"chat_template": "{{ messages[0]['content'] }}", "eos_token": "</s>"}))
    (folder / "generation_config.json").write_text(json.dumps({"eos_token_id": 2}))
    return folder


@pytest.mark.parametrize("name", ["tokenizer_config.json", "generation_config.json",
                                  "config.json", "tokenizer.json",
                                  "model.safetensors.index.json"])
def test_a_checkpoint_file_nested_100_000_deep_is_one_line_naming_it(
        cli, checkpoint: Path, tmp_path: Path, name: str) -> None:  # noqa: ANN001
    folder = tmp_path / "model"
    shutil.copytree(checkpoint, folder)
    (folder / name).write_text(DEEP)
    cli("generate", "the cat", "--model", str(folder), "--max-new-tokens", "2",
        "--json").assert_usage_error(f"{folder / name} {NESTED}")


def _scan(cli, corpus: Path, out: Path) -> dict:  # noqa: ANN001
    done = cli("scan", str(corpus), "--field", "text", "--model", TOY, "--out", str(out),
               "--workers", "1", "--json")
    assert done.code == 0, done.err
    return done.json()["scan"]["documents"]


@pytest.mark.process  # scan's worker pool
def test_a_jsonl_line_nested_past_pythons_reader_is_a_skipped_document(
        cli, tmp_path: Path) -> None:  # noqa: ANN001
    corpus = tmp_path / "c.jsonl"
    deep = "[" * 1500 + "]" * 1500  # within the byte limit, past Python's recursion limit
    corpus.write_text(f'{{"text": "hello there"}}\n{deep}\n{{"text": "bye now"}}\n')
    documents = _scan(cli, corpus, tmp_path / "out")
    assert (documents["scored"], documents["skipped_because"]) == (2, {"nested too deeply": 1})


@pytest.mark.process
def test_a_scan_manifest_nested_100_000_deep_is_one_line(cli, tmp_path: Path) -> None:  # noqa: ANN001
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"text": "hello there"}\n')
    _scan(cli, corpus, tmp_path / "out")
    (tmp_path / "out" / "scan.json").write_text(DEEP)
    cli("scan", str(corpus), "--field", "text", "--model", TOY,
        "--out", str(tmp_path / "out")).assert_usage_error(
        f"--out {tmp_path / 'out'}: cannot read scan.json (nested too deeply)")
