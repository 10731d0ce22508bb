"""`attncli generate` through the command line, and `attncli.generate` in Python, on a tiny
Llama checkpoint with a ChatML template in its tokenizer_config.json."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

import attncli
from tests.conftest import ROOT
from tests.encoder_fixtures import save_encoder
from tests.llama_fixtures import save_family
from tests.tolerance import assert_near

TEMPLATE = ("{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + "
            "'<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}"
            "{{ '<|im_start|>assistant\\n' }}{% endif %}")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("cli-generate") / "llama"
    # 256 positions: the chat tests' conversations with their answers run to ~220 tokens
    save_family(folder, "llama", seed=21, max_position_embeddings=256)
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"chat_template": TEMPLATE, "eos_token": "<|im_end|>"}))
    return folder


def test_json_holds_the_answer_the_template_and_every_steps_raw_weights(cli, tiny: Path) -> None:  # noqa: ANN001
    run = cli("generate", "the cat", "--model", str(tiny), "--max-new-tokens", "5", "--json")
    assert run.code == 0, run.err
    doc = json.loads(run.out)
    assert doc["kind"] == "generate"
    assert doc["given"] == "<|im_start|>user\nthe cat<|im_end|>\n<|im_start|>assistant\n"
    assert doc["config"]["template"] == {"used": True,
                                         "origin": "tokenizer_config.json chat_template"}
    assert doc["config"]["sampling"] == {"max_new_tokens": 5, "strategy": "greedy"}
    assert len(doc["steps"]) == len(doc["answer"]) <= 5
    p = len(doc["prompt"])
    for s, step in enumerate(doc["steps"]):
        assert len(step["weights"]) == doc["model"]["layers"] == 3  # layers
        assert len(step["weights"][0]) == doc["model"]["heads"] == 4
        assert all(len(row) == p + s for layer in step["weights"] for row in layer)
        assert_near([sum(row) for layer in step["weights"] for row in layer], 1.0)
        assert step["top"][0]["prob"] >= step["top"][-1]["prob"]
    assert doc["sinks"][0] == 0 and p - 1 in doc["sinks"]  # the generation prompt's "\n"


def test_python_api_equals_the_json(cli, tiny: Path) -> None:  # noqa: ANN001
    doc = json.loads(cli("generate", "the cat", "--model", str(tiny), "--max-new-tokens", "4",
                         "--json").out)
    result = attncli.generate("the cat", str(tiny), max_new_tokens=4)
    assert result.to_dict() == doc
    assert result.answer_tokens == [t["text"] for t in doc["answer"]]
    assert [tuple(w.shape) for w in result.weights] == [
        (3, 4, len(doc["prompt"]) + s) for s in range(len(doc["answer"]))]
    assert "answer" in str(result) and "<table" not in str(result)
    assert "<" in result._repr_html_()


def test_text_view_and_show_template(cli, tiny: Path) -> None:  # noqa: ANN001
    run = cli("generate", "the cat", "--model", str(tiny), "--max-new-tokens", "3", "--at", "0",
              "--combine", "max", "--layers", "0:1")
    assert run.code == 0, run.err
    assert "combined by max" in run.out and "layers 0:1" in run.out
    shown = cli("generate", "the cat", "--model", str(tiny), "--system", "Be brief.",
                "--show-template")
    assert shown.out == ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nthe cat"
                         "<|im_end|>\n<|im_start|>assistant\n")
    raw = cli("generate", "the cat", "--model", str(tiny), "--raw", "--show-template")
    assert raw.out == "the cat"


def test_a_system_message_for_a_model_without_a_template_is_refused(cli) -> None:  # noqa: ANN001
    """It was dropped without a word: GPT-2 has no chat template to put it in."""
    cli("generate", "the cat", "--model", str(ROOT / "samples" / "toy-gpt2"), "--system",
        "Be brief.", "--show-template").assert_usage_error(
        "--system goes into the model's chat template, and this model has none")


def test_a_seed_reproduces_the_sampled_json(cli, tiny: Path) -> None:  # noqa: ANN001
    args = ("generate", "the cat", "--model", str(tiny), "--max-new-tokens", "6", "--sample",
            "--temperature", "2", "--sample-seed", "9", "--json")
    first, second = json.loads(cli(*args).out), json.loads(cli(*args).out)
    assert first == second and first["config"]["sampling"]["seed"] == 9


def test_the_old_spelling_of_sample_seed_is_taken_with_a_note(cli, tiny: Path) -> None:  # noqa: ANN001
    """--seed was generate's sampling seed (run's --seed seeds the weights): still accepted,
    hidden from --help, with one line on stderr; given with the new spelling it is refused."""
    args = ("generate", "the cat", "--model", str(tiny), "--max-new-tokens", "3", "--sample",
            "--json")
    new, old = cli(*args, "--sample-seed", "9"), cli(*args, "--seed", "9")
    assert old.code == 0 and json.loads(old.out) == json.loads(new.out)
    assert old.err == "attncli: --seed is now --sample-seed (the old spelling goes in the next " \
        "release)\n"
    both = cli(*args, "--seed", "9", "--sample-seed", "8")
    assert both.code == 2 and both.err == "attncli: error: --seed is the old spelling of " \
        "--sample-seed: give one\n"
    assert "--seed" not in cli("generate", "--help").out


@pytest.mark.parametrize("args", [
    ("--temperature", "0", "--sample"), ("--max-new-tokens", "0"), ("--at", "99"),
    ("--layers", "1:9"), ("--layers", "x"), ("--head", "7"), ("--combine", "median"),
    ("--raw", "--system", "s"), ("--at", "²"), ("--at", "--3"), ("--layers", "²:3"),
    ("--layers", "0:--3"), ("--layers", "０:2"), ("--sample", "--top-p", "nan"),
    ("--sample", "--temperature", "inf")])
def test_bad_options_are_one_line_and_exit_2(cli, tiny: Path, args: tuple[str, ...]) -> None:  # noqa: ANN001
    run = cli("generate", "the cat", "--model", str(tiny), "--max-new-tokens", "2", *args)
    assert run.code == 2 and run.out == ""
    assert run.err.startswith("attncli: error: ") and len(run.err.strip().splitlines()) == 1


def test_an_encoder_is_refused(cli, tmp_path: Path) -> None:  # noqa: ANN001
    save_encoder(tmp_path / "bert", "bert", seed=2)
    run = cli("generate", "the cat", "--model", str(tmp_path / "bert"))
    assert run.code == 2 and "decoder" in run.err and len(run.err.strip().splitlines()) == 1


def test_the_option_groups_defaults_are_the_records() -> None:
    """generate takes Sampling as it is; Attended carries GenerateView's fields (default and
    marker), parsing what the record receives."""
    from dataclasses import fields

    from attncli.cli.generating import Answering, Attended
    from attncli.opt import marker
    from attncli.records.generation import GenerateView

    assert not {"max_new_tokens", "sample", "top_k", "seed"} & {f.name for f in fields(Answering)}
    attended, view = Attended(), GenerateView()
    assert (attended.at, attended.layers, attended.combine, attended.exclude_sinks) == (
        view.at, view.layers, view.combine, view.exclude_sinks)
    records = {f.name: f for f in fields(GenerateView)}
    assert all(marker(f) == marker(records[f.name]) for f in fields(Attended))


def test_a_missing_model_is_one_line(cli) -> None:  # noqa: ANN001
    run = cli("generate", "the cat")
    assert run.code == 2 and run.out == ""
    assert run.err == ("attncli: error: generate needs --model (the decoder that answers), or a "
                       "default model: ATTNCLI_MODEL=NAME, or `attncli config set model NAME` "
                       "(`attncli pull smollm2` fetches a small one)\n")


def test_at_names_the_first_answer_token_with_that_text(cli, tiny: Path) -> None:  # noqa: ANN001
    args = ("generate", "the cat", "--model", str(tiny), "--max-new-tokens", "6")
    answer = [t["text"] for t in json.loads(cli(*args, "--json").out)["answer"]]
    for wanted in dict.fromkeys(answer):  # each distinct text once
        first = answer.index(wanted)
        by_text, by_index = cli(*args, "--at", wanted), cli(*args, "--at", str(first))
        assert by_text.code == by_index.code == 0, by_text.err
        assert by_text.out == by_index.out
        assert f"answer token {first} {wanted!r} looked at:" in by_text.out
    missing = cli(*args, "--at", "no such token text")
    assert missing.code == 2 and missing.out == ""
    assert missing.err.startswith("attncli: error: --at 'no such token text' is not the text of "
                                  "an answer token (the answer's tokens: ")
    assert len(missing.err.strip().splitlines()) == 1 and repr(answer[0]) in missing.err


def test_at_by_text_ignores_a_leading_space_when_no_token_matches_exactly() -> None:
    from attncli.core.result import ModelInfo, TokenInfo
    from attncli.errors import AttnCliError
    from attncli.records.asking import Sampling
    from attncli.records.generation import GenerationResult
    from attncli.records.given import Template
    from attncli.records.shown import answer_index

    answer = [TokenInfo(3 + s, s, text) for s, text in enumerate([" Paris", ".", " Paris"])]
    result = GenerationResult(model=ModelInfo.__new__(ModelInfo), prompt=[], answer=answer,
                              given="", template=Template(False, ""), sampling=Sampling(),
                              stop_ids=[], stopped="eos", sinks=[], steps=[])
    assert [answer_index(result, at) for at in ("Paris", " Paris", ".", "2", None)] == [
        0, 0, 1, 2, None]
    with pytest.raises(AttnCliError, match="'Rome'"):
        answer_index(result, "Rome")


def test_a_json_past_its_budget_is_refused_before_the_run_naming_what_keeps_less(
        cli, tiny: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    import attncli.models.generate.run as run
    from attncli import machine

    args = ("generate", "the cat", "--model", str(tiny), "--raw", "--max-new-tokens", "6")
    doc = json.loads(cli(*args, "--json").out)
    p, n = len(doc["prompt"]), 6
    cells = 3 * 4 * sum(p + s for s in range(n))  # layers × heads × keys, over every step
    one_head = 1 * 1 * sum(p + s for s in range(n))  # --layers 0:1 --head 2
    budget = (cells - 1) * run.JSON_WEIGHT_TEXT
    monkeypatch.setattr(run, "GENERATE_JSON_BUDGET", budget)

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("decoding started")

    with monkeypatch.context() as inner:
        inner.setattr(run, "decode", never)
        refused = cli(*args, "--json")
        assert refused.code == 2 and refused.out == ""
        assert refused.err == (f"attncli: error: 3 layers × 4 heads over 6 steps after a {p}-token "
                               f"prompt would put up to {cells:,} weights (about "
                               f"{machine.size_text(cells * 16)}) in the JSON, past its "
                               f"{machine.size_text(budget)} budget; keep fewer with --layers A:B "
                               "and --head H, or write fewer tokens with --max-new-tokens\n")
        for option, name in (("--save-json", "big.json"), ("--save", "big.html")):
            saved = cli(*args, option, str(tiny.parent / name))
            assert saved.code == 2 and "budget" in saved.err
            assert not (tiny.parent / name).exists()
    assert one_head * run.JSON_WEIGHT_TEXT <= budget
    fewer = json.loads(cli(*args, "--json", "--layers", "0:1", "--head", "2").out)
    assert [s["weights"] for s in fewer["steps"]] == [
        [[row[2]] for row in step["weights"][0:1]] for step in doc["steps"]]
    assert fewer["config"]["weights"] == {"layers": [0, 1], "head": 2}
    assert cli(*args).code == 0  # the view writes no JSON: no budget


def test_the_json_weight_text_bound_holds(cli, tiny: Path) -> None:  # noqa: ANN001
    run = cli("generate", "the cat", "--model", str(tiny), "--raw", "--max-new-tokens", "8",
              "--json")
    doc = json.loads(run.out)
    weights = [step.pop("weights") for step in doc["steps"]]
    cells = sum(len(row) for step in weights for layer in step for row in layer)
    from attncli.models.generate.run import JSON_WEIGHT_TEXT

    assert len(json.dumps(weights)) <= cells * JSON_WEIGHT_TEXT


@pytest.mark.parametrize("view", [(), ("--at", "1", "--combine", "max"),
                                  ("--layers", "1:3", "--head", "2", "--keep-sinks", "--at", "0")])
def test_show_reads_the_json_back_into_the_same_view(cli, tiny: Path, tmp_path: Path,  # noqa: ANN001
                                                     view: tuple[str, ...]) -> None:
    args = ("generate", "the cat", "--model", str(tiny), "--max-new-tokens", "4")
    saved = tmp_path / "answer.json"
    first = cli(*args, *view, "--save-json", str(saved))
    assert first.code == 0, first.err
    again = cli("show", str(saved), *view)
    assert again.code == 0, again.err
    assert again.out == first.out
    assert json.loads(cli("show", str(saved), "--json").out) == json.loads(saved.read_text())


@pytest.mark.parametrize(("change", "says"), [
    (lambda d: d["steps"][0].update(weights=None), "steps[0].weights is null"),
    (lambda d: d["steps"][1]["weights"][0].pop(), "steps[1].weights[0] has 3 items, expected 4"),
    (lambda d: d["steps"][0]["weights"][0][0].append(0.5), "steps[0].weights[0][0] has"),
    (lambda d: d["answer"][0].update(index=0), "answer[0].index"),
    (lambda d: d["config"].update(stopped="bored"), "config.stopped"),
    (lambda d: d["config"]["weights"].update(layers=[2, 9]), "config.weights.layers[1]"),
    (lambda d: d.pop("steps"), "steps"),
    (lambda d: d["sinks"].append(10**9), "sinks["),
    (lambda d: d["steps"][1]["weights"][2][1].__setitem__(0, -0.5), "steps[1].weights hold -0.5"),
    (lambda d: d["steps"][0]["weights"][0][0].__setitem__(1, 1e30), "steps[0].weights hold 1e+30"),
    # held as float32, it was infinite, and show --json a traceback
    (lambda d: d["value_norms"][1][0].__setitem__(0, 1e308), "value_norms hold 1e+308"),
    (lambda d: d.update(turns=None), "turns is null, not a list"),  # null only where None may be
    (lambda d: d["config"]["template"].pop("origin"), "config.template has no 'origin'"),
    (lambda d: d["config"]["template"].update(origin=5), "config.template.origin is 5"),
    (lambda d: d["config"]["sampling"].update(strategy="sample"), "config.sampling has no"),
    (lambda d: d["config"]["sampling"].pop("max_new_tokens"), "config.sampling has no"),
    (lambda d: d["config"].update(sampling=[]), "config.sampling is []"),
    # hand-edited numbers that no softmax writes (they were drawn as p 5.000, #0)
    (lambda d: d["steps"][0].update(prob=5.0), "steps[0].prob is 5.0, not a probability"),
    (lambda d: d["steps"][1]["top"][0].update(prob=-0.1), "steps[1].top[0].prob is -0.1"),
    (lambda d: d["steps"][0].update(logprob=3.0), "steps[0].logprob is 3.0, not a log-prob"),
    (lambda d: d["steps"][2].update(rank=0), "steps[2].rank is 0")])
def test_show_refuses_a_broken_generation_in_one_line(cli, tiny: Path, tmp_path: Path,  # noqa: ANN001
                                                      change: Any, says: str) -> None:
    doc = json.loads(cli("generate", "the cat", "--model", str(tiny), "--max-new-tokens", "3",
                         "--json").out)
    change(doc)
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(doc))
    run = cli("show", str(broken))
    assert run.code == 2 and run.out == "", run.err
    assert run.err.startswith("attncli: error: saved file: ") and says in run.err
    assert len(run.err.strip().splitlines()) == 1


def test_show_refuses_the_generation_options_on_other_json_and_the_reverse(  # noqa: ANN001
        cli, tiny: Path, tmp_path: Path) -> None:
    runs = tmp_path / "run.json"
    runs.write_text(cli("run", "one two three", "--json").out)
    other = cli("show", str(runs), "--at", "0")
    assert other.code == 2 and "generate` JSON only" in other.err
    answer = tmp_path / "answer.json"
    answer.write_text(cli("generate", "the cat", "--model", str(tiny), "--max-new-tokens", "2",
                          "--json").out)
    rows = cli("show", str(answer), "--rows", "0:2")
    assert rows.code == 2 and "--rows does not apply to `generate` JSON" in rows.err


@pytest.mark.parametrize("save", [("--save", "t.html"), ("--save-json", "t.json"),
                                  ("--save", "t.txt", "--open")])
def test_show_template_refuses_the_files_it_would_not_write(cli, tiny: Path, tmp_path: Path,  # noqa: ANN001
                                                            save: tuple[str, ...]) -> None:
    """It exited 0 having written none of them."""
    path = str(tmp_path / save[1])
    cli("generate", "the cat", "--model", str(tiny), "--show-template", save[0], path,
        *save[2:]).assert_usage_error("--show-template prints what the model is given and stops")
    assert list(tmp_path.iterdir()) == []


def test_show_template_with_json_is_the_text_its_tokens_and_origin(cli, tiny: Path) -> None:  # noqa: ANN001
    text = cli("generate", "the cat", "--model", str(tiny), "--show-template").out
    doc = json.loads(cli("generate", "the cat", "--model", str(tiny), "--show-template",
                         "--json").out)
    answer = json.loads(cli("generate", "the cat", "--model", str(tiny), "--max-new-tokens",
                            "1", "--json").out)
    assert doc == {"kind": "template", "given": text,
                   "template": {"used": True, "origin": "tokenizer_config.json chat_template"},
                   "prompt": answer["prompt"]}


def test_layers_reads_heads_grammar_and_an_empty_span_is_one_line(cli, tiny: Path) -> None:  # noqa: ANN001
    """--layers means what it means in `heads`: a:b half-open, either end open, negatives from
    the end; parsed once, resolved against the model's layers where the weights are kept."""
    run = cli("generate", "the cat", "--model", str(tiny), "--layers", "2:2")
    assert run.code == 2 and run.out == ""
    assert run.err.startswith("attncli: error: --layers 2:2 selects nothing (it resolves to 2:2 "
                              "of ") and run.err.endswith(" layers)\n")
    doc = json.loads(cli("generate", "the cat", "--model", str(tiny), "--max-new-tokens", "1",
                         "--layers", "-1:", "--json").out)
    n = doc["model"]["layers"]
    assert doc["config"]["weights"]["layers"] == [n - 1, n]
    wide = cli("generate", "the cat", "--model", str(tiny), "--layers", f"0:{n + 1}")
    assert wide.code == 2 and wide.err == (f"attncli: error: --layers 0:{n + 1} is out of range: "
                                           f"this run has {n} layers (indices 0 to {n - 1}, or "
                                           f"-{n} to -1)\n")


