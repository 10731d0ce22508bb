"""What a checkpoint predicts next at each position: the last block's output through the final
norm and the unembedding (tied or not), top-K per position; and the logit lens of one layer,
the residual stream leaving that block read the same way.

Logits are T × vocab float32 (SmolLM2: 49,152 a row), so they are made a chunk of rows at a
time and only each row's top K is kept. Tensors become plain data here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, cast

import torch
from torch import Tensor

from attncli.core.pieces import Guess, Prediction
from attncli.core.request import Extract, Request
from attncli.core.result import Result
from attncli.core.sizes import FLOAT_BYTES, NAIVE_STAGES
from attncli.errors import AttnCliError
from attncli.machine import check_fits
from attncli.models.family import Model, Tokens
from attncli.models.hidden.passes import cached_pass
from attncli.models.sources.base import WeightSource

CHUNK_ROWS = 256  # positions unembedded at once: (256, vocab) logits, 50 MB at SmolLM2's vocab
# One candidate as Python data (a dict, its id, text, bytes, two floats) and its JSON text.
RECORD_BYTES = 512
LOGIT_COPIES = 3  # logits, their log-softmax and the top-k's temporaries, per chunk


@dataclass(frozen=True)
class PredictPlan:
    """Which positions get predictions, checked before the run: K, the window, the lens."""

    k: int
    start: int  # the first position predicted
    stop: int  # one past the last; the forward pass reads tokens 0..stop-1 (causal)
    lens: int | None  # explain: the shown layer, whose stream is also read out (logit lens)


def vocab_size(model: Model) -> int:
    """The rows of the unembedding, learnt from one zero row (a headless checkpoint: one line)."""
    return int(model.logits(torch.zeros(1, model.spec.d_model)).shape[-1])  # (1, vocab)


def plan_predictions(req: Request, extract: Extract, model: Model, tokens: Tokens,
                     layer: int, tiled: bool) -> PredictPlan | None:
    """--predict K checked against the model and sized, before any layer runs; None without it.

    The naive path predicts at every position. The tiled path predicts only at the --rows
    window's positions, from a forward pass over the tokens up to the window's end.
    """
    if req.predict is None:
        return None
    k, vocab, n = req.predict, vocab_size(model), len(tokens.ids)
    if k > vocab:
        raise AttnCliError(f"--predict {k:,} is more than the model's vocabulary of {vocab:,} "
                           "tokens")
    start, stop = 0, n
    if tiled:
        if extract.rows is None:
            raise AttnCliError(f"--predict on a long input ({n:,} tokens, the tiled path) needs "
                               "--rows A:B: predictions are made for the window's positions")
        start, stop = extract.rows.resolve(n)
    spec, rows = model.spec, stop - start
    trace = trace_bytes(spec.num_heads, stop)
    logits = LOGIT_COPIES * FLOAT_BYTES * min(rows, CHUNK_ROWS) * vocab
    records = rows * k * RECORD_BYTES * (2 if extract.lens else 1)
    check_fits(trace + logits + records,
               f"--predict {k} needs a forward pass through all {spec.n_layer} layers over "
               f"{stop:,} tokens and {rows:,} × {k:,} predictions",
               "use a smaller --predict or fewer tokens (with --rows, an earlier window)")
    return PredictPlan(k, start, stop, layer if extract.lens else None)


def trace_bytes(num_heads: int, num_tokens: int) -> int:
    """What a model.trace pass over num_tokens holds at its peak: two blocks' (heads, T, T)
    stages at once (the one yielded, the next)."""
    return 2 * NAIVE_STAGES * FLOAT_BYTES * num_heads * num_tokens * num_tokens


def check_logits(logits: Tensor) -> None:
    """Refuse logits (any shape) that are not all finite, in one line: a NaN as not a number
    (a NaN in the checkpoint, or an overflow on the way), an infinity as float32's overflow."""
    if torch.isfinite(logits).all():
        return
    if torch.isnan(logits).any():
        raise AttnCliError("the logits are not numbers (NaN): the checkpoint holds a NaN, or "
                           "numbers too large for float32")
    raise AttnCliError("the logits overflowed float32: the checkpoint's numbers are too large")


