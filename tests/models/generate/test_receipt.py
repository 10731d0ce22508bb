"""The receipt: a runtime's log-probabilities read as Ollama, OpenAI-style servers and llama.cpp
write them, compared with attncli's token by token or by text; a hand-altered file flagged;
tokens that spell another answer refused in one line (and through the CLI)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from attncli.errors import AttnCliError
from attncli.models.generate.receipt import Reported, answer_of, compare, read_logprobs
from tests.cli.test_cli_generate import tiny  # noqa: F401 (the module's fixture)
from tests.tolerance import assert_near

PIECES = [b"The", b" cap", b"ital", b" is", b" Paris"]
LOGPROBS = [-0.5, -1.25, -0.01, -0.2, -2.0]
CHOICES = ["The", " cap", "ital", " was", " Paris"]


def _write(tmp_path: Path, doc: object, lines: bool = False) -> str:
    path = tmp_path / "logprobs.json"
    text = "\n".join(json.dumps(d) for d in doc) if lines else json.dumps(doc)  # type: ignore[union-attr]
    path.write_text(text)
    return str(path)


def _ollama(pieces: list[bytes], logprobs: list[float]) -> list[dict[str, object]]:
    return [{"token": p.decode(), "logprob": lp, "bytes": list(p),
             "top_logprobs": [{"token": c, "logprob": lp}]}
            for p, lp, c in zip(pieces, logprobs, CHOICES, strict=True)]


def test_the_three_formats_are_read(tmp_path: Path) -> None:
    entries = _ollama(PIECES, LOGPROBS)
    ollama = read_logprobs(_write(tmp_path, {"model": "m", "response": "x", "logprobs": entries}))
    stream = read_logprobs(_write(tmp_path, [{"response": "", "logprobs": entries[:2]},
                                             {"response": "", "logprobs": entries[2:]},
                                             {"done": True}], lines=True))
    openai = read_logprobs(_write(tmp_path, {"choices": [{"logprobs": {"content": entries}}]}))
    older = read_logprobs(_write(tmp_path, {"completion_probabilities": [
        {"content": p.decode(), "probs": [{"tok_str": p.decode(), "prob": math.exp(lp)}]}
        for p, lp in zip(PIECES, LOGPROBS, strict=True)]}))
    for reported in (ollama, stream, openai, older):
        assert answer_of(reported) == "The capital is Paris"
        # read back from JSON (or log(exp(lp))): equal to float64 rounding
        assert_near([r.logprob for r in reported], LOGPROBS, atol=1e-12, rtol=0)


def test_the_same_tokens_compare_token_by_token_and_name_other_choices(tmp_path: Path) -> None:
    reported = read_logprobs(_write(tmp_path, {"logprobs": _ollama(PIECES, LOGPROBS)}))
    mine = [lp + 0.001 for lp in LOGPROBS]
    ours = [c if k != 3 else " is" for k, c in enumerate(CHOICES)]
    receipt = compare(reported, PIECES, mine, ours)
    assert receipt.compared == "tokens" and receipt.flagged == []
    # float64 sums of a few terms: relative 1e-6, as pytest.approx checked it before
    assert_near(receipt.largest.difference, 0.001, atol=0, rtol=1e-6)
    assert receipt.choices_differ == [3]


def test_other_tokenizations_compare_by_text_over_common_spans(tmp_path: Path) -> None:
    merged = [b"The", b" capital", b" is", b" Par", b"is"]
    theirs = [-0.5, -1.26, -0.2, -1.0, -1.0]
    reported = read_logprobs(_write(tmp_path, {"logprobs": [
        {"token": p.decode(), "logprob": lp} for p, lp in zip(merged, theirs, strict=True)]}))
    receipt = compare(reported, PIECES, LOGPROBS, CHOICES)
    assert receipt.compared == "text"
    assert [r.text for r in receipt.rows] == ["The", " capital", " is", " Paris"]
    # float64 sums of a few terms: equal to rounding (pytest.approx's 1e-12 at zero)
    assert_near([r.difference for r in receipt.rows], [0.0] * 4, atol=1e-12, rtol=0)


def test_a_hand_altered_log_probability_is_flagged(tmp_path: Path) -> None:
    altered = list(LOGPROBS)
    altered[4] = -0.1  # " Paris" made to look likely
    reported = read_logprobs(_write(tmp_path, {"logprobs": _ollama(PIECES, altered)}))
    receipt = compare(reported, PIECES, LOGPROBS, CHOICES)
    assert receipt.flagged == [4] and receipt.largest.text == " Paris"
    # float64 sums of a few terms: relative 1e-6, as pytest.approx checked it before
    assert_near(receipt.largest.difference, -1.9, atol=0, rtol=1e-6)


@pytest.mark.parametrize(("doc", "says"), [
    ({"response": "hi"}, "is not a runtime's log-probabilities"),
    ({"logprobs": []}, "holds no per-token log-probabilities"),
    ({"logprobs": [{"token": "a", "logprob": 0.5}]}, "has no log-probability"),
    ({"logprobs": [{"logprob": -1.0}]}, "has no token text"),
])
def test_a_file_of_the_wrong_shape_is_one_line(tmp_path: Path, doc: object, says: str) -> None:
    with pytest.raises(AttnCliError, match=says):
        read_logprobs(_write(tmp_path, doc))


def test_tokens_of_another_answer_are_refused(tmp_path: Path) -> None:
    reported = read_logprobs(_write(tmp_path, {"logprobs": _ollama(PIECES, LOGPROBS)}))
    with pytest.raises(AttnCliError, match="they are not this answer's"):
        compare(reported, [b"The", b" capital", b" is", b" Lyon"], LOGPROBS[:4], CHOICES[:4])


def test_the_cli_prints_the_receipt_and_the_json_holds_both(cli, tiny: Path,  # noqa: ANN001, F811
                                                           tmp_path: Path) -> None:
    own = json.loads(cli("generate", "the cat", "--model", str(tiny), "--answer", "sat on",
                         "--json").out)
    entries = [{"token": bytes.fromhex(t["bytes"]).decode(), "logprob": s["logprob"]}
               for t, s in zip(own["answer"], own["steps"], strict=True)]
    path = _write(tmp_path, {"logprobs": entries})
    run = cli("generate", "the cat", "--model", str(tiny), "--logprobs", path, "--json")
    assert run.code == 0, run.err
    receipt = json.loads(run.out)["receipt"]
    assert receipt["flagged"] == [] and abs(receipt["largest"]["difference"]) < 1e-12
    entries[1]["logprob"] -= 3.0
    path = _write(tmp_path, {"logprobs": entries})
    shown = cli("generate", "the cat", "--model", str(tiny), "--logprobs", path)
    assert shown.code == 0 and "FLAGGED: 1 differ" in shown.out
    other = cli("generate", "the cat", "--model", str(tiny), "--logprobs", path, "--answer",
                "sat in")
    assert other.code == 2 and "they are not this answer's" in other.err


def test_attncli_s_choice_is_compared_as_its_text_not_its_label() -> None:
    from attncli.models.generate.run import _spelt

    # A newline and a lone space are labelled '\\n' and '␣'; a runtime writes them as they are.
    assert _spelt({"id": 198, "text": "\\n", "bytes": "0a"}) == "\n"
    assert _spelt({"id": 220, "text": "␣", "bytes": "20"}) == " "
    assert _spelt({"id": 7, "text": "<id 7>"}) == "<id 7>"  # no bytes: the label is all there is
    runtime = [Reported("x", b"x", -0.5, "\n")]  # the runtime's likeliest there: a newline
    ours = _spelt({"id": 198, "text": "\\n", "bytes": "0a"})
    assert compare(runtime, [b"x"], [-0.5], [ours]).choices_differ == []


def test_hostile_files_are_one_line(tmp_path: Path) -> None:
    """llama.cpp's older probs with a stray entry before the token's own; tokens whose bytes
    spell no UTF-8 text (bytes given, or a lone surrogate's JSON escape)."""
    stray = {"completion_probabilities": [{"content": " sat", "probs": [
        {"tok_str": " x", "prob": 0.5}, 7, {"tok_str": " sat", "prob": 0.25}]}]}
    assert_near(read_logprobs(_write(tmp_path, stray))[0].logprob, math.log(0.25), atol=0,
                rtol=0)
    for entry in ({"token": " sat", "logprob": -1.0, "bytes": [255, 254]},
                  {"token": "\ud800", "logprob": -1.0}):
        with pytest.raises(AttnCliError, match=r"tokens do not spell UTF-8 text \(byte 0x"):
            read_logprobs(_write(tmp_path, {"logprobs": [entry]}))


def test_log_probabilities_summing_past_a_float_are_refused(tmp_path: Path) -> None:
    """Two finite log-probabilities of -1e308 over one of attncli's tokens sum to -inf, which
    the JSON could not hold."""
    reported = read_logprobs(_write(tmp_path, {"logprobs": [
        {"token": " Par", "logprob": -1e308}, {"token": "is", "logprob": -1e308}]}))
    with pytest.raises(AttnCliError, match=r"for ' Paris' sum to -inf, past what a float holds"):
        compare(reported, [b" Paris"], [-2.0], [" Paris"])


def test_openai_completions_and_server_sent_events_are_read(tmp_path: Path) -> None:
    """OpenAI's completions format (vLLM writes it): parallel lists, top_logprobs as
    {token: logprob}; and a chat stream saved as server-sent events."""
    legacy = {"choices": [{"text": "The capital is Paris", "logprobs": {
        "tokens": [p.decode() for p in PIECES], "token_logprobs": LOGPROBS,
        "top_logprobs": [{c: lp, "zz": lp - 1.0} for c, lp in zip(CHOICES, LOGPROBS,
                                                                 strict=True)]}}]}
    entries = _ollama(PIECES, LOGPROBS)
    events = tmp_path / "events.txt"
    events.write_text(": keep-alive\n\n" + "".join(
        f"data: {json.dumps({'choices': [{'delta': {}, 'logprobs': {'content': [e]}}]})}\n\n"
        for e in entries) + 'data: {"choices": [{"delta": {}, "finish_reason": "stop"}]}\n\n'
        "data: [DONE]\n\n")
    for reported in (read_logprobs(_write(tmp_path, legacy)), read_logprobs(str(events))):
        assert answer_of(reported) == "The capital is Paris"
        assert [r.choice for r in reported] == CHOICES
        # read back from JSON: equal to float64 rounding
        assert_near([r.logprob for r in reported], LOGPROBS, atol=1e-12, rtol=0)
    events.write_text("data: {\"choices\": [{\"logprobs\": {\"content\": [{\"token\": \"a\"")
    with pytest.raises(AttnCliError, match=r"events.txt' line 1 is not valid JSON"):
        read_logprobs(str(events))


def test_a_token_that_spells_nothing_is_left_out_of_the_receipt(tmp_path: Path) -> None:
    # llama.cpp's server lists the end-of-generation token it sampled, its text "" (a special
    # token is not rendered): no text of the answer is its, so it is compared with nothing
    stop = {"token": "", "logprob": -3.0, "bytes": [], "top_logprobs": [{"token": ""}]}
    entries = _ollama(PIECES, LOGPROBS)
    for doc in ([*entries, stop], [stop, *entries[:2], stop, *entries[2:]]):
        reported = read_logprobs(_write(tmp_path, {"logprobs": doc}))
        receipt = compare(reported, PIECES, LOGPROBS, CHOICES)
        assert receipt.compared == "tokens" and receipt.flagged == []
        assert [r.text for r in receipt.rows] == [p.decode() for p in PIECES]
        assert_near([r.difference for r in receipt.rows], [0.0] * 5, atol=1e-12, rtol=0)
    with pytest.raises(AttnCliError, match="holds no per-token log-probabilities"):
        read_logprobs(_write(tmp_path, {"logprobs": [stop]}))
