"""A conversation as people already have it: OpenAI/Ollama chat JSON, checked, and the turns
found again in the text the chat template made of it.

Accepted: a list of messages, or an object holding one under "messages" (an Ollama /api/chat
or OpenAI request body). A message is {"role": "system"|"user"|"assistant", "content": TEXT};
content may also be OpenAI's list of {"type": "text", "text": ...} parts; a message with images
(an OpenAI image part, Ollama's "images") is refused. Tool turns (role "tool", or an
assistant's "tool_calls") pass only to a template that reads them.
"""

from __future__ import annotations

import os
from typing import Any

from attncli.core.inputs import _read_path, is_stdin, parse_json, utf8_text
from attncli.errors import AttnCliError

ROLES = ("system", "user", "assistant")
TOOL_ROLE = "tool"


def read_messages(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """--messages FILE ('-': standard input) read and checked."""
    name = "--messages (standard input)" if is_stdin(path) else f"--messages {os.fspath(path)!r}"
    return parse_messages(parse_json(_read_path(path, "--messages"), name), name)


def parse_messages(doc: object, name: str = "--messages") -> list[dict[str, Any]]:
    """The messages of a chat document, each {"role", "content"} (tool_calls kept where
    given), or one line naming what is not that shape."""
    if isinstance(doc, dict) and "messages" in doc:
        doc = doc["messages"]
    if not isinstance(doc, list):
        raise AttnCliError(f"{name} is not a chat: give a JSON list of messages "
                           '[{"role": "user", "content": "..."}], or an object with "messages"')
    if not doc:
        raise AttnCliError(f"{name} holds no messages")
    return [_message(m, i, name) for i, m in enumerate(doc)]


def _message(item: object, index: int, name: str) -> dict[str, Any]:
    where = f"{name} message {index}"
    if not isinstance(item, dict):
        raise AttnCliError(f"{where} is not an object with \"role\" and \"content\"")
    role = item.get("role")
    if role not in (*ROLES, TOOL_ROLE):
        raise AttnCliError(f"{where} has role {role!r}; roles are {', '.join(ROLES)} (and tool "
                           "where the template reads tool turns)")
    images = item.get("images")
    if images is not None and images != []:  # Ollama's: the answer was written seeing them
        count = f"{len(images)} image{'s' * (len(images) != 1)}" if isinstance(
            images, list) else "images"
        raise AttnCliError(f"{where} holds {count}, which attncli does not read (it explains "
                           "text): leave the message's images out, and the turns that rely on "
                           "them")
    message: dict[str, Any] = {"role": role, "content": _content(item.get("content"), where,
                                                                 "tool_calls" in item)}
    if item.get("tool_calls") is not None:
        message["tool_calls"] = item["tool_calls"]
    return message


def _content(value: object, where: str, tool_calls: bool) -> str:
    """A message's text: a string, OpenAI's text parts joined, or "" beside tool_calls."""
    if isinstance(value, str):
        return utf8_text(value, f"{where}'s content")
    if value is None and tool_calls:
        return ""
    if isinstance(value, list) and all(isinstance(p, dict) for p in value):
        texts = [p.get("text") for p in value if p.get("type") == "text"]
        if len(texts) == len(value) and all(isinstance(t, str) for t in texts):
            return utf8_text("".join(str(t) for t in texts), f"{where}'s content")
        raise AttnCliError(f"{where} has a part that is not text (only text parts are read)")
    raise AttnCliError(f"{where}'s content is not text (got {type(value).__name__})")


def check_tools(messages: list[dict[str, Any]], template: str) -> None:
    """Refuse a tool turn the template does not read (it would silently drop or garble it)."""
    for i, message in enumerate(messages):
        if message["role"] == TOOL_ROLE and "tool" not in template.replace("tools", ""):
            raise AttnCliError(f"--messages message {i} is a tool turn, which this model's chat "
                               "template does not render; leave tool turns out")
        if "tool_calls" in message and "tool_calls" not in template:
            raise AttnCliError(f"--messages message {i} holds tool_calls, which this model's "
                               "chat template does not render; leave them out")


def split_last(messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], str]:
    """--explain-last: the conversation before the last turn, and that turn's text (it must be
    the assistant's, with text)."""
    last = messages[-1]
    if last["role"] != "assistant" or "tool_calls" in last:
        raise AttnCliError(f"--explain-last explains the last assistant turn, but the last "
                           f"message is the {last['role']}'s")
    if len(messages) < 2:
        raise AttnCliError("--explain-last needs a turn before the assistant's to answer")
    return messages[:-1], last["content"]


def content_spans(given: str, contents: list[str]) -> list[tuple[int, int]] | None:
    """Each content's byte span in given, found in order (a template that trims a message is
    searched for the trimmed text; an empty message is an empty span); None where one is not
    there (a template that rewrites the text)."""
    data, spans, start = given.encode("utf-8"), [], 0
    for content in contents:
        found = -1
        for text in dict.fromkeys((content, content.strip())):
            found = data.find(text.encode("utf-8"), start) if text else -1
            if found >= 0:
                spans.append((found, found + len(text.encode("utf-8"))))
                start = spans[-1][1]
                break
        if found < 0:
            if content.strip():
                return None
            spans.append((start, start))
    return spans
