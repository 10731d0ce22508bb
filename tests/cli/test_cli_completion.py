"""Shell completion for bash, zsh and fish (Typer's): commands, options and choices complete,
the scripts install as Typer writes them, and completing never imports torch."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

# Run the CLI as the console script does, then say whether torch was imported.
CODE = ("import sys; from attncli.cli.main import execute; code = execute([]); "
        "print('torch' in sys.modules, file=sys.stderr); sys.exit(code)")


def _complete(shell: str, words: str, cword: int | None = None) -> tuple[str, str]:
    """What the shell's completion function gets for words (the line typed so far)."""
    env = {**os.environ, "_ATTNCLI_COMPLETE": f"complete_{shell}"}
    if shell == "bash":
        env |= {"COMP_WORDS": words, "COMP_CWORD": str(cword)}
    else:
        env |= {"_TYPER_COMPLETE_ARGS": words, "_TYPER_COMPLETE_FISH_ACTION": "get-args"}
    proc = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout, proc.stderr


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_commands_complete_without_importing_torch(shell: str) -> None:
    out, err = _complete(shell, "attncli he", 1)
    assert "heads" in out and "run" not in out
    assert err.strip().splitlines()[-1] == "False"


def test_options_and_their_choices_complete() -> None:
    out, _ = _complete("bash", "attncli run --var", 2)
    assert out.split() == ["--variant"]
    out, _ = _complete("bash", "attncli run --variant ", 3)
    assert out.split() == ["simple", "qkv", "causal", "multihead"]
    out, _ = _complete("bash", "attncli heads --qu", 2)
    assert out.split() == ["--quiet"]


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_the_script_each_shell_sources_calls_attncli_back(shell: str) -> None:
    env = {**os.environ, "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"}
    proc = subprocess.run([sys.executable, "-m", "attncli", "--show-completion", shell],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=600,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    assert f"_ATTNCLI_COMPLETE=complete_{shell}" in proc.stdout


def test_the_root_help_offers_installing_it(cli) -> None:  # noqa: ANN001
    out = cli("--help").out
    assert "--install-completion" in out and "--show-completion" in out
