"""`attncli generate --messages/--answer/--explain-last/--view` through the command line and
`attncli.generate(messages=..., answer=...)`, on a tiny Llama checkpoint with a ChatML
template; bad input one line, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import attncli
from attncli.records.asking import AUTO_LOOKS
from tests.cli.test_cli_generate import tiny  # noqa: F401 (the module's fixture)
from tests.conftest import attncli_process
from tests.tolerance import assert_near

CHAT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "the cat"},
        {"role": "assistant", "content": "sat on"}, {"role": "user", "content": "the mat"},
        {"role": "assistant", "content": "and slept"}]


@pytest.fixture
def chat(tmp_path: Path) -> Path:
    path = tmp_path / "chat.json"
    path.write_text(json.dumps({"model": "m", "messages": CHAT}))
    return path


def test_explain_last_is_the_answer_given_after_the_conversation(cli, tiny: Path,  # noqa: ANN001, F811
                                                                 chat: Path) -> None:
    run = cli("generate", "--messages", str(chat), "--explain-last", "--model", str(tiny),
              "--json")
    assert run.code == 0, run.err
    doc = json.loads(run.out)
    assert doc["given"] == ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nthe cat"
                            "<|im_end|>\n<|im_start|>assistant\nsat on<|im_end|>\n<|im_start|>"
                            "user\nthe mat<|im_end|>\n<|im_start|>assistant\n")
    assert doc["config"]["given"] is True and doc["config"]["stopped"] == "given"
    assert "".join(t["text"] for t in doc["answer"]) == "and slept"
    assert [t["role"] for t in doc["turns"]] == ["system", "user", "assistant", "user"]
    spelt = [bytes.fromhex(t["bytes"]) for t in doc["prompt"]]
    assert b"".join(spelt[doc["turns"][3]["start"]:doc["turns"][3]["end"]]) == b"the mat"
    assert all(1 <= step["rank"] and step["logprob"] <= 0 for step in doc["steps"])
    body = json.dumps(CHAT[:-1]).encode()
    piped = attncli_process("generate", "--messages", "-", "--model", str(tiny), "--answer",
                            "and slept", "--json", input=body)
    assert piped.returncode == 0, piped.stderr
    assert json.loads(piped.stdout)["steps"] == doc["steps"]


def test_the_view_marks_turns_probabilities_and_other_choices(cli, tiny: Path) -> None:  # noqa: ANN001, F811
    run = cli("generate", "the cat", "--model", str(tiny), "--answer", "sat on the mat",
              "--at", "0")
    assert run.code == 0, run.err
    assert "a given answer of" in run.out and "teacher-forced" in run.out
    assert "[user] " in run.out and "occlusion: " in run.out  # the default view, a short prompt
    assert ", model: " in run.out  # a random model would not have written this answer


def test_the_default_view_is_occlusion_where_it_is_cheap_and_else_value_saying_so(
        cli, tiny: Path, tmp_path: Path) -> None:  # noqa: ANN001, F811
    short = cli("generate", "the cat", "--model", str(tiny), "--answer", "sat on", "--json")
    assert short.code == 0 and short.err == "", short.err
    doc = json.loads(short.out)
    t = len(doc["prompt"]) + len(doc["answer"])
    spans = doc["occlusion_spans"]["spans"]  # each word, its variant run from its first token
    assert doc["config"]["view"] == "occlusion" and len(doc["occlusion"]) == len(doc["answer"])
    chosen = dict(doc["config"]["view_chosen"])
    looks = chosen.pop("occlusion_looks")
    assert chosen == {"by": "auto", "most_looks": AUTO_LOOKS}
    # the same sum of the same integers over t, in float64 both sides
    assert_near(looks, sum(t - min(s) for s in spans) / t, atol=0.0, rtol=1e-12)
    saved = tmp_path / "auto.json"
    saved.write_text(short.out)
    shown = " ".join(cli("show", str(saved)).out.split())
    assert "occlusion: " in shown and "the default view (--view auto): its masked passes took" \
        in shown
    long_prompt = " ".join(f"word{i}" for i in range(30))
    run = cli("generate", long_prompt, "--model", str(tiny), "--answer", "sat on", "--json")
    assert run.code == 0, run.err
    doc = json.loads(run.out)
    looks = doc["config"]["view_chosen"]["occlusion_looks"]
    assert doc["config"]["view"] == "value" and looks > AUTO_LOOKS
    assert "value_norms" in doc and "occlusion" not in doc
    assert run.err == (f"attncli: the occlusion view would take {looks:.1f} looks (over "
                       f"{AUTO_LOOKS}): showing value; ask --view occlusion for it\n")
    text = " ".join(cli("generate", long_prompt, "--model", str(tiny), "--answer", "sat on").out
                    .split())
    assert text.startswith(str(tiny)) and "value-weighted attention" in text
    assert f"occlusion would take {looks:.1f} looks, over {AUTO_LOOKS}; --view occlusion" in text
    asked = cli("generate", long_prompt, "--model", str(tiny), "--answer", "sat on", "--view",
                "raw", "--json")  # an explicit view as asked, with no cost and no note
    assert asked.err == "" and json.loads(asked.out)["config"]["view"] == "raw"
    assert "view_chosen" not in json.loads(asked.out)["config"]
    api = attncli.generate("the cat", model=str(tiny), answer="sat on")
    assert api.record.view == api.view.kind == "occlusion" and api.record.auto_looks is not None
    # --layers chooses among attention's layers, which occlusion has none of: value, said so
    layered = cli("generate", "the cat", "--model", str(tiny), "--answer", "sat on", "--layers",
                  "0:1")
    assert "value-weighted attention" in layered.out and "layers 0:1" in layered.out
    assert layered.err.startswith("attncli: --layers, --head and --combine choose among "
                                  "attention's layers and heads: showing value; ask --view "
                                  "occlusion for the whole model's (")
    assert attncli.generate("the cat", model=str(tiny), answer="sat on", head=1).view.kind \
        == "value"


@pytest.mark.parametrize("view", ["value", "occlusion"])
def test_value_and_occlusion_views_are_computed_kept_and_shown_again(
        cli, tiny: Path, tmp_path: Path, view: str) -> None:  # noqa: ANN001, F811
    saved = tmp_path / "given.json"
    run = cli("generate", "the cat", "--model", str(tiny), "--answer", "sat on", "--view", view,
              "--json")
    assert run.code == 0, run.err
    saved.write_text(run.out)
    doc = json.loads(run.out)
    key = "value_norms" if view == "value" else "occlusion"
    assert key in doc
    if view == "occlusion":
        assert len(doc["occlusion"]) == len(doc["answer"])
        assert all(len(row) == len(doc["prompt"]) for row in doc["occlusion"])
        assert all(row[i] == 0.0 for row in doc["occlusion"] for i in doc["sinks"])
    shown = cli("show", str(saved))  # in the view it was made with
    assert shown.code == 0, shown.err
    assert ("value-weighted" if view == "value" else "occlusion:") in shown.out


def test_occlusion_masks_each_turn_or_word_and_show_reads_the_spans_back(
        cli, tiny: Path, tmp_path: Path, chat: Path) -> None:  # noqa: ANN001, F811
    run = cli("generate", "--messages", str(chat), "--explain-last", "--model", str(tiny),
              "--view", "occlusion", "--occlude", "turn", "--json")
    assert run.code == 0, run.err
    doc = json.loads(run.out)
    sinks = set(doc["sinks"])
    assert doc["occlusion_spans"] == {"by": "turn", "spans": [
        [j for j in range(t["start"], t["end"]) if j not in sinks] for t in doc["turns"]]}
    for row in doc["occlusion"]:  # one drop for every token of a turn
        assert all(len({row[j] for j in span}) == 1 for span in doc["occlusion_spans"]["spans"])
    saved = tmp_path / "turns.json"
    saved.write_text(run.out)
    shown = cli("show", str(saved), "--json")
    assert shown.code == 0, shown.err
    assert json.loads(shown.out)["occlusion_spans"] == doc["occlusion_spans"]
    assert "token's turn (its tokens together)" in " ".join(cli("show", str(saved)).out.split())
    words = cli("generate", "the cat", "--model", str(tiny), "--answer", "sat on", "--view",
                "occlusion")  # by word unless told
    assert words.code == 0, words.err
    assert "token's word (its tokens together)" in " ".join(words.out.split())
    bad = cli("generate", "the cat", "--model", str(tiny), "--answer", "sat", "--view",
              "occlusion", "--occlude", "sentence")
    assert bad.code == 2 and "--occlude must be one of token, word, turn" in bad.err


def test_the_python_api_takes_messages_and_an_answer(cli, tiny: Path,  # noqa: ANN001, F811
                                                    chat: Path) -> None:
    doc = json.loads(cli("generate", "--messages", str(chat), "--explain-last", "--model",
                         str(tiny), "--json", "--view", "value").out)
    result = attncli.generate(model=str(tiny), messages=CHAT[:-1], answer="and slept",
                              view="value")
    assert result.record.given_answer and result.answer == "and slept"
    assert result.to_dict() == doc
    assert result.ranked(0) == [(result.prompt_tokens[i], w)
                                for i, w in result.record.ranked(0, result.view)]


@pytest.mark.parametrize(("args", "says"), [
    (["--messages", "MISSING"], "does not exist"),
    (["--messages", "BAD"], "is not a chat"),
    (["--messages", "CHAT", "--answer", "x", "--explain-last"], "each give the answer"),
    (["the cat", "--explain-last"], "explains the last turn of --messages"),
    (["the cat", "--answer", ""], "the answer is empty"),
    (["the cat", "--answer", "x", "--answer-file", "CHAT"], "each give the answer"),
    (["the cat", "--messages", "CHAT", "--explain-last"], "give TEXT or --messages"),
    (["--messages", "CHAT"], "ends with the assistant's turn"),
    (["--messages", "CHAT", "--explain-last", "--system", "x"], "holds the system turn"),
    # --show-template printed the conversation without --system, and no word of it (rt7)
    (["--messages", "CHAT", "--explain-last", "--system", "x", "--show-template"],
     "holds the system turn"),
    (["the cat", "--raw", "--system", "x", "--show-template"], "--raw sends the prompt without"),
    (["--messages", "CHAT", "--explain-last", "--raw"], "--raw sends text without it"),
    (["the cat", "--view", "flow"], "--view must be one of auto, raw, value, occlusion"),
    # --file was left unread beside --messages; a second reader of stdin found it empty
    (["--file", "CHAT", "--messages", "CHAT", "--explain-last"], "give --file or --messages"),
    (["--messages", "-", "--logprobs", "-"], "--messages and --logprobs each read standard"),
    (["-", "--answer-file", "-"], "TEXT and --answer-file each read standard input"),
    (["--file", "-", "--logprobs", "-"], "--file and --logprobs each read standard input"),
    (["--answer-file", "-"], "give TEXT, --file or --messages: --answer-file takes standard"),
    # options that did nothing here, silently: the draw's knobs without --sample (llama.cpp and
    # Ollama sample once a temperature is set), a draw or a bound beside a given answer,
    # --occlude with a view that makes no occlusion passes
    (["the cat", "--temperature", "0.7"], "--temperature applies with --sample only"),
    (["the cat", "--top-k", "5"], "--top-k applies with --sample only"),
    (["the cat", "--sample-seed", "3"], "--sample-seed applies with --sample only"),
    (["the cat", "--answer", "x", "--sample"], "--answer gives the answer: leave --sample out"),
    (["the cat", "--answer", "x", "--max-new-tokens", "4"], "--max-new-tokens bounds the answer"),
    (["the cat", "--occlude", "token", "--view", "value"], "--view value makes no occlusion"),
])
def test_bad_input_is_one_line_exit_2(cli, tiny: Path, chat: Path, tmp_path: Path,  # noqa: ANN001, F811
                                      args: list[str], says: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"prompt": "hi"}))
    names = {"CHAT": str(chat), "BAD": str(bad), "MISSING": str(tmp_path / "none.json")}
    run = cli("generate", *[names.get(a, a) for a in args], "--model", str(tiny))
    assert run.code == 2, run.out
    assert says in run.err and len(run.err.strip().splitlines()) == 1 and run.out == ""


def test_show_draws_a_saved_receipt_and_refuses_a_broken_one_in_one_line(
        cli, tmp_path: Path) -> None:  # noqa: ANN001
    """A generation saved with its receipt is drawn by show as generate drew it; a receipt whose
    parts its renderer reads are missing or out of range is one line; a part no renderer reads
    is left out of show --json, which writes the typed record's to_dict() as generate does."""
    import json

    given = ("generate", "Your journey", "--model", "samples/toy-gpt2", "--raw", "--answer",
             " starts with")
    doc = cli(*given, "--json").json()
    moved = [step["logprob"] - (2.0 if k == 0 else 0.0) for k, step in enumerate(doc["steps"])]
    logprobs = tmp_path / "logprobs.json"
    logprobs.write_text(json.dumps({"logprobs": [
        {"token": bytes.fromhex(t["bytes"]).decode(), "logprob": lp}
        for t, lp in zip(doc["answer"], moved, strict=True)]}))
    table = cli(*given, "--logprobs", str(logprobs))
    saved = cli(*given, "--logprobs", str(logprobs), "--json").json()
    assert saved["receipt"]["flagged"] == [0]
    path = tmp_path / "g.json"
    path.write_text(json.dumps(saved))
    shown = cli("show", str(path))
    assert shown.code == 0 and shown.out == table.out, shown.err
    for change, message in [
            (lambda r: r.pop("rows"), "receipt has no 'rows'"),
            (lambda r: r.update(flagged=[99]), "receipt.flagged[0] is 99, outside"),
            (lambda r: r["largest"].update(difference="x"), "receipt.largest.difference"),
            (lambda r: r.update(compared="bytes"), "receipt.compared")]:
        broken = json.loads(json.dumps(saved))
        change(broken["receipt"])
        path.write_text(json.dumps(broken))
        cli("show", str(path)).assert_usage_error(message)
    odd = json.loads(json.dumps(saved))
    odd["receipt"]["note"] = "\ud800"
    path.write_text(json.dumps(odd))
    again = cli("show", str(path), "--json")
    assert again.code == 0 and again.json()["receipt"] == saved["receipt"]


