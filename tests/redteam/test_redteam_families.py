"""Red team, the newer decoder families: a fused projection (Phi-3's qkv_proj, GPT-NeoX's
query_key_value) with rows missing or extra ends in one line and exit 2 naming the tensor,
never a traceback from a reshape and never a run that reads a neighbour's rows as V."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file, save_file

from tests.family_fixtures import save_decoder
from tests.redteam.test_redteam import memory_headroom

FUSED = {"phi3": "self_attn.qkv_proj.weight", "gpt_neox": "attention.query_key_value.weight"}


@pytest.fixture(scope="module")
def decoders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("fused")
    folders = {}
    for name in FUSED:
        save_decoder(root / name, name, seed=5)
        folders[name] = root / name
    return folders


def _resized(source: Path, target: Path, suffix: str, extra: int) -> Path:
    """A copy of source whose layer-1 tensor ending in suffix has `extra` rows more (or fewer)."""
    shutil.copytree(source, target)
    state = load_file(str(target / "model.safetensors"))
    name = next(k for k in state if k.endswith(suffix) and ".1." in k)
    t = state[name]
    state[name] = t[:extra] if extra < 0 else torch.cat([t, t[:extra]])  # (rows ± extra, d)
    save_file(state, str(target / "model.safetensors"), metadata={"format": "pt"})
    return target


@pytest.mark.parametrize("extra", [-1, 1, -8])
@pytest.mark.parametrize("name", sorted(FUSED))
def test_fused_rows_wrong_are_refused(cli: Any, decoders: dict[str, Path], tmp_path: Path,
                                      name: str, extra: int) -> None:
    """In-process under a memory limit, as test_redteam.py runs a case decided inside attncli
    (its real-process runs of hostile folders: test_redteam_configs.py)."""
    folder = _resized(decoders[name], tmp_path / "m", FUSED[name], extra)
    rows = load_file(str(decoders[name] / "model.safetensors"))
    stored = next(k for k in rows if k.endswith(FUSED[name]) and ".1." in k)
    with memory_headroom():
        res = cli("run", "The cat sat", "--model", str(folder), "--layer", "-1")
    res.assert_usage_error(stored)
    res.assert_usage_error(f"{rows[stored].shape[0] + extra:,} rows")


def test_an_absurd_layer_claim_is_refused_before_any_per_layer_list(tmp_path: Path) -> None:
    """num_hidden_layers of two billion without layer_types: Gemma 2 fills in one type per
    layer, so the claim must be refused before that list is built (it hung, then ran out of
    memory); under a 4 GB cap it is one line, exit 2, in seconds."""
    import json
    import resource
    import subprocess
    import sys

    save_decoder(tmp_path, "gemma2", seed=0)
    config = json.loads((tmp_path / "config.json").read_text())
    config.pop("layer_types")
    config["num_hidden_layers"] = 2**31 - 1
    (tmp_path / "config.json").write_text(json.dumps(config))

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (4 * 2**30, 4 * 2**30))

    attncli = Path(sys.executable).parent / "attncli"
    res = subprocess.run([str(attncli), "run", "hi", "--model", str(tmp_path)], text=True,
                         capture_output=True, preexec_fn=cap, timeout=120, check=False)
    assert res.returncode == 2, res.stderr
    assert res.stderr.count("\n") == 1
    assert "claims num_hidden_layers=2,147,483,647" in res.stderr
