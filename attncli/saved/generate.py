"""`attncli generate --json` read back into its GenerationResult, for `attncli show`: the record
walked whole from its own annotations (its settings from their keys in "config"; P: the prompt's
tokens, A: the answer's, layers and heads: the model's), then what no Key says checked against
the other parts: the steps' weights, the knobs a sampled answer names, the receipt's rows."""

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
from attncli.records.given import Occluded, Receipt, Turn
from attncli.saved.config import MODEL, model_from
from attncli.saved.config import RECORDS as SHARED
from attncli.saved.parts import bad, check_cells, items, need
from attncli.saved.walk import PROBABILITY, SLACK, Key, Reader, Table

ID_BOUND = 2**31  # token ids: a vocabulary is far smaller
FLOAT32_MAX = float(np.finfo(np.float32).max)  # a value norm past it is infinite as float32
LOGPROB_SLACK = 1e-6  # a log-probability may pass 0 by rounding (the receipt allows as much)


def _kept(value: Any, where: str) -> str:
    """A string kept as written (the text the model was given: --show-template shows it)."""
    if not isinstance(value, str):
        raise bad(where, value, "a string")
    return value


def _float32(value: Any, where: str, reader: Reader, shape: str, low: float, high: float,
             expected: str) -> np.ndarray:
    """Numbers of shape held as float32, each from low to high, else the line that they are not
    what is expected."""
    held = np.asarray(reader.shaped(value, where, shape), dtype=np.float64)
    if (outside := (held < low) | (held > high)).any():
        raise AttnCliError(f"saved file: {where} hold {float(held[outside][0])!r}, {expected}")
    return held.astype(np.float32)


TOKEN_ID = Key(high=ID_BOUND)
SKIPPED = ("weights", "norms")  # read below, by their shapes
RECORDS: Table = {**SHARED, GenerationResult: {
    "model": MODEL, "prompt": Key(counts="index=0"), "answer": Key(counts="index=P"),
    "given": Key(check=_kept), "template": Key(name="config.template"),
    "sampling": Key(name="config.sampling"), "stop_ids": Key(name="config.stop_ids", high=ID_BOUND),
    "stopped": Key(name="config.stopped", choices=STOPPED), "sinks": Key(high="P-1"),
    "steps": Key(length="A", counts="index=0 position=P-1"),
    "given_answer": Key(name="config.given"), "occlusion": Key(shape="A P"),
    "occluded": Key(name="occlusion_spans"), "view": Key(name="config.view", choices=VIEWS),
    "auto_looks": Key(name="config.view_chosen.occlusion_looks", low=0, high=math.inf,
                      means="a cost, 0 or more"),
    "numerics": Key(name="config.numerics", choices=NUMERICS),
    "layers_kept": Key(name="config.weights.layers", span="layers", needed=True),
    "head_kept": Key(name="config.weights.head", high="heads-1", needed=True),
    **{name: Key(skip=True) for name in SKIPPED}},
    # a given answer's was teacher-forced, not chosen: greedy, its settings unused
    Sampling: {"max_new_tokens": Key(low=1, needed=True), "sample": Key(
        name="strategy", choices={"greedy": False, "sample": True, "given": False}, needed=True)},
    AnswerStep: {"id": TOKEN_ID, "prob": PROBABILITY, "rank": Key(low=1), "logprob": Key(
        low=-math.inf, high=LOGPROB_SLACK, means="a log-probability (0 or less)")},
    Candidate: {"id": TOKEN_ID, "bytes_hex": Key(name="bytes"), "prob": PROBABILITY},
    Turn: {"start": Key(high="P"), "end": Key(low="start", high="P")},
    Receipt: {"compared": Key(choices=("tokens", "text")), "flagged": Key(high="rows-1"),
              "choices_differ": Key(high="rows-1")},
    Occluded: {"by": Key(choices=OCCLUDE), "spans": Key(high="P-1")}}
KNOBS = ("temperature", "top_k", "top_p", "seed")  # what a sampled answer's settings name


def generation_from_dict(doc: dict[str, Any]) -> GenerationResult:
    """A generation's JSON back into its result; the weights of every step must be present."""
    if doc.get("kind") != "generate":
        raise AttnCliError("saved file: not `attncli generate` JSON (no \"kind\": \"generate\")")
    model = model_from(need(doc, "model", "the file"))
    if not (p := len(items(need(doc, "prompt", "the file"), "prompt"))):
        raise AttnCliError("saved file: prompt is empty")
    reader = Reader(RECORDS, {"P": p, "A": len(items(need(doc, "answer", "the file"), "answer")),
                              "layers": model.layers, "heads": model.heads})
    result = reader.read(GenerationResult, doc)
    config, (a, b), head = doc["config"], result.layers_kept or (0, model.layers), result.head_kept
    if isinstance(config.get("view_chosen"), dict):  # it names its cost
        need(config["view_chosen"], "occlusion_looks", "config.view_chosen")
    for name in KNOBS if result.sampling.sample else ():
        need(config["sampling"], name, "config.sampling")
    receipt = result.receipt
    if receipt and any(None in (receipt.rows[k].runtime_choice, receipt.rows[k].attncli_choice)
                       for k in receipt.choices_differ):
        raise AttnCliError("saved file: receipt.choices_differ names a row without the two "
                           "choices")
    reader.sizes.update(L=b - a, H=(heads := model.heads if head is None else 1))
    check_cells((b - a) * heads * sum(p + s for s in range(len(result.steps))),
                "the saved generation")
    weights = []
    for s, step in enumerate(doc["steps"]):
        if need(step, "weights", f"steps[{s}]") is None:
            raise bad(f"steps[{s}].weights", None, "the step's weights (layers × heads × keys)")
        weights.append(_float32(step["weights"], f"steps[{s}].weights", reader, f"L H {p + s}",
                                0, 1 + SLACK, "not an attention weight (0 to 1)"))
    norms = doc.get("value_norms")
    return replace(
        result, weights=weights, layers_kept=None if (a, b) == (0, model.layers) else (a, b),
        given_answer=result.given_answer or config["sampling"]["strategy"] == "given",
        norms=None if norms is None else _float32(norms, "value_norms", reader, "layers heads P+A",
                                                  -FLOAT32_MAX, FLOAT32_MAX,
                                                  "past float32's range"))
