"""`attncli generate --json` read back into its GenerationResult, every part checked and named
where it fails, for `attncli show`."""

from __future__ import annotations

from typing import Any

import numpy as np

from attncli.core.checks.config import model_from
from attncli.core.checks.parts import (
    bad,
    check_cells,
    choice,
    flag,
    hex_bytes,
    integer,
    items,
    maybe,
    need,
    number,
    obj,
    stack,
    string,
)
from attncli.core.checks.run import tokens_from
from attncli.core.result import TokenInfo
from attncli.errors import AttnCliError
from attncli.models.generate.result import STOPPED, VIEWS, GenerationResult

ID_BOUND = 2**31  # token ids: a vocabulary is far smaller


def generation_from_dict(doc: dict[str, Any]) -> GenerationResult:
    """A generation's JSON back into its result; the weights of every step must be present."""
    if doc.get("kind") != "generate":
        raise AttnCliError("saved file: not `attncli generate` JSON (no \"kind\": \"generate\")")
    model = model_from(need(doc, "model", "the file"), None)
    config = obj(need(doc, "config", "the file"), "config")
    prompt = tokens_from(need(doc, "prompt", "the file"), None, "prompt")
    p = len(prompt)
    answer = _answer(need(doc, "answer", "the file"), p)
    a, b, head = _kept(need(config, "weights", "config"), model.layers, model.heads)
    heads = model.heads if head is None else 1
    steps = items(need(doc, "steps", "the file"), "steps", len(answer))
    check_cells((b - a) * heads * sum(p + s for s in range(len(steps))), "the saved generation")
    records, weights = [], []
    for s, step in enumerate(steps):
        record, held = _step(obj(step, f"steps[{s}]"), s, p)
        records.append(record)
        weights.append(_weights(stack(held, f"steps[{s}].weights", b - a, heads, p + s), s))
    template = obj(need(config, "template", "config"), "config.template")
    flag(need(template, "used", "config.template"), "config.template.used")
    return GenerationResult(
        model=model, prompt=prompt, answer=answer,
        given=_raw_text(need(doc, "given", "the file"), "given"), template=template,
        sampling=obj(need(config, "sampling", "config"), "config.sampling"),
        stop_ids=[integer(i, f"config.stop_ids[{k}]", 0, ID_BOUND)
                  for k, i in enumerate(items(need(config, "stop_ids", "config"),
                                              "config.stop_ids"))],
        stopped=choice(need(config, "stopped", "config"), "config.stopped", STOPPED),
        sinks=[integer(i, f"sinks[{k}]", 0, max(p - 1, 0))
               for k, i in enumerate(items(need(doc, "sinks", "the file"), "sinks"))],
        steps=records, weights=weights,
        layers_kept=None if (a, b) == (0, model.layers) else (a, b), head_kept=head,
        given_answer=maybe(config.get("given"), flag, "config.given") or False,
        view=maybe(config.get("view"), choice, "config.view", VIEWS) or "raw",
        turns=_turns(doc.get("turns", []), p), **_views(doc, model.layers, model.heads, p,
                                                        len(answer)))


def _turns(data: Any, p: int) -> list[dict[str, Any]]:
    """Each message's tokens [start, end) among the prompt's."""
    out = []
    for k, turn in enumerate(items(data, "turns")):
        where = f"turns[{k}]"
        turn = obj(turn, where)
        start = integer(need(turn, "start", where), f"{where}.start", 0, p)
        out.append({"role": string(need(turn, "role", where), f"{where}.role"), "start": start,
                    "end": integer(need(turn, "end", where), f"{where}.end", start, p)})
    return out


def _views(doc: dict[str, Any], layers: int, heads: int, p: int, a: int) -> dict[str, Any]:
    """The value norms (layers, heads, P + A) and occlusion drops (A, P), where saved."""
    out: dict[str, Any] = {}
    if doc.get("value_norms") is not None:
        out["norms"] = np.asarray(stack(doc["value_norms"], "value_norms", layers, heads, p + a),
                                  dtype=np.float32)
    if doc.get("receipt") is not None:
        out["receipt"] = obj(doc["receipt"], "receipt")
    if doc.get("occlusion") is not None:
        rows = items(doc["occlusion"], "occlusion", a)
        out["occlusion"] = [[number(v, f"occlusion[{s}][{j}]")
                             for j, v in enumerate(items(row, f"occlusion[{s}]", p))]
                            for s, row in enumerate(rows)]
    return out


def _weights(held: Any, s: int) -> np.ndarray:
    """Step s's weights as float32 (layers, heads, P + s), each from 0 to 1 (a softmax's)."""
    weights = np.asarray(held, dtype=np.float64)
    outside = (weights < 0) | (weights > 1 + WEIGHT_SLACK)
    if outside.any():
        value = float(weights[outside][0])
        raise AttnCliError(f"saved file: steps[{s}].weights hold {value!r}, not an attention "
                           "weight (0 to 1)")
    return weights.astype(np.float32)


WEIGHT_SLACK = 1e-3  # a saved weight may pass 1 by rounding, never by more


def _raw_text(value: Any, where: str) -> str:
    """A string kept as written (the template's text, shown only by --show-template)."""
    if not isinstance(value, str):
        raise bad(where, value, "a string")
    return value


def _answer(data: Any, p: int) -> list[TokenInfo]:
    """The answer's tokens, whose indices continue the prompt's."""
    out = []
    for s, t in enumerate(items(data, "answer")):
        at = f"answer[{s}]"
        t = obj(t, at)
        integer(need(t, "index", at), f"{at}.index", p + s, p + s)
        out.append(TokenInfo(p + s, maybe(t.get("id"), integer, f"{at}.id"),
                             string(need(t, "text", at), f"{at}.text"),
                             maybe(t.get("bytes"), hex_bytes, f"{at}.bytes")))
    return out


def _kept(data: Any, layers: int, heads: int) -> tuple[int, int, int | None]:
    """config.weights: the layers [a, b) and the one head (or null) the steps hold."""
    kept = obj(data, "config.weights")
    span = items(need(kept, "layers", "config.weights"), "config.weights.layers", 2)
    a = integer(span[0], "config.weights.layers[0]", 0, layers - 1)
    b = integer(span[1], "config.weights.layers[1]", a + 1, layers)
    head = maybe(kept.get("head"), integer, "config.weights.head", 0, heads - 1)
    return a, b, head


def _step(step: dict[str, Any], s: int, p: int) -> tuple[dict[str, Any], Any]:
    """Step s's record (its weights apart) and its weights, as saved."""
    where = f"steps[{s}]"
    integer(need(step, "index", where), f"{where}.index", s, s)
    integer(need(step, "position", where), f"{where}.position", p - 1 + s, p - 1 + s)
    integer(need(step, "id", where), f"{where}.id", 0, ID_BOUND)
    number(need(step, "prob", where), f"{where}.prob")
    for k, top in enumerate(items(need(step, "top", where), f"{where}.top")):
        top = obj(top, f"{where}.top[{k}]")
        integer(need(top, "id", f"{where}.top[{k}]"), f"{where}.top[{k}].id", 0, ID_BOUND)
        string(need(top, "text", f"{where}.top[{k}]"), f"{where}.top[{k}].text")
        number(need(top, "prob", f"{where}.top[{k}]"), f"{where}.top[{k}].prob")
    held = need(step, "weights", where)
    if held is None:
        raise bad(f"{where}.weights", held, "the step's weights (layers × heads × keys)")
    return {key: value for key, value in step.items() if key != "weights"}, held

