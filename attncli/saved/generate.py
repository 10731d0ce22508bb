"""`attncli generate --json` read back into its GenerationResult, every part checked and named
where it fails, for `attncli show`."""

from __future__ import annotations

from typing import Any, TypedDict

import numpy as np

from attncli.errors import AttnCliError
from attncli.records.asking import Sampling
from attncli.records.generation import (
    OCCLUDE,
    STOPPED,
    VIEWS,
    AnswerStep,
    Candidate,
    GenerationResult,
)
from attncli.saved.config import model_from
from attncli.saved.parts import (
    bad,
    check_cells,
    choice,
    flag,
    integer,
    items,
    maybe,
    need,
    number,
    obj,
    printable,
    stack,
    string,
)
from attncli.saved.run import tokens_from
from attncli.saved.walk import Key, Table, read

ID_BOUND = 2**31  # token ids: a vocabulary is far smaller


class Kept(TypedDict):
    """The layers [a, b) and the one head (or null) the steps hold."""

    layers: list[int]
    head: int | None


class Config(TypedDict):
    sampling: Sampling
    template: dict[str, Any]  # {"used": bool, "origin", "system"?}, kept as it is
    stop_ids: list[int]
    stopped: str
    weights: Kept


def _template(value: Any, where: str) -> dict[str, Any]:
    """config.template: whether one was used and where it came from (kept whole)."""
    template = obj(value, where)
    flag(need(template, "used", where), f"{where}.used")
    string(need(template, "origin", where), f"{where}.origin")
    return template


def _sampling(value: Any, where: str) -> Sampling:
    """config.sampling, each setting as --json writes it (the knobs only when sampling), as
    the record it was written from (a given answer's: greedy)."""
    sampling = obj(value, where)

    def field(name: str, check: Any, *bounds: Any) -> Any:
        return check(need(sampling, name, where), f"{where}.{name}", *bounds)

    out = {"max_new_tokens": field("max_new_tokens", integer, 1),
           "strategy": field("strategy", choice, ("greedy", "sample", "given"))}
    if out["strategy"] == "given":
        return Sampling()
    if out["strategy"] == "sample":
        out |= {"temperature": field("temperature", number), "top_k": field("top_k", integer),
                "top_p": field("top_p", number), "seed": field("seed", integer)}
    strategy = out.pop("strategy")
    try:
        return Sampling(**out, sample=strategy == "sample")
    except AttnCliError as err:
        raise AttnCliError(f"saved file: {where}: {err}") from None


TOKEN_ID = Key(high=ID_BOUND)
RECORDS: Table = {Config: {"sampling": Key(check=_sampling), "template": Key(check=_template),
                           "stop_ids": TOKEN_ID, "stopped": Key(choices=STOPPED)},
                  AnswerStep: {"id": TOKEN_ID},
                  Candidate: {"id": TOKEN_ID, "bytes_hex": Key(name="bytes")}}