def _top(model: Model, hidden: Tensor, k: int) -> tuple[Tensor, Tensor, Tensor]:
    """The k largest logits of each row of hidden (R, d_model): ids, logits and softmax
    probabilities over the whole vocabulary, each (R, k), CHUNK_ROWS rows unembedded at a time."""
    ids, logits, probs = [], [], []
    for begin in range(0, hidden.shape[0], CHUNK_ROWS):
        chunk = model.logits(hidden[begin:begin + CHUNK_ROWS]).float()  # (c, vocab)
        check_logits(chunk)
        log_probs = torch.log_softmax(chunk, dim=-1)  # (c, vocab)
        top = chunk.topk(k, dim=-1)  # values, indices: (c, k), largest first
        ids.append(top.indices)
        logits.append(top.values)
        probs.append(log_probs.gather(-1, top.indices).exp())  # (c, k)
    return torch.cat(ids), torch.cat(logits), torch.cat(probs)  # each (R, k)


@torch.no_grad()
def predictions(model: Model, tokens: Tokens, plan: PredictPlan,
                text_of: Callable[[int], dict[str, Any]],
                req: Request | None = None) -> list[Prediction]:
    """Per position of the plan: the input token and its top-K next tokens (and the lens's);
    with req, the pass goes through the hidden-state cache."""
    a, b, last = plan.start, plan.stop, model.spec.n_layer - 1
    final = lens = None
    blocks = (model.trace(tokens.ids[:b], last_layer=last) if req is None
              else cached_pass(req, model, tokens.ids[:b]).trace(last))
    for block in blocks:
        if block.layer == plan.lens:
            lens = block.output[a:b].clone()  # (R, d_model) leaving the shown block
        if block.layer == last:
            final = block.output[a:b].clone()  # (R, d_model) leaving the last block
        del block  # its (heads, T, T) weights go before the next block's are made
    assert final is not None
    picks = [_top(model, final, plan.k)] + ([] if lens is None else [_top(model, lens, plan.k)])
    texts: dict[int, dict[str, Any]] = {}

    def guesses(pick: tuple[Tensor, Tensor, Tensor], row: int) -> list[Guess]:
        ids, logits, probs = (part[row].tolist() for part in pick)
        return [cast(Guess, {**texts.setdefault(i, text_of(i)), "prob": p, "logit": lg})
                for i, lg, p in zip(ids, logits, probs, strict=True)]

    out: list[Prediction] = []
    for row in range(b - a):
        entry: Prediction = {"index": a + row, "token": tokens.tokens[a + row].text,
                             "top": guesses(picks[0], row)}
        if lens is not None:
            entry["lens"] = guesses(picks[1], row)
        out.append(entry)
    return out


def with_predictions(result: Result, req: Request, model: Model, tokens: Tokens,
                     plan: PredictPlan | None) -> Result:
    """result with the plan's predictions; unchanged without --predict."""
    if plan is None:
        return result
    texts = token_texts(req.model or "", tokens)
    return replace(result, predictions=predictions(model, tokens, plan, texts, req))


def token_texts(model_path: str, tokens: Tokens,
                source: WeightSource | None = None) -> Callable[[int], dict[str, Any]]:
    """How a vocabulary id is shown: {"id", "text", "bytes"?}, by the tokenizer that made the
    input tokens (tiktoken's encoding, or the checkpoint's own: source's, where it is open
    already, whose tokenizer is then not built again)."""
    from attncli.core.tokens import labels_for

    def record(token_id: int, data: bytes | None) -> dict[str, Any]:
        if data is None:  # an id the model has and its tokenizer does not (a padded vocab)
            return {"id": token_id, "text": f"<id {token_id}>"}
        return {"id": token_id, "text": labels_for([data])[0], "bytes": data.hex()}

    if tokens.encoding is not None:
        from attncli.core.tokens import get_encoding

        encoding = get_encoding(tokens.encoding)

        def tiktoken_text(token_id: int) -> dict[str, Any]:
            try:
                return record(token_id, encoding.decode_single_token_bytes(token_id))
            except KeyError:
                return record(token_id, None)

        return tiktoken_text
    from attncli.models.family import open_family
    from attncli.models.hf_tokens import labeller as labeller_of
    from attncli.models.hf_tokens import source_tokenizer

    tokenizer = source_tokenizer(open_family(model_path)[0] if source is None else source)
    labeller = labeller_of(tokenizer)

    def own_text(token_id: int) -> dict[str, Any]:
        entry = tokenizer.id_to_token(token_id)
        if entry is None:
            return record(token_id, None)
        piece = labeller.pieces([(token_id, entry, 0)], 0)[0]
        return record(token_id, piece.data)

    return own_text
