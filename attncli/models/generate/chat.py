"""What a checkpoint says about chatting: its chat template, the special tokens the template
reads, and every id that ends the model's turn.

The template is GGUF metadata's tokenizer.chat_template, or a folder's chat_template.jinja or
tokenizer_config.json's chat_template. Stops are GGUF's eos/eot/eom ids, config.json's and
generation_config.json's eos_token_id (an id or a list), tokenizer_config.json's eos_token,
and the token the template writes right after an assistant message (its end of turn).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attncli.core.inputs import read_json_file
from attncli.errors import AttnCliError
from attncli.machine import read_path_limited
from attncli.models.generate.template import render_template
from attncli.models.sources.base import WeightSource

SPECIAL_NAMES = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token",
                 "mask_token")
GGUF_IDS = {"bos_token": "bos_token_id", "eos_token": "eos_token_id",
            "unk_token": "unknown_token_id", "sep_token": "seperator_token_id",
            "pad_token": "padding_token_id", "cls_token": "cls_token_id",
            "mask_token": "mask_token_id"}
GGUF_STOPS = ("eos_token_id", "eot_token_id", "eom_token_id")
PROBE = "\u2063attncli-probe\u2063"  # an assistant message no template rewrites


@dataclass(frozen=True)
class ChatSetup:
    """A checkpoint's chat template (None: a base model, given the prompt raw), what the
    template reads besides the messages, and the ids that end a turn (the template's own end
    token is added by template_stops)."""

    template: str | None
    origin: str  # where the template came from, for headings: "GGUF tokenizer.chat_template"
    special: dict[str, str]
    stop_ids: frozenset[int]


def chat_setup(source: WeightSource) -> ChatSetup:
    """The source's template, special tokens and stop ids, from its own files (nothing
    downloads)."""
    metadata = getattr(getattr(source, "header", None), "metadata", None)
    if isinstance(metadata, dict):
        return _gguf_setup(metadata)
    folder = source.path if source.path.is_dir() else source.path.parent
    return _folder_setup(folder, source.config())


def _ids(value: Any) -> set[int]:
    """An id, or a list of ids, as config files give eos_token_id; anything else: none."""
    values = value if isinstance(value, list) else [value]
    return {v for v in values if isinstance(v, int) and not isinstance(v, bool) and v >= 0}


def _gguf_setup(metadata: dict[str, Any]) -> ChatSetup:
    tokens = metadata.get("tokenizer.ggml.tokens")
    tokens = tokens if isinstance(tokens, list) else []
    special: dict[str, str] = {}
    for name, key in GGUF_IDS.items():
        ids = _ids(metadata.get(f"tokenizer.ggml.{key}"))
        if ids and min(ids) < len(tokens):
            special[name] = str(tokens[min(ids)])
    stops = set().union(*(_ids(metadata.get(f"tokenizer.ggml.{k}")) for k in GGUF_STOPS))
    template = metadata.get("tokenizer.chat_template")
    return ChatSetup(template if isinstance(template, str) and template.strip() else None,
                     "GGUF tokenizer.chat_template", special, frozenset(stops))


def _json(path: Path) -> dict[str, Any]:
    """A JSON object file's content, read by the one JSON reader (its size and nesting
    bounds); {} when absent; one line naming it when it cannot be read."""
    if not path.is_file():
        return {}
    data = read_json_file(path, str(path))
    return data if isinstance(data, dict) else {}


def _token_text(value: Any) -> str | None:
    """tokenizer_config.json's special token: a string, or an AddedToken dict's content."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def _folder_template(folder: Path, config: dict[str, Any]) -> tuple[str | None, str]:
    jinja = folder / "chat_template.jinja"
    if jinja.is_file():
        return read_path_limited(jinja, str(jinja)).decode("utf-8", "replace"), jinja.name
    template = config.get("chat_template")
    if isinstance(template, list):  # named templates: the "default" one
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("default")
    if isinstance(template, str) and template.strip():
        return template, "tokenizer_config.json chat_template"
    return None, ""


def _folder_setup(folder: Path, config: dict[str, Any]) -> ChatSetup:
    tokenizer_config = _json(folder / "tokenizer_config.json")
    template, origin = _folder_template(folder, tokenizer_config)
    special = {name: text for name in SPECIAL_NAMES
               if (text := _token_text(tokenizer_config.get(name))) is not None}
    generation = _json(folder / "generation_config.json")
    stops = _ids(config.get("eos_token_id")) | _ids(generation.get("eos_token_id"))
    return ChatSetup(template, origin, special, frozenset(stops))


def messages_of(prompt: str, system: str | None) -> list[dict[str, str]]:
    """The conversation a prompt makes: the system message if given, then the user's."""
    head = [] if system is None else [{"role": "system", "content": system}]
    return [*head, {"role": "user", "content": prompt}]


def template_text(setup: ChatSetup, prompt: str, system: str | None) -> str:
    """What the model is given: the template rendered with add_generation_prompt."""
    assert setup.template is not None, "only a checkpoint with a template renders one"
    return render_template(setup.template, messages_of(prompt, system), setup.special)


def turn_end_text(setup: ChatSetup) -> str | None:
    """The text the template writes right after an assistant message (it begins with the end
    of turn token), or None when the template cannot show one."""
    if setup.template is None:
        return None
    chat = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": PROBE}]
    try:
        text = render_template(setup.template, chat, setup.special, add_generation_prompt=False)
    except AttnCliError:
        return None
    at = text.find(PROBE)
    return None if at < 0 else text[at + len(PROBE):]
