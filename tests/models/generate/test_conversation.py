"""Conversations: chat JSON read and checked in one line each; multi-turn rendering equal to
transformers' apply_chat_template for SmolLM2's own template and the fixture families'
templates, with and without a system turn; each turn found among the prompt's tokens."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from attncli.errors import AttnCliError
from attncli.models.generate.chat import ChatSetup
from attncli.models.generate.conversation import (
    check_tools,
    parse_messages,
    read_messages,
    split_last,
)
from attncli.models.generate.template import render_template
from tests.gguf_fixtures import smollm2
from tests.models.generate.test_generate_template import CASES, SPECIAL, _reference

TURNS = [{"role": "user", "content": "Name a fruit."},
         {"role": "assistant", "content": "An apple."},
         {"role": "user", "content": "  And a colour? 猫 {{ x }} "}]
SYSTEM = {"role": "system", "content": "Be brief."}


@pytest.mark.parametrize("name", ["llama3", "qwen2", "gemma", "phi3"])
@pytest.mark.parametrize("system", [False, True])
def test_multi_turn_rendering_equals_apply_chat_template(name: str, system: bool) -> None:
    template = CASES[name][0]
    messages = [SYSTEM, *TURNS] if system else TURNS
    if name == "gemma" and system:
        with pytest.raises(AttnCliError, match="System role not supported"):
            render_template(template, messages, SPECIAL)
        return
    assert render_template(template, messages, SPECIAL) == _reference(template, messages,
                                                                       SPECIAL)


@pytest.mark.parametrize("system", [False, True])
def test_smollm2s_template_renders_a_conversation_as_transformers(system: bool) -> None:
    from attncli.models.generate.chat import chat_setup
    from attncli.models.sources.gguf import open_gguf

    setup: ChatSetup = chat_setup(open_gguf(smollm2()))
    messages = [SYSTEM, *TURNS] if system else TURNS
    assert render_template(str(setup.template), messages, setup.special) == _reference(
        str(setup.template), messages, setup.special)


def test_an_ollama_or_openai_request_body_and_text_parts_are_read(tmp_path: Path) -> None:
    body = {"model": "smollm2", "messages": [
        {"role": "user", "content": [{"type": "text", "text": "Hi "},
                                     {"type": "text", "text": "there"}]},
        {"role": "assistant", "content": "Hello.", "images": None}]}
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(body))
    assert read_messages(str(path)) == [{"role": "user", "content": "Hi there"},
                                        {"role": "assistant", "content": "Hello."}]
    assert split_last(read_messages(str(path))) == ([{"role": "user", "content": "Hi there"}],
                                                   "Hello.")


@pytest.mark.parametrize(("doc", "says"), [
    ({"prompt": "hi"}, "is not a chat"),
    ([], "holds no messages"),
    (["hi"], "message 0 is not an object"),
    ([{"role": "robot", "content": "hi"}], "message 0 has role 'robot'"),
    ([{"role": "user"}], "message 0's content is not text"),
    ([{"role": "user", "content": 3}], "content is not text"),
    ([{"role": "user", "content": [{"type": "image_url", "image_url": "x"}]}],
     "a part that is not text"),
    # Ollama's images beside the text: the model that answered saw them, this one would not
    ([{"role": "user", "content": "What is this?", "images": ["iVBORw0KGgo="]}],
     "message 0 holds 1 image, which attncli does not read"),
    ([{"role": "user", "content": "What is this?", "images": "iVBORw0KGgo="}],
     "message 0 holds images, which attncli does not read"),
])
def test_a_chat_of_the_wrong_shape_is_one_line(doc: object, says: str) -> None:
    with pytest.raises(AttnCliError, match=says):
        parse_messages(doc)


def test_tool_turns_pass_only_to_a_template_that_reads_them() -> None:
    chat = parse_messages([{"role": "user", "content": "Weather?"},
                           {"role": "assistant", "content": None, "tool_calls": [{"id": "1"}]},
                           {"role": "tool", "content": "Sunny"}])
    with pytest.raises(AttnCliError, match="message 1 holds tool_calls"):
        check_tools(chat, CASES["qwen2"][0])
    with pytest.raises(AttnCliError, match="message 1 is a tool turn"):
        check_tools([chat[0], chat[2]], CASES["qwen2"][0])
    check_tools(chat, "{% if m.role == 'tool' %}{{ m.tool_calls }}{% endif %}")


def test_explain_last_needs_an_assistant_turn_last() -> None:
    with pytest.raises(AttnCliError, match="the last message is the user's"):
        split_last(parse_messages(TURNS))
    with pytest.raises(AttnCliError, match="needs a turn before"):
        split_last(parse_messages([{"role": "assistant", "content": "Hi"}]))
