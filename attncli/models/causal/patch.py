"""`attncli patch`: activation patching of every layer × head's output between a clean and a
corrupted text of the same length (TransformerLens's patching.get_act_patch_attn_head_out_*),
measured by a logit difference or an answer's log-probability; and attribution patching, the
gradient estimate of the same grid from one backward pass (Nanda 2023), with its agreement."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import torch
from torch import Tensor

from attncli.activity import counted, doing
from attncli.core.request import Request
from attncli.errors import AttnCliError, escaped
from attncli.models.causal.ablate import clean_run
from attncli.models.causal.attribution import Metric, attribution_grid, spearman
from attncli.models.causal.inputs import Prepared, one_token, open_decoder, position, prepare
from attncli.models.causal.metrics import logit_diff
from attncli.models.causal.passes import CleanPass, edited_reads, replaced
from attncli.models.causal.readout import Read, Readout
from attncli.models.family import Model
from attncli.records.causal import METRICS, Attribution, Pair, Patching, PatchOptions

ReadMetric = Callable[[Read], Tensor]  # the same from a Read of those rows


def _metric(req: Request, model: Model, options: PatchOptions, clean: Prepared,
            at: int) -> tuple[Metric, Readout, ReadMetric, list[Pair] | None]:
    """The metric on a run's logits at the rows it reads (the positions whose next token it
    scores: only those are unembedded), the same on a Read of those rows, and logit-diff's
    two tokens."""
    if options.metric == "answer":
        start = clean.answer_start
        assert start is not None
        targets = torch.tensor(clean.ids[start:])  # (A,)

        def answer(logits: Tensor) -> Tensor:  # logits: (A, vocab) at start - 1 .. T - 2
            log_probs = torch.log_softmax(logits.double(), dim=-1)  # (A, vocab)
            return log_probs.gather(-1, targets[:, None]).sum()

        readout = Readout(list(range(start - 1, len(clean.ids) - 1)), targets[:, None])
        return answer, readout, lambda found: found.log_probs().sum(), None
    assert options.tokens is not None
    right, wrong = (one_token(req, model, req.text or "", t) for t in options.tokens)
    return (lambda logits: logit_diff(logits.double(), 0, right, wrong),
            Readout([at], torch.tensor([[right, wrong]])),  # tokens: (1, 2)
            lambda found: found.picked[0, 0] - found.picked[0, 1],
            [clean.text_of(right), clean.text_of(wrong)])


def _checked(options: PatchOptions) -> PatchOptions:
    """options with the metric chosen (--tokens: logit-diff, --answer: answer), checked."""
    if options.metric is None:
        if options.tokens is None and options.answer is None:
            raise AttnCliError("patch measures logit(RIGHT) − logit(WRONG) or an answer's "
                               "log-probability: give --tokens RIGHT WRONG or --answer TEXT")
        options = replace(options, metric="logit-diff" if options.tokens else "answer")
    if options.metric not in METRICS:
        raise AttnCliError(f"--metric {options.metric!r} is not one of {', '.join(METRICS)}")
    if options.metric == "logit-diff" and options.tokens is None:
        raise AttnCliError("--metric logit-diff needs --tokens RIGHT WRONG (two single tokens "
                           "such as ' Paris' ' Rome'), or use --metric answer --answer TEXT")
    if options.metric == "answer" and options.answer is None:
        raise AttnCliError("--metric answer needs --answer TEXT (the continuation scored)")
    if not (options.exact or options.attribution):
        raise AttnCliError("--no-exact leaves nothing to compute without --attribution")
    return options


def _same_length(clean: Prepared, corrupt: Prepared) -> None:
    if len(clean.ids) != len(corrupt.ids):
        def shown(p: Prepared) -> str:
            return escaped(" | ".join(repr(t) for t in p.labels()))

        raise AttnCliError(f"CLEAN and CORRUPT must be the same number of tokens, position for "
                           f"position: CLEAN is {len(clean.ids)} ({shown(clean)}), CORRUPT is "
                           f"{len(corrupt.ids)} ({shown(corrupt)})")


def run_patch(req: Request, corrupt_text: str, options: PatchOptions | None = None) -> Patching:
    """The door of `attncli patch`: REQ's text is CLEAN; every head patched between the runs."""
    options = options or PatchOptions()
    options = _checked(options)
    model = open_decoder(req, "patch")
    clean = prepare(req, model, options.answer)
    corrupt = prepare(replace(req, text=corrupt_text), model, options.answer)
    _same_length(clean, corrupt)
    n = len(clean.ids)
    end = n - 1 if clean.answer_start is None else clean.answer_start - 1
    at = position(options.at, n, end)
    metric, readout, read_metric, tokens = _metric(req, model, options, clean, at)
    rows = readout.rows
    doing("the clean and corrupted passes")
    runs = {"clean": clean_run(req, clean, clean.ids),
            "corrupt": clean_run(req, corrupt, corrupt.ids)}
    base = {name: float(metric(run.logits[rows])) for name, run in runs.items()}
    target, source = ((runs["corrupt"], runs["clean"]) if options.denoise
                      else (runs["clean"], runs["corrupt"]))
    scale = base["clean"] - base["corrupt"]
    if scale == 0:  # the grid would divide by zero: nothing differs for a head to restore
        raise AttnCliError(f"CLEAN and CORRUPT give the same metric ({base['clean']:.6g} at "
                           f"position {at}): the grid, (patched − corrupted) ÷ (clean − "
                           "corrupted), has no difference to divide by; give two texts that "
                           "the metric tells apart")
    shift = base["corrupt" if options.denoise else "clean"]

    def normalised(value: float) -> float:  # 1: the clean metric restored (denoise)
        return (value - shift) / scale

    raw, positions = (_exact(model, target, source, readout, read_metric, options.per_position,
                             float(metric(target.logits[rows])))
                      if options.exact else ([], None))
    attribution: Attribution | None = None
    if options.attribution:
        estimate = attribution_grid(model, target, source, metric, rows)  # (layers, heads)
        attribution = {"grid": [[normalised(float(v) + shift) for v in row]
                                for row in estimate.tolist()]}
        if raw:
            exact = torch.tensor(raw) - shift  # (layers, heads)
            attribution["spearman"] = spearman(estimate.flatten(), exact.flatten())
    return Patching(model.info().to_dict(), clean.labels(), corrupt.labels(), options.metric or "",
                    "denoise" if options.denoise else "noise", tokens, at, base,
                    [[normalised(v) for v in row] for row in raw], raw,
                    None if positions is None
                    else [[[normalised(v) for v in cells] for cells in row] for row in positions],
                    attribution)


