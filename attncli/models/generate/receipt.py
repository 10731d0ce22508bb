"""A receipt: the per-token log-probabilities a runtime reported for an answer, compared with
attncli's for the same text, so that what is shown can be checked to be what ran.

Read as the runtimes write them: Ollama's /api/generate and /api/chat ("logprobs": [{"token",
"logprob", "top_logprobs"}], one JSON document or its stream, one per line), OpenAI-style
("choices"[0]["logprobs"]["content"], as llama.cpp's server and LM Studio write it; or the
completions API's "tokens" and "token_logprobs", as vLLM writes it; one document or its stream of
server-sent events, "data: {...}") and llama.cpp server's /completion ("completion_probabilities":
[{"token" or "content", "logprob" or "probs"}]).

Where both cut the answer into the same tokens, they are compared token by token; where the
tokenizations differ, by text: over the shortest spans that both cut at, each side's
log-probabilities summed (the log-probability of that text).
"""

from __future__ import annotations

import math
import os
from typing import Any

from attncli.core.inputs import _read_path, is_stdin, parse_json
from attncli.errors import AttnCliError
from attncli.records.given import Largest, Receipt, ReceiptRow, Reported

FLAGGED = 1.0  # nats: a token whose log-probabilities differ by more is flagged


def read_logprobs(path: str | os.PathLike[str]) -> list[Reported]:
    """--logprobs FILE ('-': stdin): the runtime's tokens, checked."""
    name = "--logprobs (standard input)" if is_stdin(path) else f"--logprobs {os.fspath(path)!r}"
    data = _read_path(path, "--logprobs")
    lines = [line.strip() for line in data.splitlines() if line.strip()]
    if _is_events(lines):  # an OpenAI-style server's stream, as `curl -N` saves it
        docs = [parse_json(line[5:], f"{name} line {k + 1}") for k, line in enumerate(lines)
                if line.startswith(b"data:") and line[5:].strip() != b"[DONE]"]
    else:
        docs = ([parse_json(line, f"{name} line {k + 1}") for k, line in enumerate(lines)]
                if len(lines) > 1 and lines[0].startswith(b"{") and _is_stream(lines)
                else [parse_json(data, name)])
    found = [token for doc in docs for token in _entries(doc, name)]
    # A token that spells nothing (the end-of-generation token llama.cpp's server lists, its
    # text "") holds no text of the answer: there is nothing of attncli's to compare it with.
    reported = [r for k, entry in enumerate(found) if (r := _reported(entry, k, name)).data]
    if not reported:
        raise AttnCliError(f"{name} holds no per-token log-probabilities (ask the runtime for "
                           "them: Ollama's \"logprobs\": true, llama.cpp's \"n_probs\")")
    spelt = b"".join(r.data for r in reported)
    try:
        spelt.decode("utf-8")
    except UnicodeDecodeError as err:  # a lone surrogate's escape, or bytes cut from no text
        raise AttnCliError(f"{name}: its tokens do not spell UTF-8 text (byte "
                           f"{spelt[err.start]:#04x} at offset {err.start} of their bytes): "
                           "they are not an answer a runtime wrote") from None
    return reported


def _is_stream(lines: list[bytes]) -> bool:
    """Whether lines are a stream of JSON documents, one per line (Ollama's default)."""
    return all(line.rstrip().endswith(b"}") for line in lines)


def _is_events(lines: list[bytes]) -> bool:
    """Whether lines are server-sent events ("data: {...}", comments, "data: [DONE]")."""
    return any(line.startswith(b"data:") for line in lines) and all(
        line.startswith((b"data:", b":", b"event:", b"id:", b"retry:")) for line in lines)


def _legacy(logprobs: dict[str, Any]) -> list[Any] | None:
    """OpenAI's completions format (vLLM's too): parallel lists "tokens", "token_logprobs" and
    "top_logprobs" ({token: logprob} each), as entries; None where it is not that."""
    tokens, values = logprobs.get("tokens"), logprobs.get("token_logprobs")
    if not isinstance(tokens, list) or not isinstance(values, list) or len(tokens) != len(values):
        return None
    tops = logprobs.get("top_logprobs")
    tops = tops if isinstance(tops, list) and len(tops) == len(tokens) else [None] * len(tokens)
    return [{"token": token, "logprob": value, "top_logprobs": _likeliest(top)}
            for token, value, top in zip(tokens, values, tops, strict=True)]


def _likeliest(top: object) -> list[dict[str, Any]]:
    """{token: logprob}'s likeliest token, as the other formats list it first ([] if none)."""
    numbers = {k: v for k, v in top.items() if isinstance(v, int | float)} if isinstance(
        top, dict) else {}
    return [{"token": max(numbers, key=numbers.__getitem__)}] if numbers else []


