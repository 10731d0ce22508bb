"""`attncli show` of ablate's and patch's JSON with parts dropped, retyped, resized: exit 0, or
exit 2 with one line (their readers check every part the renderers and the page read)."""

from __future__ import annotations

import json
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import SENTENCE
from tests.redteam.test_redteam_properties import PROPERTY, check_outcome, run_cli
from tests.redteam.test_show_hostile import ODD, _mutate, _paths, json_docs

TOY = ("--model", "samples/toy-gpt2")


@cache
def docs() -> list[Any]:
    """ablate's and patch's documents, made on first use (not by every collecting worker)."""
    return json_docs([("ablate", SENTENCE, *TOY, "--heads", "1.0,0.2", "--answer", " now"),
                      ("ablate", SENTENCE, *TOY),
                      ("patch", "the cat sat on the mat", "the dog sat on the hat", *TOY,
                       "--tokens", " mat", " hat", "--attribution", "--per-position")])


@PROPERTY
@given(st.data())
def test_mutated_ablate_and_patch_documents_exit_0_or_2_in_one_line(data: st.DataObject) -> None:
    doc = data.draw(st.sampled_from(docs()))
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(_paths(doc)))
        how = data.draw(st.sampled_from(["drop", "set", "grow", "shrink"]))
        doc = _mutate(doc, path, how, data.draw(ODD))
    args = data.draw(st.sampled_from([(), ("--json",), ("--head", "1")]))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "m.json"
        path.write_text(json.dumps(doc), encoding="ascii")
        code, out, err = run_cli("show", str(path), *args)
        check_outcome(code, out, err, "--json" in args)
        if code == 0:
            page = Path(folder) / "m.html"
            code, out, err = run_cli("show", str(path), "--save", str(page))
            check_outcome(code, out, err, False)


def test_a_lone_surrogate_in_a_part_no_renderer_reads_is_escaped_not_a_traceback() -> None:
    """A JSON escape such as \\ud800 (a lone surrogate, which no output encoding holds) in a
    part the reader does not check, such as a top token's id: shown, and --json writes it
    escaped, as a checked string is."""
    doc = json.loads(json.dumps(docs()[0]))
    doc["top"]["before"][0]["id"] = ["\ud800"]
    doc["model"]["note"] = "\ud800"
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "m.json"
        path.write_text(json.dumps(doc), encoding="ascii")
        for args in ((), ("--json",)):
            code, out, err = run_cli("show", str(path), *args)
            check_outcome(code, out, err, "--json" in args)
            assert code == 0, err
        assert "\\ud800" in json.loads(out)["model"]["note"]
