"""`attncli ablate`: a text run with heads' outputs replaced (zero, mean over the text's
positions, or resampled from the text shuffled), and what that changes: each token's loss, the
next-token distribution at a position (top tokens, KL), an answer's log-probability. With every
head (one at a time), a ranking by effect beside each head's pattern scores."""

from __future__ import annotations

import random
from typing import Any, cast

import torch
from torch import Tensor

from attncli.activity import counted, doing
from attncli.core.request import Request
from attncli.errors import AttnCliError
from attncli.models.causal.inputs import Prepared, open_decoder, parse_heads, position, prepare
from attncli.models.causal.metrics import answer_log_prob, kl_divergence, token_losses
from attncli.models.causal.passes import (
    CleanPass,
    Edit,
    clean_pass,
    each_head,
    edited_logits,
    replaced,
)
from attncli.models.causal.readout import Readout
from attncli.models.hidden.passes import cached_pass
from attncli.models.scores import SCORES
from attncli.records.causal import HOWS, AblateOptions, Ablation, Answer, Loss, Ranked, Shown, Top


def ablation_values(how: str, clean: CleanPass, resample: CleanPass | None, layer: int,
                    head: int) -> Tensor:
    """What replaces head's output (T, hd): zeros, its mean over the positions, or its output
    on the shuffled text."""
    z = clean.z[layer][head]  # (T, hd)
    if how == "zero":
        return torch.zeros_like(z)
    if how == "mean":
        return z.mean(0).expand_as(z)  # (T, hd) the same vector at every position
    assert resample is not None
    return resample.z[layer][head]  # (T, hd)


def shuffled(ids: list[int], seed: int) -> list[int]:
    """ids with every token after the first in a seeded random order (the first, often BOS,
    kept where it is)."""
    rest = ids[1:]
    random.Random(seed).shuffle(rest)
    return ids[:1] + rest


def clean_run(req: Request, prepared: Prepared, ids: list[int]) -> CleanPass:
    """ids' clean pass, through the hidden-state cache."""
    model = prepared.model
    return clean_pass(model, ids, cached_pass(req, model, ids).trace(model.spec.n_layer - 1))


def _top(logits: Tensor, count: int, text_of: Any) -> list[Shown]:
    probs = torch.softmax(logits.double(), dim=-1)  # (vocab,)
    top = probs.topk(min(count, probs.shape[0]))
    return [cast(Shown, {**text_of(i), "prob": p})  # text_of: id, text (and bytes)
            for i, p in zip(top.indices.tolist(), top.values.tolist(), strict=True)]


@torch.no_grad()
def run_ablate(req: Request, options: AblateOptions | None = None) -> Ablation:
    """The door of `attncli ablate`: inputs checked, the clean pass, then the edited ones."""
    options = options or AblateOptions()
    if options.how not in HOWS:
        raise AttnCliError(f"--how {options.how!r} is not one of {', '.join(HOWS)}")
    model = open_decoder(req, "ablate")
    heads = parse_heads(options.heads, model.spec)
    prepared = prepare(req, model, options.answer, options.repeat, options.seed)
    ids, n = prepared.ids, len(prepared.ids)
    scored = 1 if options.repeat is None else n - options.repeat  # the loss the effect reads
    end = n - 1 if prepared.answer_start is None else prepared.answer_start - 1
    at = position(options.at, n, end)
    doing("the clean pass")
    clean = clean_run(req, prepared, ids)
    resample = clean_run(req, prepared, shuffled(ids, options.seed)) \
        if options.how == "resample" else None
    before = token_losses(clean.logits, ids)  # (T-1,)
    start = prepared.answer_start
    answer: Answer | None = None if start is None else {
        "text": options.answer or "", "start": start,
        "before": answer_log_prob(clean.logits, ids, start), "after": None}
    top: Top = {"before": _top(clean.logits[at], options.top, prepared.text_of), "after": []}
    labels = prepared.labels()
    losses: list[Loss] = [{"index": i + 1, "token": labels[i + 1], "before": float(b),
                           "after": None} for i, b in enumerate(before.tolist())]
    info = model.info().to_dict()
    if heads is None:
        ranking = _ranking(prepared, clean, resample, options.how, at, before[scored - 1:],
                           start, scored)
        return Ablation(info, labels, ids, options.how, [], at, losses, top, None, answer,
                        ranking, scored)
    edits: dict[int, dict[int, Tensor]] = {}
    for layer, head in heads:
        edits.setdefault(layer, {})[head] = ablation_values(options.how, clean, resample,
                                                            layer, head)
    doing(f"the pass with {len(heads)} head{'s' if len(heads) > 1 else ''} ablated")
    logits = edited_logits(model, clean, {layer: _together(values)
                                          for layer, values in edits.items()})
    after = token_losses(logits, ids)  # (T-1,)
    for row, value in zip(losses, after.tolist(), strict=True):
        row["after"] = value
    top["after"] = _top(logits[at], options.top, prepared.text_of)
    if answer is not None and start is not None:
        answer["after"] = answer_log_prob(logits, ids, start)
    return Ablation(info, labels, ids, options.how, heads, at, losses, top,
                    kl_divergence(clean.logits[at], logits[at]), answer, scored=scored)