def _entries(doc: object, name: str) -> list[Any]:
    if isinstance(doc, dict):
        if isinstance(doc.get("logprobs"), list):  # Ollama
            return list(doc["logprobs"])
        if isinstance(doc.get("completion_probabilities"), list):  # llama.cpp /completion
            return list(doc["completion_probabilities"])
        choices = doc.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            logprobs = choices[0].get("logprobs")
            if isinstance(logprobs, dict) and isinstance(logprobs.get("content"), list):
                return list(logprobs["content"])  # OpenAI-style
            if isinstance(logprobs, dict) and (legacy := _legacy(logprobs)) is not None:
                return legacy
        if "done" in doc or "choices" in doc or "logprobs" in doc:
            return []  # a stream's last line, or a document without them
    raise AttnCliError(f"{name} is not a runtime's log-probabilities (Ollama's \"logprobs\", "
                       "OpenAI's choices[0].logprobs.content or llama.cpp's "
                       "\"completion_probabilities\")")


def _reported(entry: object, k: int, name: str) -> Reported:
    where = f"{name} token {k}"
    if not isinstance(entry, dict):
        raise AttnCliError(f"{where} is not an object")
    text = entry.get("token", entry.get("content"))
    if not isinstance(text, str):
        raise AttnCliError(f"{where} has no token text")
    logprob, choice = entry.get("logprob"), None
    top = entry.get("top_logprobs", entry.get("probs"))
    if isinstance(top, list) and top and isinstance(top[0], dict):
        first = top[0].get("token", top[0].get("tok_str"))
        choice = first if isinstance(first, str) else None
        if logprob is None:  # llama.cpp's older probs: [{"tok_str", "prob"}]
            logprob = next((math.log(p["prob"]) for p in top if isinstance(p, dict)
                            and p.get("tok_str") == text and isinstance(p.get("prob"), int | float)
                            and p["prob"] > 0), None)
    if not isinstance(logprob, int | float) or isinstance(logprob, bool) or not (
            math.isfinite(logprob) and logprob <= 1e-6):
        raise AttnCliError(f"{where} ({text!r}) has no log-probability (a number ≤ 0): got "
                           f"{logprob!r}")
    raw = entry.get("bytes")
    data = (bytes(raw) if isinstance(raw, list) and all(isinstance(b, int) and 0 <= b < 256
                                                        for b in raw)
            else text.encode("utf-8", "surrogatepass"))
    return Reported(text, data, float(logprob), choice)


def answer_of(reported: list[Reported]) -> str:
    """The answer the runtime wrote: its tokens' bytes joined, as text."""
    return b"".join(r.data for r in reported).decode("utf-8", "replace")


def compare(reported: list[Reported], pieces: list[bytes], logprobs: list[float],
            choices: list[str]) -> Receipt:
    """The receipt: attncli's answer tokens (their bytes, logprobs, its own choices) against
    the runtime's, token by token where they cut the text alike, else over common spans."""
    ours, theirs = b"".join(pieces), b"".join(r.data for r in reported)
    if ours != theirs:
        at = next((i for i, (a, b) in enumerate(zip(ours, theirs, strict=False)) if a != b),
                  min(len(ours), len(theirs)))
        shown = [x[max(0, at - 10):at + 20].decode("utf-8", "replace") for x in (theirs, ours)]
        raise AttnCliError(f"--logprobs' tokens spell {shown[0]!r} where the answer has "
                           f"{shown[1]!r} (byte {at}): they are not this answer's")
    same = [r.data for r in reported] == pieces
    rows = []
    for (a0, a1), (b0, b1) in _spans([len(p) for p in pieces], [len(r.data) for r in reported]):
        mine = sum(logprobs[a0:a1])
        runtime = sum(r.logprob for r in reported[b0:b1])
        if not math.isfinite(mine - runtime):  # finite numbers whose sum leaves a float's range
            raise AttnCliError(f"--logprobs' log-probabilities for {_text(pieces[a0:a1])!r} "
                               f"sum to {runtime!r}, past what a float holds: no runtime wrote "
                               "them")
        chosen = same and reported[b0].choice is not None
        rows.append(ReceiptRow(_text(pieces[a0:a1]), mine,
                               runtime, mine - runtime, choices[a0] if chosen else None,
                               reported[b0].choice if chosen else None))
    worst = max(rows, key=lambda r: abs(r.difference))
    return Receipt("tokens" if same else "text", rows, FLAGGED,
                   Largest(worst.text, worst.difference),
                   [k for k, r in enumerate(rows) if abs(r.difference) > FLAGGED],
                   [k for k, r in enumerate(rows) if r.runtime_choice is not None
                    and r.runtime_choice != r.attncli_choice])


def _text(pieces: list[bytes]) -> str:
    return b"".join(pieces).decode("utf-8", "replace")


def _spans(ours: list[int], theirs: list[int]) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """The shortest runs of tokens on each side that end at the same character."""
    out, i, j, a, b = [], 0, 0, 0, 0
    end_a = end_b = 0
    while i < len(ours) or j < len(theirs):
        if end_a <= end_b and i < len(ours):
            end_a += ours[i]
            i += 1
        else:
            end_b += theirs[j]
            j += 1
        if end_a == end_b and (i, j) != (a, b):
            out.append(((a, i), (b, j)))
            a, b = i, j
    return out
