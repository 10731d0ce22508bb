"""`attncli generate` through the command line, and `attncli.generate` in Python, on a tiny
Llama checkpoint with a ChatML template in its tokenizer_config.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import attncli
from tests.encoder_fixtures import save_encoder
from tests.llama_fixtures import save_family

TEMPLATE = ("{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + "
            "'<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}"
            "{{ '<|im_start|>assistant\\n' }}{% endif %}")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("cli-generate") / "llama"
    save_family(folder, "llama", seed=21)
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
        assert all(len(row) == p + s and abs(sum(row) - 1) < 1e-5
                   for layer in step["weights"] for row in layer)
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


def test_a_seed_reproduces_the_sampled_json(cli, tiny: Path) -> None:  # noqa: ANN001
    args = ("generate", "the cat", "--model", str(tiny), "--max-new-tokens", "6", "--sample",
            "--temperature", "2", "--seed", "9", "--json")
    first, second = json.loads(cli(*args).out), json.loads(cli(*args).out)
    assert first == second and first["config"]["sampling"]["seed"] == 9


@pytest.mark.parametrize("args", [
    ("--temperature", "0", "--sample"), ("--max-new-tokens", "0"), ("--at", "99"),
    ("--layers", "1:9"), ("--layers", "x"), ("--head", "7"), ("--combine", "median"),
    ("--raw", "--system", "s")])
def test_bad_options_are_one_line_and_exit_2(cli, tiny: Path, args: tuple[str, ...]) -> None:  # noqa: ANN001
    run = cli("generate", "the cat", "--model", str(tiny), "--max-new-tokens", "2", *args)
    assert run.code == 2 and run.out == ""
    assert run.err.startswith("attncli: error: ") and len(run.err.strip().splitlines()) == 1


def test_an_encoder_is_refused(cli, tmp_path: Path) -> None:  # noqa: ANN001
    save_encoder(tmp_path / "bert", "bert", seed=2)
    run = cli("generate", "the cat", "--model", str(tmp_path / "bert"))
    assert run.code == 2 and "decoder" in run.err and len(run.err.strip().splitlines()) == 1
