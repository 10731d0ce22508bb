"""Every --help fits the terminal it is printed on: click never wraps narrower than 50
columns, so at COLUMNS=40 each line ran 10 past the edge (an option with a long metavar,
`-v, --variant <simple|qkv|causal|multihead>`, 45); and a CJK character takes two cells where
click counted one (permute's help ran to 81 at COLUMNS=80)."""

from __future__ import annotations

import pytest
from rich.cells import cell_len

from tests.e2e.test_cli_docs import COMMANDS


@pytest.mark.parametrize("columns", [80, 40, 30])
@pytest.mark.parametrize("command", ["", *COMMANDS])
def test_every_help_fits_the_terminal(cli, monkeypatch: pytest.MonkeyPatch,  # noqa: ANN001
                                      command: str, columns: int) -> None:
    monkeypatch.setenv("COLUMNS", str(columns))
    run = cli(*command.split(), "--help")
    assert run.code == 0 and run.err == ""
    over = [line for line in run.out.splitlines() if cell_len(line) > columns]
    assert over == [], f"attncli {command} --help at COLUMNS={columns}"


def test_a_narrow_help_puts_each_option_over_its_help(cli, monkeypatch: pytest.MonkeyPatch  # noqa: ANN001
                                                      ) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    lines = cli("run", "--help").out.splitlines()
    at = lines.index("  -v, --variant")
    assert lines[at + 1] == "    <simple|qkv|causal|multihead>"
    assert lines[at + 2].startswith("      Attention variant")


def test_a_wide_character_takes_two_cells(cli, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("COLUMNS", "80")
    text = cli("permute", "--help").out
    assert "cannot tell word order: 猫吃鱼 vs\n  鱼吃猫." in text
