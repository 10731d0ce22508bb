"""Chat templates rendered as transformers' apply_chat_template(..., add_generation_prompt=True)
renders them (SmolLM2's own, and Llama 3, Qwen2, Gemma and Phi-3 style templates); the turn's
end token found; hostile templates stopped in one line."""

from __future__ import annotations

import resource
from collections.abc import Iterator

import pytest

from attncli.errors import AttnCliError
from attncli.models.generate.chat import ChatSetup, messages_of, template_text, turn_end_text
from attncli.models.generate.template import render_template
from tests.gguf_fixtures import smollm2
from tests.llama_fixtures import byte_level_tokenizer

LLAMA3 = (
    "{{- bos_token }}{%- if messages[0]['role'] == 'system' %}{%- set system_message = "
    "messages[0]['content']|trim %}{%- set messages = messages[1:] %}{%- else %}{%- set "
    "system_message = \"\" %}{%- endif %}{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\""
    " }}{{- \"Cutting Knowledge Date: December 2023\\n\" }}{{- \"Today Date: \" + "
    "strftime_now('%d %b %Y')[:0] + \"26 Jul 2024\\n\\n\" }}{{- system_message }}{{- "
    "\"<|eot_id|>\" }}{%- for message in messages %}{{- '<|start_header_id|>' + message['role'] "
    "+ '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' }}{%- endfor %}{%- if "
    "add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
    "{%- endif %}")
QWEN2 = (
    "{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + messages[0]['content']"
    " + '<|im_end|>\\n' }}{%- else %}{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba "
    "Cloud. You are a helpful assistant.<|im_end|>\\n' }}{%- endif %}\n{%- for message in messages"
    " %}{%- if (message.role == \"user\") or (message.role == \"system\" and not loop.first) %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}{%- elif"
    " message.role == \"assistant\" %}{{- '<|im_start|>' + message.role + '\\n' + message.content"
    " + '<|im_end|>\\n' }}{%- endif %}{%- endfor %}\n{%- if add_generation_prompt %}\n    {{- "
    "'<|im_start|>assistant\\n' }}\n{%- endif %}\n")
GEMMA = (
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not "
    "supported') }}{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != "
    "(loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate "
    "user/assistant/user/assistant/...') }}{% endif %}{% if (message['role'] == 'assistant') %}"
    "{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}{{ "
    "'<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}{% endfor "
    "%}{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}")
PHI3 = (
    "{% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>\n' + "
    "message['content'] + '<|end|>\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\n' + "
    "message['content'] + '<|end|>\n'}}{% elif message['role'] == 'assistant' %}"
    "{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %}")
# A template exercising the rest of transformers' environment: tojson, namespace, dict, loop
# controls, {% generation %}, trim_blocks/lstrip_blocks.
TOOLS = (
    "{% set ns = namespace(n=0) %}\n"
    "{% for m in messages %}\n"
    "    {% if m.role == 'skip' %}{% continue %}{% endif %}\n"
    "    {% set ns.n = ns.n + 1 %}\n"
    "    {{ m | tojson }}{{ dict(a=1, b='é') | tojson(indent=2) }}\n"
    "    {% generation %}[{{ ns.n }}]{% endgeneration %}\n"
    "{% endfor %}\n"
    "{% if add_generation_prompt %}<go>{% endif %}")
SPECIAL = {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}
CASES = {"llama3": (LLAMA3, "<|eot_id|>"), "qwen2": (QWEN2, "<|im_end|>"),
         "gemma": (GEMMA, "<end_of_turn>"), "phi3": (PHI3, "<|end|>"), "tools": (TOOLS, None)}
PROMPTS = [("Hello, who are you?", None), ("  spaces kept?  \n", "Be brief."),
           ("猫 <|im_end|> {{ 1 + 1 }} {% raw %}", "System {{ text }}")]


def _reference(template: str, messages: list[dict[str, str]], special: dict[str, str]) -> str:
    """transformers' own rendering, through a tokenizer holding the template."""
    from transformers import PreTrainedTokenizerFast

    tokenizer = PreTrainedTokenizerFast(tokenizer_object=byte_level_tokenizer(),
                                        chat_template=template, **special)
    return str(tokenizer.apply_chat_template(messages, tokenize=False,
                                             add_generation_prompt=True))


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize(("prompt", "system"), PROMPTS)
def test_rendering_equals_apply_chat_template(name: str, prompt: str, system: str | None) -> None:
    template = CASES[name][0]
    if name == "gemma" and system is not None:
        with pytest.raises(AttnCliError, match="System role not supported"):
            template_text(ChatSetup(template, "", SPECIAL, frozenset()), prompt, system)
        return
    setup = ChatSetup(template, "", SPECIAL, frozenset())
    assert template_text(setup, prompt, system) == _reference(template,
                                                              messages_of(prompt, system),
                                                              SPECIAL)


def test_smollm2s_own_template_equals_apply_chat_template() -> None:
    from attncli.models.generate.chat import chat_setup
    from attncli.models.sources.gguf import open_gguf

    setup = chat_setup(open_gguf(smollm2()))
    assert setup.origin == "GGUF tokenizer.chat_template" and 2 in setup.stop_ids
    for prompt, system in PROMPTS:
        special = {"bos_token": "<|im_start|>", "eos_token": "<|im_end|>"}
        assert template_text(setup, prompt, system) == _reference(
            str(setup.template), messages_of(prompt, system), setup.special or special)


@pytest.mark.parametrize("name", [n for n, (_, end) in CASES.items() if end is not None])
def test_the_turns_end_is_what_follows_an_assistant_message(name: str) -> None:
    template, end = CASES[name]
    tail = turn_end_text(ChatSetup(template, "", SPECIAL, frozenset()))
    assert tail is not None and tail.startswith(str(end))


@pytest.fixture
def limited_memory() -> Iterator[None]:
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (6 * 2**30, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@pytest.mark.parametrize(("template", "says"), [
    ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
     "stopped"),
    ("{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}",
     "stopped"),
    ("{{ 'x' * 1000000000 }}", "stopped"),
    ("{{ 10 ** 100000000 }}", "stopped"),
    ("{{ ''.__class__.__mro__[1].__subclasses__() }}", "failed"),
    ("{{ messages.__class__ }}{{ cycler.__init__.__globals__ }}", "failed"),
    ("{% set ns = namespace(_x=1) %}", "failed"),
    ("{{ messages.append(1) }}", "failed"),
    ("{{ raise_exception('no thanks') }}", "no thanks"),
    ("{% for %}", "not valid Jinja"),
    ("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "recurses"),
])
def test_a_hostile_template_is_one_line(limited_memory: None, template: str, says: str) -> None:
    with pytest.raises(AttnCliError, match=says) as caught:
        render_template(template, messages_of("hi", None), {})
    assert "\n" not in str(caught.value)