def _together(values: dict[int, Tensor]) -> Edit:
    """One layer's edit replacing several heads' outputs."""
    edits = [replaced(head, v) for head, v in values.items()]

    def edit(z: Tensor) -> Tensor:
        for one in edits:
            z = one(z)
        return z

    return edit


def _ranking(prepared: Prepared, clean: CleanPass, resample: CleanPass | None, how: str,
             at: int, before: Tensor, start: int | None, scored: int) -> list[Ranked]:
    """Every head ablated alone: its effect on the loss (of the tokens from scored on), at
    position at and on the answer, beside its pattern scores; largest effect first (the
    answer's drop where there is one, else the rise of the mean loss)."""
    model, ids = prepared.model, prepared.ids
    spec = model.spec
    scores, total = clean.scores, spec.n_layer * spec.num_heads
    base_answer = None if start is None else answer_log_prob(clean.logits, ids, start)
    # Only the rows the effects read are unembedded: the losses from scored on, at, the answer;
    # each row read for its next token's log-probability, at for its distribution too.
    kept = sorted({*range(scored - 1, len(ids) - 1), at,
                   *(range(start - 1, len(ids) - 1) if start is not None else ())})
    row_of = {p: i for i, p in enumerate(kept)}
    losses, answer_rows = [row_of[p] for p in range(scored - 1, len(ids) - 1)], \
        [] if start is None else [row_of[p] for p in range(start - 1, len(ids) - 1)]
    reference = torch.log_softmax(clean.logits[at].double(), dim=-1)  # (vocab,)
    readout = Readout(kept, torch.tensor([[ids[p + 1] if p + 1 < len(ids) else 0]
                                          for p in kept]), reference.exp())  # tokens: (P, 1)
    rows: list[Ranked] = []
    for layer, head, found in each_head(
            model, clean, lambda layer, head: ablation_values(how, clean, resample, layer, head),
            readout):
        log_probs = found.log_probs()  # (P,) of each row's next token
        loss_change = float(-log_probs[losses].mean() - before.mean())
        answer_change = None if start is None or base_answer is None else \
            float(log_probs[answer_rows].sum()) - base_answer
        score = {name: float(scores[layer][name][head]) for name in SCORES}
        row: Ranked = {
            "layer": layer, "head": head, "loss_change": loss_change,
            "kl": found.kl_from(row_of[at], reference), "previous_token": score["previous_token"],
            "duplicate_token": score["duplicate_token"], "induction": score["induction"],
            "effect": loss_change if answer_change is None else -answer_change}
        if answer_change is not None:
            row["answer_change"] = answer_change
        rows.append(row)
        counted("ablating heads", len(rows), total)
    return sorted(rows, key=lambda r: -r["effect"])
