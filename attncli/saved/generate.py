"""`attncli generate --json` read back into its GenerationResult: each part read by walking its
record (records/generation.py, records/given.py), then checked against the model, the prompt and
the other parts, named where it fails, for `attncli show`."""

from __future__ import annotations

from typing import Any

import numpy as np

from attncli.errors import AttnCliError
from attncli.records.asking import FLOAT32, NUMERICS, Sampling
from attncli.records.generation import (
    OCCLUDE,
    STOPPED,
    VIEWS,
    AnswerStep,
    Candidate,
    GenerationConfig,
    GenerationResult,
)
from attncli.records.given import Occluded, Receipt, Turn
from attncli.saved.config import model_from
from attncli.saved.parts import (
    bad,
    cells,
    check_cells,
    choice,
    integer,
    items,
    need,
    number,
    obj,
    span,
    within,
)
from attncli.saved.run import tokens_from
from attncli.saved.walk import Key, Table, read, value

ID_BOUND = 2**31  # token ids: a vocabulary is far smaller
WEIGHT_SLACK = 1e-3  # a saved weight may pass 1 by rounding, never by more


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
RECORDS: Table = {GenerationConfig: {"sampling": Key(check=_sampling), "stop_ids": TOKEN_ID,
                                     "stopped": Key(choices=STOPPED), "view": Key(choices=VIEWS),
                                     "numerics": Key(choices=NUMERICS)},
                  AnswerStep: {"id": TOKEN_ID},
                  Candidate: {"id": TOKEN_ID, "bytes_hex": Key(name="bytes")},
                  Receipt: {"compared": Key(choices=("tokens", "text"))}}


def generation_from_dict(doc: dict[str, Any]) -> GenerationResult:
    """A generation's JSON back into its result; the weights of every step must be present."""
    if doc.get("kind") != "generate":
        raise AttnCliError("saved file: not `attncli generate` JSON (no \"kind\": \"generate\")")
    model = model_from(need(doc, "model", "the file"), None)
    config = read(GenerationConfig, need(doc, "config", "the file"), "config", RECORDS)
    prompt = tokens_from(need(doc, "prompt", "the file"), "prompt")
    p = len(prompt)
    answer = tokens_from(need(doc, "answer", "the file"), "answer", first=p)
    a, b = span(config["weights"]["layers"], "config.weights.layers", model.layers)
    if (head := config["weights"]["head"]) is not None:
        within(config["weights"], "config.weights", head=(0, model.heads - 1))
    chosen = config.get("view_chosen")
    looks = None if chosen is None else chosen["occlusion_looks"]
    if looks is not None and looks < 0:
        raise bad("config.view_chosen.occlusion_looks", looks, "a cost, 0 or more")
    given = need(doc, "given", "the file")  # kept as written: shown only by --show-template
    if not isinstance(given, str):
        raise bad("given", given, "a string")
    steps = items(need(doc, "steps", "the file"), "steps", len(answer))
    shape = (b - a, model.heads if head is None else 1)
    check_cells(shape[0] * shape[1] * sum(p + s for s in range(len(steps))),
                "the saved generation")
    records = [read(AnswerStep, step, f"steps[{s}]", RECORDS) for s, step in enumerate(steps)]
    for s, step in enumerate(records):
        within(step, f"steps[{s}]", index=(s, s), position=(p - 1 + s, p - 1 + s))
    return GenerationResult(
        model=model, prompt=prompt, answer=answer, given=given, template=config["template"],
        sampling=config["sampling"], stop_ids=config["stop_ids"], stopped=config["stopped"],
        sinks=[integer(i, f"sinks[{k}]", 0, max(p - 1, 0))
               for k, i in enumerate(items(need(doc, "sinks", "the file"), "sinks"))],
        steps=records, weights=[_weights(step, s, (*shape, p + s)) for s, step in enumerate(steps)],
        layers_kept=None if (a, b) == (0, model.layers) else (a, b), head_kept=head,
        given_answer=config.get("given") or doc["config"]["sampling"]["strategy"] == "given",
        view=config.get("view", "raw"), auto_looks=looks,
        numerics=config.get("numerics", FLOAT32),
        turns=_turns(doc.get("turns", []), p), **_views(doc, model.layers, model.heads, p,
                                                        len(answer)))


def _turns(data: Any, p: int) -> list[Turn]:
    """Each message's tokens [start, end) among the prompt's."""
    turns: list[Turn] = value(list[Turn], data, "turns", Key(), RECORDS)
    for k, turn in enumerate(turns):
        within(turn, f"turns[{k}]", start=(0, p), end=(turn.start, p))
    return turns


def _receipt(data: Any) -> Receipt:
    """The receipt (models/generate/receipt.py): its rows named by flagged and choices_differ
    must be there, and hold the two choices where they differ."""
    receipt = read(Receipt, data, "receipt", RECORDS)
    for key in ("flagged", "choices_differ"):
        for i, k in enumerate(getattr(receipt, key)):
            integer(k, f"receipt.{key}[{i}]", 0, len(receipt.rows) - 1)
    if any(receipt.rows[k].runtime_choice is None or receipt.rows[k].attncli_choice is None
           for k in receipt.choices_differ):
        raise AttnCliError("saved file: receipt.choices_differ names a row without the two "
                           "choices")
    return receipt


def _views(doc: dict[str, Any], layers: int, heads: int, p: int, a: int) -> dict[str, Any]:
    """The value norms (layers, heads, P + A) and occlusion drops (A, P), where saved."""
    out: dict[str, Any] = {}
    if doc.get("value_norms") is not None:
        out["norms"] = np.asarray(cells(doc["value_norms"], "value_norms", layers, heads, p + a),
                                  dtype=np.float32)
    if doc.get("receipt") is not None:
        out["receipt"] = _receipt(doc["receipt"])
    if doc.get("occlusion") is not None:
        out["occlusion"] = cells(doc["occlusion"], "occlusion", a, p)
    if doc.get("occlusion_spans") is not None:
        out["occluded"] = read(Occluded, doc["occlusion_spans"], "occlusion_spans",
                               {Occluded: {"by": Key(choices=OCCLUDE), "spans": Key(high=p - 1)}})
    return out


def _weights(step: dict[str, Any], s: int, shape: tuple[int, int, int]) -> np.ndarray:
    """Step s's weights as float32 (layers, heads, P + s), each from 0 to 1 (a softmax's)."""
    if need(step, "weights", f"steps[{s}]") is None:
        raise bad(f"steps[{s}].weights", None, "the step's weights (layers × heads × keys)")
    weights = np.asarray(cells(step["weights"], f"steps[{s}].weights", *shape), dtype=np.float64)
    outside = (weights < 0) | (weights > 1 + WEIGHT_SLACK)
    if outside.any():
        raise AttnCliError(f"saved file: steps[{s}].weights hold {float(weights[outside][0])!r}, "
                           "not an attention weight (0 to 1)")
    return weights.astype(np.float32)
