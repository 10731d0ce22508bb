"""The guided tour of the book's chapter-3 example: which runs `attncli demo` shows, in order."""

from __future__ import annotations

import json
from importlib import resources

from attncli.core.inputs import InputVectors
from attncli.core.pipeline import run_naive
from attncli.core.request import Extract, Request
from attncli.core.variants import Variant
from attncli.records.lessons import Step


def journey() -> InputVectors:
    """The six 3-d vectors of "Your journey starts with one step", shipped in the package."""
    doc = json.loads(resources.files("attncli").joinpath("data/journey.json").read_text("utf-8"))
    return InputVectors(labels=doc["tokens"], vectors=doc["vectors"])


def tour() -> list[Step]:
    """The runs of the tour, with the book's settings (d_out = 2, seeds 789 and 123)."""
    x = journey()
    every = Extract(stages=None)
    simple = run_naive(Request(inputs=x, variant=Variant.simple), every)
    journey_query = run_naive(Request(inputs=x, variant=Variant.simple),
                              Extract(stages=None, query="1"))
    qkv = run_naive(Request(inputs=x, variant=Variant.qkv, d_out=2, seed=789), every)
    causal = run_naive(Request(inputs=x, variant=Variant.causal, d_out=2, seed=123), every)
    dropout = run_naive(Request(inputs=x, variant=Variant.causal, d_out=2, seed=123,
                                dropout=0.5), every)
    multihead = run_naive(Request(inputs=x, variant=Variant.multihead, d_out=2, heads=2,
                                  seed=123), every)
    return [
        Step("intro", simple, ("inputs",)),
        Step("query", journey_query, ("scores", "softmax", "context"), rows=(1, 2)),
        Step("all", simple, ("scores", "softmax", "context")),
        Step("qkv", qkv, ("queries", "keys", "values", "scaled", "softmax", "context")),
        Step("causal", causal, ("masked", "softmax", "context")),
        Step("dropout", dropout, ("dropped",)),
        Step("multihead", multihead, ("softmax", "heads_context", "context")),
    ]
