"""saved/files.py: saved documents back into result records, checked."""

from __future__ import annotations

import json
import re
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attncli.core.request import Extract, Request
from attncli.errors import AttnCliError
from attncli.long.path import run
from attncli.render.jsonout import dumps
from attncli.saved.kinds import saved_from
from attncli.saved.run import result_from_dict
from attncli.saved.shown import saved_doc
from attncli.saved.weights import weights_stack
from tests.conftest import SENTENCE
from tests.redteam.test_show_hostile import ODD, _mutate, _paths, docs, json_docs


@pytest.mark.parametrize("variant", ["simple", "qkv", "causal", "multihead"])
def test_a_runs_json_gives_back_its_result(variant: str) -> None:
    result = run(Request(text=SENTENCE, variant=variant), Extract(query="2"))
    doc = result.to_dict()
    back = result_from_dict(doc)
    assert back.to_dict() == doc
    assert back.available_stages() == result.available_stages()
    assert back.traits == result.traits


def test_a_long_runs_json_gives_back_its_result() -> None:
    result = run(Request(text=SENTENCE, variant="causal", impl="tiled"), Extract(query="3"))
    doc = json.loads(dumps(result.to_dict()))  # as the file holds it: lists, null for masked
    back = result_from_dict(doc)
    assert json.loads(dumps(back.to_dict())) == doc and back.long is not None


def test_saved_weights_assume_no_mask() -> None:
    back = saved_from([[1.0, 0.0], [0.5, 0.5]]).results[0]
    assert not back.traits.causal and back.weights == [[[1.0, 0.0], [0.5, 0.5]]]


def test_shapes() -> None:
    assert weights_stack([[1, 0], [0, 1]]) == [[[1.0, 0.0], [0.0, 1.0]]]
    assert len(weights_stack([[[1]], [[1]]])) == 2
    with pytest.raises(AttnCliError, match="square"):
        weights_stack([[0.5, 0.5]])
    with pytest.raises(AttnCliError, match="head 1 is 1×2"):
        weights_stack([[[1, 0], [0, 1]], [[1, 0]]])
    with pytest.raises(AttnCliError, match=r"weights\[0\]\[0\] is true"):
        weights_stack([[True]])


def test_kinds() -> None:
    assert saved_from([[1.0]]).kind == "weights"
    pair = saved_from({"tokens": [{"text": "a"}, "b"], "weights": [[1, 0], [0.5, 0.5]]})
    assert pair.kind == "weights" and pair.results[0].labels == ["a", "b"]
    doc = run(Request(text=SENTENCE, variant="causal"), Extract(query="2")).to_dict()
    saved = saved_from(doc)
    assert saved.kind == "run" and saved.results[0].query.index == 2
    assert saved_from({"variants": [doc]}).kind == "compare"
    with pytest.raises(AttnCliError, match="cannot draw `tokens`"):
        saved_from({"encoding": "gpt2", "tokens": []})


@pytest.mark.parametrize("kind", ["run", "compare", "weights", "heads", "scan", "generate"])
def test_a_document_of_each_kind_with_nothing_in_it_is_one_line(kind: str) -> None:
    """A kind names the reader; a document of that kind without its parts is one line naming
    what is missing, never a KeyError."""
    with pytest.raises(AttnCliError, match="^saved file: |^attncli JSON without"):
        saved_from({"kind": kind})


def test_kinds_read_through_the_table_and_old_files_by_their_keys() -> None:
    from attncli.saved.kinds import KINDS, kind_of

    doc = run(Request(text=SENTENCE, variant="causal"), Extract()).to_dict()
    assert doc["kind"] == "run" and saved_from(doc).kind == "run"
    old = {k: v for k, v in doc.items() if k != "kind"}  # saved before kinds were written
    assert kind_of(old) == "run" and saved_from(old).results[0].to_dict() == doc
    undrawn = {kind: found for kind, found in KINDS.items() if found.read is None}
    assert undrawn and all(found.name and found.command for found in undrawn.values())
    for kind, found in undrawn.items():
        with pytest.raises(AttnCliError, match=f"show cannot draw {re.escape(found.name)} JSON.*"
                                               f"{re.escape(found.command)}"):
            saved_from({"kind": kind})


@cache
def _documents() -> list[Any]:
    """Documents of the kinds the subprocess mutation tests leave out (generate's, a probe's,
    scan's summary aside), made on first use."""
    toy = ("--model", "samples/toy-gpt2")
    return [*docs(), *json_docs([
        ("heads", *toy, "--probe", "induction", "--probe-length", "4", "--effect"),
        ("generate", SENTENCE, *toy, "--max-new-tokens", "2", "--sample", "--sample-seed", "1"),
        ("generate", SENTENCE, *toy, "--max-new-tokens", "2", "--view", "occlusion",
         "--layers", "1:3", "--head", "1")])]


@settings(max_examples=300, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_mutated_document_is_read_or_refused_in_one_line(data: st.DataObject) -> None:
    """Any document, parts dropped, retyped, resized: its records, written back as JSON, or one
    AttnCliError line; never another exception (in process: hundreds of cases in a second)."""
    doc = data.draw(st.sampled_from(_documents()))
    for _ in range(data.draw(st.integers(1, 3))):
        doc = _mutate(doc, data.draw(st.sampled_from(_paths(doc))),
                      data.draw(st.sampled_from(["drop", "set", "grow", "shrink"])),
                      data.draw(ODD))
    try:
        saved = saved_from(doc)
    except AttnCliError as err:
        assert "\n" not in str(err) and str(err)
        return
    json.loads(dumps(saved_doc(saved.kind, saved.results, saved.doc)))


@pytest.mark.parametrize("kind", ["zzz", "", 5, None, ["run"], {"kind": "run"}])
def test_a_kind_attncli_never_wrote_is_refused_not_sniffed(kind: Any) -> None:
    # It was read by its other keys, as a document saved before kinds: a run's document whose
    # kind said "zzz" or 5 was drawn as a run. Only a document without "kind" is sniffed.
    doc = run(Request(text=SENTENCE, variant="causal"), Extract()).to_dict()
    with pytest.raises(AttnCliError, match=r'^saved file: kind is .*, not one of the kinds '
                                           r'attncli writes \(ablate, .*generate\)$'):
        saved_from({**doc, "kind": kind})