@torch.no_grad()
def _exact(model: Model, target: CleanPass, source: CleanPass, readout: Readout,
           metric: ReadMetric, per_position: bool, unchanged: float
           ) -> tuple[list[list[float]], list[list[list[float]]] | None]:
    """The metric with each head's output (and, per_position, at each position alone) taken
    from source into target: [layer][head] and [layer][head][position]. A patch at position p
    leaves the positions before p as they were, so it runs from p (or the first row the
    metric reads) on, target's earlier streams attended to; one after every row the metric
    reads changes nothing: unchanged, the target's own metric."""
    spec, n = model.spec, len(target.ids)
    heads = [(layer, head) for layer in range(spec.n_layer) for head in range(spec.num_heads)]
    places: list[tuple[int, int, int | None]] = [(layer, head, None) for layer, head in heads]
    groups = [(0, places, [{layer: replaced(head, source.z[layer][head])}
                           for layer, head in heads])]
    cells = [[[unchanged] * n for _ in range(spec.num_heads)] for _ in range(spec.n_layer)]
    for at in range(max(readout.rows) + 1 if per_position else 0):  # later: unchanged
        start = min(at, *readout.rows)  # the run's first position: the patched one or a row
        one = torch.arange(n - start) == at - start  # (T - start,) the patched position
        groups.append((start, [(layer, head, at) for layer, head in heads],
                       [{layer: replaced(head, source.z[layer][head][start:], one)}
                        for layer, head in heads]))
    grid = [[0.0] * spec.num_heads for _ in range(spec.n_layer)]
    total, done = sum(len(group[1]) for group in groups), 0
    for start, where, variants in groups:
        for (layer, head, p), found in zip(
                where, edited_reads(model, target, variants, readout, start), strict=True):
            if p is None:
                grid[layer][head] = float(metric(found))
            else:
                cells[layer][head][p] = float(metric(found))
            done += 1
            counted("patching heads", done, total)
    return grid, cells if per_position else None