@pytest.mark.parametrize(("args", "says"), [
    (("the cat", "--answer", b"sat \xff".decode("utf-8", "surrogateescape")),
     "--answer is not valid UTF-8 (byte 0xff at character 4)"),
    (("the cat", "--system", b"\xe9t\xe9".decode("utf-8", "surrogateescape")),
     "--system is not valid UTF-8 (byte 0xe9 at character 0)"),
    ((b"the \xff cat".decode("utf-8", "surrogateescape"),),
     "TEXT is not valid UTF-8 (byte 0xff at character 4)"),
])
def test_text_that_is_not_utf8_is_named(cli, tiny: Path, args: tuple[str, ...],  # noqa: ANN001, F811
                                        says: str) -> None:
    """A byte the shell passed that is not UTF-8 is named where it is (the tokenizer's own
    refusal said "TextInputSequence must be str")."""
    cli("generate", *args, "--model", str(tiny), "--max-new-tokens", "1").assert_usage_error(says)


def test_a_message_with_a_lone_surrogate_is_named(cli, tiny: Path, tmp_path: Path) -> None:  # noqa: ANN001, F811
    path = tmp_path / "chat.json"
    path.write_text('[{"role": "user", "content": [{"type": "text", "text": "a\\ud800"}]}]')
    cli("generate", "--messages", str(path), "--model", str(tiny)).assert_usage_error(
        "message 0's content is not valid UTF-8 (a lone surrogate \\ud800 at character 1)")