def test_a_sampled_generation_missing_its_seed_is_one_line(cli, tiny: Path,  # noqa: ANN001
                                                           tmp_path: Path) -> None:
    doc = json.loads(cli("generate", "the cat", "--model", str(tiny), "--max-new-tokens", "2",
                         "--sample", "--sample-seed", "4", "--json").out)
    del doc["config"]["sampling"]["seed"]
    (tmp_path / "g.json").write_text(json.dumps(doc))
    run = cli("show", str(tmp_path / "g.json"))
    assert run.code == 2 and run.err == "attncli: error: saved file: config.sampling has no " \
        "'seed'\n"


def test_a_tiny_temperature_samples_the_likeliest_token(cli, tiny: Path) -> None:  # noqa: ANN001
    """logits / 1e-45 overflows float32: the draw is then the greedy one, never a traceback."""
    greedy = json.loads(cli("generate", "the cat", "--model", str(tiny), "--max-new-tokens", "3",
                            "--json").out)
    for temperature in ("1e-45", "5e-324"):
        run = cli("generate", "the cat", "--model", str(tiny), "--max-new-tokens", "3", "--json",
                  "--sample", "--temperature", temperature, "--sample-seed", "1")
        assert run.code == 0, run.err
        assert [t["id"] for t in json.loads(run.out)["answer"]] == \
            [t["id"] for t in greedy["answer"]]


