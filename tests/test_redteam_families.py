"""Red team, the newer decoder families: a fused projection (Phi-3's qkv_proj, GPT-NeoX's
query_key_value) with rows missing or extra ends in one line and exit 2 naming the tensor,
never a traceback from a reshape and never a run that reads a neighbour's rows as V."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from tests.family_fixtures import save_decoder
from tests.test_redteam_configs import assert_one_line, run_process

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
def test_fused_rows_wrong_are_refused(decoders: dict[str, Path], tmp_path: Path, name: str,
                                      extra: int) -> None:
    folder = _resized(decoders[name], tmp_path / "m", FUSED[name], extra)
    rows = load_file(str(decoders[name] / "model.safetensors"))
    stored = next(k for k in rows if k.endswith(FUSED[name]) and ".1." in k)
    proc = run_process("run", "The cat sat", "--model", str(folder), "--layer", "-1")
    assert_one_line(proc, stored, f"{rows[stored].shape[0] + extra:,} rows")
