"""attncli.ablate and attncli.patch: the CLI's --json exactly (to_dict), and results that show
themselves as the others do (text, HTML for a notebook, a one-line repr)."""

from __future__ import annotations

import attncli
from tests.conftest import ROOT

TOY = str(ROOT / "samples" / "toy-gpt2")
TEXT = "The cat sat on the mat. The cat sat on the"


def test_ablate_is_the_commands_json(cli) -> None:  # noqa: ANN001
    result = attncli.ablate(TEXT, model=TOY, heads="1.0,2.3", how="zero", answer=" mat")
    doc = cli("ablate", TEXT, "--model", TOY, "--heads", "1.0,2.3", "--how", "zero",
              "--answer", " mat", "--json").json()
    assert result.to_dict() == doc
    assert repr(result) == "<Ablation 1.0, 2.3, zero, 13 tokens>"
    assert "Loss per token" in str(result) and "<html" in result._repr_html_().lower()
    assert result.kl == doc["kl"] and result.losses == doc["losses"]


def test_patch_is_the_commands_json(cli) -> None:  # noqa: ANN001
    corrupt = "The dog ran on the mat. The cat sat on the"
    result = attncli.patch(TEXT, corrupt, model=TOY, tokens=(" mat", " house"))
    doc = cli("patch", TEXT, corrupt, "--model", TOY, "--tokens", " mat", " house",
              "--json").json()
    assert result.to_dict() == doc
    assert repr(result).startswith("<Patching logit-diff, denoise, top ")
    assert "layer × head" in str(result) and result.grid == doc["grid"]