@pytest.mark.parametrize(("kwargs", "says"), [
    ({"model": None}, "model must be a string (got NoneType None)"),
    ({"prompt": b"hi"}, "prompt must be a string or None (got bytes b'hi')"),
    ({"layers": "0:x"}, "layers= '0:x' is not a window"),
    ({"layers": (0, True)}, "layers must be 'a:b' or a pair of integers"),
    ({"system": 5}, "system must be a string or None (got int 5)"),
    ({"at": 1.5}, "at must be an integer or a string or None"),
    ({"head": "1"}, "head must be an integer or None"),
    ({"combine": "sum"}, "combine must be one of mean, max"),
    ({"raw": 1}, "raw must be True or False"),
    ({"max_new_tokens": 0}, "max_new_tokens must be a whole number from 1 to 100,000 (got 0)"),
    ({"answer": 5}, "answer must be a string or None (got int 5)"),
    ({"messages": "hi"}, "messages must be a list or None"),
    ({"view": "attention"}, "view must be one of auto, raw, value, occlusion")])
def test_api_arguments_are_checked_before_the_model_runs(
        tiny: Path, monkeypatch: pytest.MonkeyPatch, kwargs: dict[str, Any], says: str) -> None:
    from attncli.models.generate import run

    def never(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the model ran")

    monkeypatch.setattr(run, "generate_model", never)
    given = {"prompt": "the cat", "model": str(tiny), **kwargs}
    with pytest.raises(attncli.AttnCliError, match=says.replace("(", r"\(").replace(")", r"\)")):
        attncli.generate(**given)


def test_api_layers_take_the_clis_grammar_as_heads_does(tiny: Path) -> None:
    pair = attncli.generate("the cat", tiny, max_new_tokens=2, layers=(1, 3), view="raw")
    for text in ("1:3", "1:", "-2:"):  # the model has 3 layers
        window = attncli.generate("the cat", tiny, max_new_tokens=2, layers=text, view="raw")
        assert window.ranked(0) == pair.ranked(0), text


def test_api_takes_a_path_an_answer_tokens_text_and_refuses_ranked_outside(tiny: Path) -> None:
    result = attncli.generate("the cat", tiny, max_new_tokens=3)
    n = len(result.answer_tokens)
    by_text = attncli.generate("the cat", tiny, max_new_tokens=3, at=result.answer_tokens[0])
    assert by_text.view.at == 0 and result.ranked(n - 1)
    with pytest.raises(attncli.AttnCliError, match=f"--at 99 is not an answer token .*{n}"):
        result.ranked(99)


def test_show_template_is_exact_through_a_pipe_and_escaped_on_a_terminal(
        cli, tmp_path: Path, tiny: Path) -> None:  # noqa: ANN001
    import shutil

    from attncli.cli.output import emit_text

    folder = tmp_path / "hostile"
    shutil.copytree(tiny, folder)
    hostile = "\x1b]0;title\x07{{ messages[0].content }}\x00\x9b31m\u202e\n\tend"
    (folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": hostile}))
    run = cli("generate", "hi", "--model", str(folder), "--show-template")
    assert run.code == 0 and run.out == hostile.replace("{{ messages[0].content }}", "hi")

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    for stream, shown in ((Terminal(), "\\x1b]0;title\\x07hi\\x00\\x9b31m\\u202e\n\tend"),
                          (io.StringIO(), "\x1b]0;title\x07hi\x00\x9b31m\u202e\n\tend")):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(sys, "stdout", stream)
            emit_text(hostile.replace("{{ messages[0].content }}", "hi"))
        assert stream.getvalue() == shown


def test_the_view_escapes_the_path_and_the_answer(tiny: Path) -> None:
    from dataclasses import replace

    from rich.console import Console

    from attncli.render.reports.generate import render_generation

    result = attncli.generate("the cat", tiny, max_new_tokens=2)
    record = replace(result.record, model=replace(result.record.model, path="a\x1b]0;x\x07b"),
                     answer=[replace(t, text="\x1b[2J") for t in result.record.answer])
    out = Console(file=io.StringIO(), force_terminal=True, width=100, color_system=None)
    out.print(render_generation(out, record, result.view))
    text = out.file.getvalue()  # type: ignore[attr-defined]
    assert "a\\x1b]0;x\\x07b" in text and "\x1b]0" not in text and "\x1b[2J" not in text


def test_the_answer_line_is_the_answer_s_text_where_its_tokens_split_characters(
        cli, tiny: Path) -> None:  # noqa: ANN001
    # a byte-level vocabulary cuts 🦙 (4 bytes) into tokens none of which is text alone (rt7)
    answer = "🦙 ok 𝔘"
    run = cli("generate", "the cat", "--model", str(tiny), "--answer", answer)
    assert run.code == 0, run.err
    doc = json.loads(cli("generate", "the cat", "--model", str(tiny), "--answer", answer,
                         "--json").out)
    assert len(doc["answer"]) > len(answer)  # the tokens do split its characters
    assert f"answer: {answer}\n" in run.out, run.out


def test_the_stream_writes_each_character_once_whole_and_spaces_as_spaces(
        capsys: pytest.CaptureFixture[str]) -> None:
    # 🦙 is 4 bytes cut across two tokens, each label alone its bytes written out; a token of
    # one space is labelled ␣ in tables; a control character is written out (rt7)
    from attncli.cli.generating import Answering
    from attncli.core.result import TokenInfo

    pieces = [b"Hi", b" ", "🦙".encode()[:2], "🦙".encode()[2:], b"\n\x1b[2J", "é".encode()[:1]]
    with Answering(stream=True).streaming() as write:
        assert write is not None
        for k, piece in enumerate(pieces):
            write(TokenInfo(k, k, f"label{k}", piece.hex()))
    assert capsys.readouterr().err == "Hi 🦙\n\\x1b[2J\\xc3\n"


def test_the_answer_s_text_leaves_out_the_stop_token_that_ended_it(cli) -> None:  # noqa: ANN001
    """SmolLM2 ends its answer with <|im_end|>: a runtime prints none of it, so the answer
    line, the stream and the API's answer leave it out; the steps and the JSON keep it (what
    the model looked at to stop)."""
    from tests.gguf_fixtures import smollm2

    model = str(smollm2())
    ask = ("generate", "What is the capital of France?", "--model", model, "--max-new-tokens",
           "12", "--view", "raw")
    doc = cli(*ask, "--json").json()
    assert doc["config"]["stopped"] == "eos" and doc["answer"][-1]["text"] == "<|im_end|>"
    spelt = "".join(bytes.fromhex(t["bytes"]).decode() for t in doc["answer"][:-1])
    shown = cli(*ask, "--stream")
    [line] = [line for line in shown.out.splitlines() if line.startswith("answer: ")]
    assert line.rstrip() == f"answer: {spelt}"
    assert shown.err.startswith(f"{spelt}\n")
    generation = attncli.generate("What is the capital of France?", model, max_new_tokens=12,
                                  view="raw")
    assert generation.answer == spelt and generation.to_dict()["answer"] == doc["answer"]
