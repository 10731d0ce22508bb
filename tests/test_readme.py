"""The README's JSON example is the real output of the command it shows."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable
from pathlib import Path

from tests.conftest import CliRun

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCK = re.compile(r"```console\n\$ (attncli [^\n|]*--json[^\n|]*)\n(\{.*?)```", re.S)


def test_every_json_example_is_what_its_command_prints(cli: Callable[..., CliRun]) -> None:
    examples = BLOCK.findall(README.read_text(encoding="utf-8"))
    assert examples, "the README shows a JSON example"
    for command, shown in examples:
        res = cli(*shlex.split(command)[1:])
        assert res.code == 0, res.err
        assert json.loads(res.out) == json.loads(shown), command
