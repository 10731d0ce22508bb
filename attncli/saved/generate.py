"""`attncli generate --json` read back into its GenerationResult, for `attncli show`: the record
walked from its own annotations (its settings from their keys in "config"), then what they
cannot say checked against the model, the prompt and the other parts, named where it fails."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from attncli.errors import AttnCliError
from attncli.records.asking import NUMERICS, Sampling
from attncli.records.generation import (
    OCCLUDE,
    STOPPED,
    VIEWS,
    AnswerStep,
    Candidate,
    GenerationResult,
)
from attncli.records.given import Occluded, Receipt
from attncli.saved.config import RECORDS as CONFIG_RECORDS
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
    ranged,
    span,
    within,
)
from attncli.saved.run import tokens_from
from attncli.saved.walk import Key, Table, read

ID_BOUND = 2**31  # token ids: a vocabulary is far smaller
WEIGHT_SLACK = 1e-3  # a saved weight may pass 1 by rounding, never by more
LOGPROB_SLACK = 1e-6  # nor a log-probability 0 (the receipt allows a runtime's as much)


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


def _kept(value: Any, where: str) -> str:
    """A string kept as written (the text the model was given: --show-template shows it)."""
    if not isinstance(value, str):
        raise bad(where, value, "a string")
    return value


def _probability(value: Any, where: str) -> float:
    """A softmax's probability: 0 to 1 (past 1 by rounding only)."""
    return ranged(value, where, 0, 1 + WEIGHT_SLACK, "a probability (0 to 1)")


def _logprob(value: Any, where: str) -> float:
    """A log-softmax's value: 0 or less (past 0 by rounding only)."""
    return ranged(value, where, -math.inf, LOGPROB_SLACK, "a log-probability (0 or less)")


TOKEN_ID = Key(high=ID_BOUND)
IN_PROMPT = Key(low=-ID_BOUND)  # a prompt index: its bounds, 0 to P - 1, checked below
SKIPPED = ("weights", "layers_kept", "head_kept", "norms", "occlusion")  # worked out below
RECORDS: Table = {**CONFIG_RECORDS, GenerationResult: {
    "model": Key(check=lambda data, at: model_from(data, None)), "prompt": Key(check=tokens_from),
    "given": Key(check=_kept), "template": Key(name="config.template"),
    "sampling": Key(name="config.sampling", check=_sampling),
    "stop_ids": Key(name="config.stop_ids", high=ID_BOUND),
    "stopped": Key(name="config.stopped", choices=STOPPED),
    "given_answer": Key(name="config.given"), "occluded": Key(name="occlusion_spans"),
    "view": Key(name="config.view", choices=VIEWS),
    "auto_looks": Key(name="config.view_chosen.occlusion_looks"),
    "numerics": Key(name="config.numerics", choices=NUMERICS), "sinks": IN_PROMPT,
    **{name: Key(skip=True) for name in SKIPPED}},
    AnswerStep: {"id": TOKEN_ID, "prob": Key(check=_probability), "logprob": Key(check=_logprob),
                 "rank": Key(low=1)},
    Candidate: {"id": TOKEN_ID, "bytes_hex": Key(name="bytes"), "prob": Key(check=_probability)},
    Receipt: {"compared": Key(choices=("tokens", "text"))},
    Occluded: {"by": Key(choices=OCCLUDE), "spans": IN_PROMPT}}


def generation_from_dict(doc: dict[str, Any]) -> GenerationResult:
    """A generation's JSON back into its result; the weights of every step must be present."""
    if doc.get("kind") != "generate":
        raise AttnCliError("saved file: not `attncli generate` JSON (no \"kind\": \"generate\")")
    result = read(GenerationResult, doc, "", RECORDS)
    model, p = result.model, len(result.prompt)
    config = doc["config"]  # an object: the walk read its keys
    kept = obj(need(config, "weights", "config"), "config.weights")
    a, b = span(need(kept, "layers", "config.weights"), "config.weights.layers", model.layers)
    if (head := need(kept, "head", "config.weights")) is not None:
        within(kept, "config.weights", head=(0, model.heads - 1))
    if isinstance(config.get("view_chosen"), dict):  # it names its cost
        need(config["view_chosen"], "occlusion_looks", "config.view_chosen")
    if result.auto_looks is not None and result.auto_looks < 0:
        raise bad("config.view_chosen.occlusion_looks", result.auto_looks, "a cost, 0 or more")
    for k, token in enumerate(result.answer):
        within(token, f"answer[{k}]", index=(p + k, p + k))
    for k, sink in enumerate(result.sinks):
        integer(sink, f"sinks[{k}]", 0, max(p - 1, 0))
    steps = items(result.steps, "steps", len(result.answer))
    for s, step in enumerate(steps):
        within(step, f"steps[{s}]", index=(s, s), position=(p - 1 + s, p - 1 + s))
    for k, turn in enumerate(result.turns):
        within(turn, f"turns[{k}]", start=(0, p), end=(turn.start, p))
    for s, masked in enumerate([] if result.occluded is None else result.occluded.spans):
        for k, i in enumerate(masked):
            integer(i, f"occlusion_spans.spans[{s}][{k}]", 0, p - 1)
    if result.receipt is not None:
        _receipt(result.receipt)
    shape = (b - a, model.heads if head is None else 1)
    check_cells(shape[0] * shape[1] * sum(p + s for s in range(len(steps))),
                "the saved generation")
    return replace(
        result, weights=[_weights(step, s, (*shape, p + s)) for s, step in enumerate(doc["steps"])],
        layers_kept=None if (a, b) == (0, model.layers) else (a, b), head_kept=head,
        given_answer=result.given_answer or config["sampling"]["strategy"] == "given",
        **_views(doc, model.layers, model.heads, p, len(result.answer)))


def _receipt(receipt: Receipt) -> None:
    """The receipt (models/generate/receipt.py): its rows named by flagged and choices_differ
    must be there, and hold the two choices where they differ."""
    for key in ("flagged", "choices_differ"):
        for i, k in enumerate(getattr(receipt, key)):
            integer(k, f"receipt.{key}[{i}]", 0, len(receipt.rows) - 1)
    if any(receipt.rows[k].runtime_choice is None or receipt.rows[k].attncli_choice is None
           for k in receipt.choices_differ):
        raise AttnCliError("saved file: receipt.choices_differ names a row without the two "
                           "choices")


def _views(doc: dict[str, Any], layers: int, heads: int, p: int, a: int) -> dict[str, Any]:
    """The value norms (layers, heads, P + A) and occlusion drops (A, P), where saved."""
    out: dict[str, Any] = {}
    if doc.get("value_norms") is not None:
        norms = np.asarray(cells(doc["value_norms"], "value_norms", layers, heads, p + a))
        if (past := np.abs(norms) > np.finfo(np.float32).max).any():  # held as float32
            raise AttnCliError(f"saved file: value_norms hold {float(norms[past][0])!r}, past "
                               "float32's range")
        out["norms"] = norms.astype(np.float32)
    if doc.get("occlusion") is not None:
        out["occlusion"] = cells(doc["occlusion"], "occlusion", a, p)
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