def test_an_answer_no_positions_could_hold_is_refused_before_tokenizing(
        cli, tiny: Path, tmp_path: Path,  # noqa: ANN001, F811
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A 62 MB --answer-file went whole into the tokenizer, which aborted the process (SIGABRT)
    under a 4 GB address-space limit; the prompt was already bounded this way."""
    import attncli.models.generate.prompt as prompt_module

    path = tmp_path / "answer.txt"
    path.write_text("sat on " * 1000)  # 7,000 bytes: past 256 positions × 9 bytes a token
    real = prompt_module.hf_tokenize
    monkeypatch.setattr(prompt_module, "hf_tokenize", lambda folder, text, **kw: (
        pytest.fail("the answer was tokenized") if len(text) > 5000 else real(folder, text, **kw)))
    cli("generate", "the cat", "--model", str(tiny), "--answer-file", str(path)
        ).assert_usage_error("the answer is 7,000 bytes, more than the model's 256 positions "
                             "can hold (its longest token stands for 9 bytes): give a shorter "
                             "answer")


def test_the_python_api_takes_the_runtime_log_probs_and_special_tokens_as_the_cli_does(
        cli, tmp_path: Path) -> None:  # noqa: ANN001
    """attncli.generate(logprobs=FILE) explains the runtime's answer with its receipt, equal to
    generate --logprobs FILE --json; allow_special= reads a special token's text as the token,
    as --allow-special does (a different prompt from the one that spells it out)."""
    given = ("Your journey", "--model", "samples/toy-gpt2", "--raw")
    doc = cli("generate", *given, "--answer", " starts with", "--json").json()
    logprobs = tmp_path / "logprobs.json"
    logprobs.write_text(json.dumps({"logprobs": [
        {"token": bytes.fromhex(t["bytes"]).decode(), "logprob": step["logprob"] - 0.5}
        for t, step in zip(doc["answer"], doc["steps"], strict=True)]}))
    by_cli = cli("generate", *given, "--logprobs", str(logprobs), "--json").json()
    by_api = attncli.generate("Your journey", "samples/toy-gpt2", raw=True,
                              logprobs=logprobs).to_dict()
    assert by_api["receipt"] == by_cli["receipt"] and by_api["receipt"]["rows"]
    assert by_api["answer"] == by_cli["answer"]
    special = "a<|endoftext|>b"
    for allow in (False, True):
        flag = ["--allow-special"] if allow else []
        api = attncli.generate(special, "samples/toy-gpt2", raw=True, max_new_tokens=1,
                               allow_special=allow).to_dict()
        assert api["prompt"] == cli("generate", special, "--model", "samples/toy-gpt2", "--raw",
                                    "--max-new-tokens", "1", *flag, "--json").json()["prompt"]
    assert len(api["prompt"]) < len(attncli.generate(special, "samples/toy-gpt2", raw=True,
                                                     max_new_tokens=1).to_dict()["prompt"])
    with pytest.raises(attncli.AttnCliError, match="logprobs must be"):
        attncli.generate("Your journey", "samples/toy-gpt2", logprobs=3)  # type: ignore[arg-type]


@pytest.mark.parametrize("ending", ["\n", "\r\n", ""])
def test_an_answer_file_s_line_ending_is_not_part_of_the_answer(
        cli, tiny: Path, tmp_path: Path, ending: str) -> None:  # noqa: ANN001, F811
    # a file saved on Windows ends "\r\n": the "\r" was teacher-forced as the answer's last
    # token (rt7), where --file's text leaves the ending out whichever it is
    path = tmp_path / "answer.txt"
    path.write_bytes(f"sat on the mat{ending}".encode())
    from_file = cli("generate", "the cat", "--model", str(tiny), "--answer-file", str(path),
                    "--json")
    given = cli("generate", "the cat", "--model", str(tiny), "--answer", "sat on the mat",
                "--json")
    assert from_file.code == 0, from_file.err
    assert json.loads(from_file.out)["answer"] == json.loads(given.out)["answer"]


def test_a_receipt_of_an_absurd_log_probability_is_drawn_in_powers_of_ten(
        cli, tmp_path: Path) -> None:  # noqa: ANN001
    """A runtime's log-probability of -1e300 is a finite number, taken; its difference was
    drawn with 300 digits (rt7), past any terminal's width."""
    given = ("generate", "Your journey", "--model", "samples/toy-gpt2", "--raw", "--answer",
             " starts with")
    doc = cli(*given, "--json").json()
    logprobs = tmp_path / "logprobs.json"
    logprobs.write_text(json.dumps({"logprobs": [
        {"token": bytes.fromhex(t["bytes"]).decode(), "logprob": -1e300 if k == 0 else -1.0}
        for k, t in enumerate(doc["answer"])]}))
    run = cli(*given, "--logprobs", str(logprobs))
    assert run.code == 0, run.err
    assert "+1.000e+300 nats" in run.out
    assert max(len(line) for line in run.out.splitlines()) <= 120
