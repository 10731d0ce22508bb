"""What `ablate` and `patch` read, checked before any block runs: the model (a decoder), the
text and its answer as one sequence of ids, the heads named, a position, one-token choices."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from attncli.activity import doing
from attncli.core.request import Request
from attncli.errors import AttnCliError, escaped
from attncli.models.causal.passes import editable
from attncli.models.family import Model, ModelSpec, Tokens
from attncli.models.predict import token_texts
from attncli.models.probe import probe_tokens
from attncli.models.run import open_checked

HEAD = re.compile(r"(-?\d+)\.(\d+)")


@dataclass
class Prepared:
    """A text ready for causal checks: the model, its ids (answer included) and labels."""

    model: Model
    tokens: Tokens  # the text and answer as the model reads them
    answer_start: int | None  # where the answer's ids begin; None without one
    text_of: Any  # id → {"id", "text", ...}: how a vocabulary id is shown

    @property
    def ids(self) -> list[int]:
        return self.tokens.ids

    def labels(self) -> list[str]:
        return [t.text for t in self.tokens.tokens]


def open_decoder(req: Request, command: str) -> Model:
    """--model opened and checked to be a decoder whose heads can be edited."""
    if req.model is None:
        raise AttnCliError(f"attncli {command} needs --model PATH|NAME (a GPT-2 or Llama-family "
                           "checkpoint)")
    model = open_checked(req)
    editable(model)
    return model


def prepare(req: Request, model: Model, answer: str | None, repeat: int | None = None,
            seed: int = 0) -> Prepared:
    """The text (and the answer after it, teacher-forced) tokenized as one sequence; with
    repeat, `heads --probe induction`'s repeat seeded random tokens, twice, instead."""
    if repeat is not None:
        if answer is not None or req.text:
            raise AttnCliError("--repeat runs on its own random tokens: give no TEXT, --file or "
                               "--answer with it")
        tokens, _ = probe_tokens(model, req, "induction", repeat, seed, "--repeat")
        return Prepared(model, tokens, None, token_texts(req.model or "", tokens))
    doing(f"tokenizing {len(req.text or ''):,} characters")
    tokens = model.tokens(req)
    start = None
    if answer is not None:
        if not answer:
            raise AttnCliError("--answer is empty: give the text the model should continue with")
        whole = model.tokens(replace(req, text=(req.text or "") + answer))
        n = len(tokens.ids)
        if whole.ids[:n] != tokens.ids or len(whole.ids) == n:
            raise AttnCliError(f"the answer {escaped(repr(answer))} merges with the text's last "
                               "token when tokenized after it; start it with a space or end the "
                               "text where a token ends")
        tokens, start = whole, n
    if len(tokens.ids) < 2:
        raise AttnCliError(f"causal checks need at least 2 tokens (got {len(tokens.ids)})")
    model.check_tokens(tokens.ids)
    return Prepared(model, tokens, start, token_texts(req.model or "", tokens))


def position(at: int | None, count: int, default: int) -> int:
    """--position as a 0-based position among count tokens (negative counts from the end)."""
    if at is None:
        return default
    if not -count <= at < count:
        raise AttnCliError(f"--position {at} is outside the {count} tokens (0..{count - 1}, or "
                           f"-{count}..-1 from the end)")
    return at % count


def parse_heads(text: str, spec: ModelSpec) -> list[tuple[int, int]] | None:
    """--heads L.H[,L.H…] as (layer, head) pairs, layers counted as `heads` prints them
    (0-based; negative from the end); "all": None."""
    if text.strip().lower() == "all":
        return None
    pairs = []
    for item in text.split(","):
        found = HEAD.fullmatch(item.strip())
        if found is None:
            raise AttnCliError(f"--heads {escaped(repr(item.strip()))} is not LAYER.HEAD (such as "
                               "3.1), a comma-separated list of them, or all")
        layer, head = int(found[1]), int(found[2])
        if not -spec.n_layer <= layer < spec.n_layer:
            raise AttnCliError(f"--heads {item.strip()}: layer {layer} is out of range: the model "
                               f"has {spec.n_layer} layers (0..{spec.n_layer - 1})")
        if head >= spec.num_heads:
            raise AttnCliError(f"--heads {item.strip()}: head {head} is out of range: each layer "
                               f"has {spec.num_heads} heads (0..{spec.num_heads - 1})")
        pair = (layer % spec.n_layer, head)
        if pair not in pairs:
            pairs.append(pair)
    return pairs


def one_token(req: Request, model: Model, text: str, choice: str) -> int:
    """choice's id where it is one token after text (as the model would continue the text)."""
    base = model.tokens(replace(req, text=text)).ids
    whole = model.tokens(replace(req, text=text + choice)).ids
    shown = escaped(repr(choice))
    if whole[:len(base)] != base:
        raise AttnCliError(f"--tokens {shown} merges with the text's last token when tokenized "
                           "after it; give tokens that start where the text ends (' Paris')")
    if len(whole) - len(base) != 1:
        raise AttnCliError(f"--tokens {shown} is {len(whole) - len(base)} tokens after the text "
                           "in this model's vocabulary, not one; --tokens takes two single "
                           "tokens (such as ' Paris' ' Rome')")
    return whole[-1]