def generation_from_dict(doc: dict[str, Any]) -> GenerationResult:
    """A generation's JSON back into its result; the weights of every step must be present."""
    if doc.get("kind") != "generate":
        raise AttnCliError("saved file: not `attncli generate` JSON (no \"kind\": \"generate\")")
    model = model_from(need(doc, "model", "the file"), None)
    config = read(Config, need(doc, "config", "the file"), "config", RECORDS)
    prompt = tokens_from(need(doc, "prompt", "the file"), None, "prompt")
    p = len(prompt)
    answer = tokens_from(need(doc, "answer", "the file"), None, "answer", first=p)
    a, b = items(config["weights"]["layers"], "config.weights.layers", 2)
    integer(a, "config.weights.layers[0]", 0, model.layers - 1)
    integer(b, "config.weights.layers[1]", a + 1, model.layers)
    if (head := config["weights"]["head"]) is not None:
        integer(head, "config.weights.head", 0, model.heads - 1)
    heads = model.heads if head is None else 1
    steps = items(need(doc, "steps", "the file"), "steps", len(answer))
    check_cells((b - a) * heads * sum(p + s for s in range(len(steps))), "the saved generation")
    records, weights = [], []
    for s, step in enumerate(steps):
        at = f"steps[{s}]"
        records.append(read(AnswerStep, step, at, RECORDS))
        integer(step["index"], f"{at}.index", s, s)
        integer(step["position"], f"{at}.position", p - 1 + s, p - 1 + s)
        if need(step, "weights", at) is None:
            raise bad(f"{at}.weights", None, "the step's weights (layers × heads × keys)")
        weights.append(_weights(stack(step["weights"], f"{at}.weights", b - a, heads, p + s), s))
    return GenerationResult(
        model=model, prompt=prompt, answer=answer,
        given=_raw_text(need(doc, "given", "the file"), "given"), template=config["template"],
        sampling=config["sampling"], stop_ids=config["stop_ids"], stopped=config["stopped"],
        sinks=[integer(i, f"sinks[{k}]", 0, max(p - 1, 0))
               for k, i in enumerate(items(need(doc, "sinks", "the file"), "sinks"))],
        steps=records, weights=weights,
        layers_kept=None if (a, b) == (0, model.layers) else (a, b), head_kept=head,
        given_answer=maybe(doc["config"].get("given"), flag, "config.given") or
        doc["config"]["sampling"]["strategy"] == "given",
        view=maybe(doc["config"].get("view"), choice, "config.view", VIEWS) or "raw",
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


def _receipt(value: Any) -> dict[str, Any]:
    """The receipt (models/generate/receipt.py), each part its renderers read checked."""
    receipt = obj(value, "receipt")
    rows = []
    for k, row in enumerate(items(need(receipt, "rows", "receipt"), "receipt.rows")):
        where = f"receipt.rows[{k}]"
        row = obj(row, where)
        rows.append({**printable(row), "text": string(need(row, "text", where), f"{where}.text"),
                     **{key: number(need(row, key, where), f"{where}.{key}")
                        for key in ("attncli", "runtime", "difference")},
                     **{key: string(row[key], f"{where}.{key}")
                        for key in ("attncli_choice", "runtime_choice") if key in row}})
    largest = obj(need(receipt, "largest", "receipt"), "receipt.largest")
    out = {**printable(receipt), "rows": rows,
            "compared": choice(need(receipt, "compared", "receipt"), "receipt.compared",
                               ("tokens", "text")),
            "flag_above": number(need(receipt, "flag_above", "receipt"), "receipt.flag_above"),
            "largest": {"text": string(need(largest, "text", "receipt.largest"),
                                       "receipt.largest.text"),
                        "difference": number(need(largest, "difference", "receipt.largest"),
                                             "receipt.largest.difference")},
            **{key: [integer(k, f"receipt.{key}[{i}]", 0, len(rows) - 1)
                     for i, k in enumerate(items(need(receipt, key, "receipt"),
                                                 f"receipt.{key}"))]
               for key in ("flagged", "choices_differ")}}
    if any("runtime_choice" not in rows[k] for k in out["choices_differ"]):
        raise AttnCliError("saved file: receipt.choices_differ names a row without the two "
                           "choices")
    return out


def _views(doc: dict[str, Any], layers: int, heads: int, p: int, a: int) -> dict[str, Any]:
    """The value norms (layers, heads, P + A) and occlusion drops (A, P), where saved."""
    out: dict[str, Any] = {}
    if doc.get("value_norms") is not None:
        out["norms"] = np.asarray(stack(doc["value_norms"], "value_norms", layers, heads, p + a),
                                  dtype=np.float32)
    if doc.get("receipt") is not None:
        out["receipt"] = _receipt(doc["receipt"])
    if doc.get("occlusion") is not None:
        rows = items(doc["occlusion"], "occlusion", a)
        out["occlusion"] = [[number(v, f"occlusion[{s}][{j}]")
                             for j, v in enumerate(items(row, f"occlusion[{s}]", p))]
                            for s, row in enumerate(rows)]
    if doc.get("occlusion_spans") is not None:
        spans = obj(doc["occlusion_spans"], "occlusion_spans")
        out["occluded"] = {
            "by": choice(need(spans, "by", "occlusion_spans"), "occlusion_spans.by", OCCLUDE),
            "spans": [[integer(j, f"occlusion_spans.spans[{k}]", 0, p - 1)
                       for j in items(span, f"occlusion_spans.spans[{k}]")]
                      for k, span in enumerate(items(need(spans, "spans", "occlusion_spans"),
                                                     "occlusion_spans.spans"))]}
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
