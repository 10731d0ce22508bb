"""Every public function refuses a wrong call in one AttnCliError naming the argument, before
any model runs: an unknown keyword (with the one it was likely meant to be), a wrong count of
positional arguments, and for ablate and patch a value of the wrong type (a bool where an
integer goes included), checked against the type of the record's field the CLI fills."""

from __future__ import annotations

import re
from typing import Any

import pytest

import attncli
from tests.conftest import ROOT, SENTENCE

TOY = str(ROOT / "samples" / "toy-gpt2")
TEXT = "The cat sat on the mat. The cat sat on the"
CORRUPT = "The dog ran on the mat. The cat sat on the"


@pytest.mark.parametrize("call,message", [
    (lambda: attncli.heads(SENTENCE, model=TOY, sorted="layer"),
     "attncli.heads() has no option 'sorted' (did you mean 'sort'?)"),
    (lambda: attncli.generate(SENTENCE, TOY, max_tokens=2),
     "attncli.generate() has no option 'max_tokens' (did you mean 'max_new_tokens'?)"),
    (lambda: attncli.ablate(TEXT, model=TOY, head="1.0"),
     "attncli.ablate() has no option 'head' (did you mean 'heads'?)"),
    (lambda: attncli.patch(TEXT, CORRUPT, model=TOY, token=(" mat", " house")),
     "attncli.patch() has no option 'token' (did you mean 'tokens'?)"),
    (lambda: attncli.view([[1.0]], token=["a"]),
     "attncli.view() has no option 'token' (did you mean 'tokens'?)"),
    (lambda: attncli.show([[1.0]], bogus=1), "attncli.show() has no option 'bogus'"),
    (lambda: attncli.check(int, knd="causal"), "attncli.check() has no option 'knd'"),
    (lambda: attncli.run(SENTENCE, "causal"), "attncli.run(): too many positional arguments"),
    (lambda: attncli.explain(SENTENCE, "causal"),
     "attncli.explain(): too many positional arguments"),
    (lambda: attncli.ablate(TEXT), "attncli.ablate(): missing a required argument: 'model'"),
    (lambda: attncli.heads(TEXT), "attncli.heads(): missing a required argument: 'model'"),
    (lambda: attncli.patch(TEXT, model=TOY),
     "attncli.patch(): missing a required argument: 'corrupt'"),
    (lambda: attncli.ablate(TEXT, model=TOY, heads=5), "ablate(): heads must be a string (got "
     "int 5)"),
    (lambda: attncli.ablate(TEXT, model=TOY, heads=None), "heads must be a string (got NoneType"),
    (lambda: attncli.ablate(TEXT, model=TOY, at="1"), "at must be an integer or None (got str"),
    (lambda: attncli.ablate(TEXT, model=TOY, at=1.5), "at must be an integer or None (got float"),
    (lambda: attncli.ablate(TEXT, model=TOY, at=True), "at must be an integer or None (got bool"),
    (lambda: attncli.ablate(TEXT, model=TOY, answer=5), "answer must be a string or None"),
    (lambda: attncli.ablate(TEXT, model=TOY, top=True), "top must be an integer (got bool True)"),
    (lambda: attncli.ablate(TEXT, model=TOY, top=0), "top must be from 1 to 100 (got 0)"),
    (lambda: attncli.ablate(TEXT, model=TOY, how="resample", seed="1"),
     "seed must be an integer (got str '1')"),
    (lambda: attncli.ablate(TEXT, model=TOY, repeat=True), "repeat must be an integer or None"),
    (lambda: attncli.ablate(TEXT, model=None), "ablate(): model must be a string (got NoneType"),
    (lambda: attncli.ablate(5, model=TOY), "ablate(): text must be a string or None (got int 5)"),
    (lambda: attncli.patch(TEXT, CORRUPT, model=TOY, tokens=5),
     "tokens must be a pair (a string, a string) or None (got int 5)"),
    (lambda: attncli.patch(TEXT, CORRUPT, model=TOY, tokens=(" mat", 5)), "tokens must be a pair"),
    (lambda: attncli.patch(TEXT, CORRUPT, model=TOY, tokens=(" a", " b", " c")),
     "tokens must be a pair"),
    (lambda: attncli.patch(TEXT, CORRUPT, model=TOY, answer=5), "answer must be a string or None"),
    (lambda: attncli.patch(TEXT, CORRUPT, model=TOY, answer=" mat", at="1"),
     "patch(): at must be an integer or None (got str '1')"),
    (lambda: attncli.patch(TEXT, CORRUPT, model=TOY, answer=" mat", denoise=1),
     "denoise must be True or False (got int 1)"),
    (lambda: attncli.patch(TEXT, 5, model=TOY, answer=" mat"), "corrupt must be a string (got int"),
    (lambda: attncli.patch(TEXT, CORRUPT, model=5, answer=" mat"), "model must be a string"),
    (lambda: attncli.heads(SENTENCE, model=TOY, probe="nope"), "unknown probe 'nope' (choose from"),
])
def test_a_wrong_call_is_one_error_naming_the_argument(call: Any, message: str) -> None:
    with pytest.raises(attncli.AttnCliError, match=re.escape(message)) as caught:
        call()
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("call,message", [
    (lambda: attncli.generate(SENTENCE, TOY, max_new_tokens=0),
     "max_new_tokens must be a whole number from 1 to 100,000 (got 0)"),
    (lambda: attncli.generate(SENTENCE, TOY, temperature=0.0),
     "temperature must be a finite number above 0 (got 0.0); greedy decoding is the default "
     "without sample=True"),
    (lambda: attncli.generate(SENTENCE, TOY, top_k=-1), "top_k must be a whole number, 0 or more"),
    (lambda: attncli.generate(SENTENCE, TOY, top_p=2.0), "top_p must be above 0 and at most 1"),
    (lambda: attncli.generate(SENTENCE, TOY, sample=True, seed=-1),
     "seed must be a whole number from 0 to"),
    (lambda: attncli.generate(SENTENCE, TOY, seed=1),
     "seed applies with sample=True only: without it each answer token is the likeliest one "
     "(greedy); add sample=True"),
    (lambda: attncli.generate(SENTENCE, TOY, combine="sum"),
     "combine must be one of mean, max (got 'sum')"),
    (lambda: attncli.generate(SENTENCE, TOY, view="best"), "view must be one of auto, raw,"),
    (lambda: attncli.generate(SENTENCE, TOY, occlude="line"), "occlude must be one of token,"),
    (lambda: attncli.generate(SENTENCE, TOY, view="raw", occlude="token"),
     "occlude chooses what the occlusion view masks, and view='raw' makes no occlusion passes: "
     "leave it out, or use view='occlusion'"),
    (lambda: attncli.generate(SENTENCE, TOY, answer="x", sample=True),
     "sample=True chooses the tokens the model writes, and answer gives the answer: leave "
     "sample=True out"),
    (lambda: attncli.generate(SENTENCE, TOY, answer="x", max_new_tokens=3),
     "max_new_tokens bounds the answer the model writes, and answer gives the answer"),
    (lambda: attncli.generate(SENTENCE, TOY, numerics="int8"),
     "numerics must be one of float32, llama.cpp (got 'int8')"),
    (lambda: attncli.generate(SENTENCE, TOY, numerics="llama.cpp"),
     "numerics='llama.cpp' computes on a GGUF's quantized blocks"),
    (lambda: attncli.ablate(TEXT, model=TOY, top=0), "top must be from 1 to 100 (got 0)"),
])
def test_an_error_through_the_api_names_the_keyword_not_the_flag(call: Any,
                                                                 message: str) -> None:
    """The records check the API's arguments as the command line's, and name the keyword."""
    with pytest.raises(attncli.AttnCliError, match=re.escape(message)) as caught:
        call()
    assert "--" not in str(caught.value) and "\n" not in str(caught.value)


def test_the_command_line_still_names_the_flags(cli) -> None:  # noqa: ANN001
    ran = cli("generate", SENTENCE, "--model", TOY, "--sample-seed", "1")
    assert ran.code == 2 and "--sample-seed applies with --sample only" in ran.err
    ran = cli("generate", SENTENCE, "--model", TOY, "--numerics", "llama.cpp")
    assert ran.code == 2 and "--numerics llama.cpp computes on a GGUF's" in ran.err


def test_patch_takes_its_pair_as_a_list_too(cli) -> None:  # noqa: ANN001
    result = attncli.patch(TEXT, CORRUPT, model=TOY, tokens=[" mat", " house"])
    assert result.to_dict() == attncli.patch(TEXT, CORRUPT, model=TOY,
                                             tokens=(" mat", " house")).to_dict()


def test_the_checked_functions_keep_their_signatures() -> None:
    import inspect

    assert list(inspect.signature(attncli.ablate).parameters)[:3] == ["text", "model", "heads"]
    for function in (attncli.heads, attncli.generate):  # model second, by position or keyword
        parameter = list(inspect.signature(function).parameters.values())[1]
        assert parameter.name == "model" and parameter.kind == parameter.POSITIONAL_OR_KEYWORD
    assert attncli.generate.__doc__ is not None and "answer" in attncli.generate.__doc__


@pytest.mark.parametrize("command", ["run", "explain"])
def test_a_function_takes_the_request_options_its_command_offers(cli, command: str) -> None:  # noqa: ANN001
    """attncli.explain(top_k=3) ran, ignoring an option `attncli explain` does not offer."""
    import dataclasses

    from attncli.core.request import Request
    from attncli.opt import flag, marker

    helped = cli(command, "--help").out
    function = getattr(attncli, command)
    for field in dataclasses.fields(Request):
        if marker(field) is None or field.name in ("text", "inputs"):
            continue
        offered = re.search(re.escape(flag(field)) + r"[ ,/\n]", helped) is not None
        try:
            function(SENTENCE, **{field.name: object()})
        except attncli.AttnCliError as err:
            taken = "has no option" not in str(err)
        assert taken == offered, f"{command}: {field.name} ({flag(field)})"


def test_heads_takes_its_model_by_position_as_generate_does() -> None:
    assert attncli.heads(TEXT, TOY).to_dict() == attncli.heads(TEXT, model=TOY).to_dict()


def test_generate_takes_every_option_of_the_records_its_command_fills(cli) -> None:  # noqa: ANN001
    """attncli.generate had no numerics= while `attncli generate --numerics` existed: the test
    above compares Request's options only, and generate's are Sampling's, GenerationRequest's
    and GenerateView's. Each one `attncli generate --help` offers is a keyword of the function."""
    import dataclasses
    import inspect

    from attncli.opt import flag, marker
    from attncli.records.asking import GenerateView, GenerationRequest, Sampling

    helped = cli("generate", "--help").out
    keywords = inspect.signature(attncli.generate).parameters
    renamed = {"kind": "view"}  # GenerateView's kind is GenerationRequest's view
    checked = 0
    for record in (Sampling, GenerationRequest, GenerateView):
        for field in dataclasses.fields(record):
            if marker(field) is None:
                continue
            offered = re.search(re.escape(flag(field)) + r"[ ,/\n]", helped) is not None
            taken = renamed.get(field.name, field.name) in keywords
            assert taken == offered, f"generate: {field.name} ({flag(field)})"
            checked += offered
    assert checked >= 14
