"""A text's clean pass as edits need it, and passes with heads' outputs edited.

An edit replaces head h's output z (T, head_dim) at layer L before W_O. The blocks below L are
the clean pass's: the edited pass starts from the stream the clean pass had entering L, so only
blocks L.. run again (as TransformerLens's run_with_hooks on hook_z, without the lower blocks).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import torch
from torch import Tensor

from attncli.errors import AttnCliError
from attncli.models.family import Editable, LayerTrace, Model
from attncli.models.scores import SCORES, head_scores, stacked_patterns
from attncli.models.sources.gguf.qmatmul import dense_rows

Edit = Callable[[Tensor], Tensor]  # z (heads, T, hd) → the z the block uses
BATCH_BYTES = 128 * 2**20  # the float32 logits of variants run together, at most


@dataclass
class CleanPass:
    """One text's pass without edits: what edits start from and replace with."""

    ids: list[int]
    streams: list[Tensor]  # per layer: (T, d_model) the stream entering it
    z: list[Tensor]  # per layer: (heads, T, hd) each head's output before W_O
    logits: Tensor  # (T, vocab)
    scores: list[dict[str, Tensor]]  # per layer: each pattern score's (heads,), as `heads`'


def editable(model: Model) -> Editable:
    """model as one whose heads' outputs can be edited; an encoder or other family, one line."""
    if model.traits.bidirectional or not isinstance(model, Editable):
        raise AttnCliError(f"{model.traits.title} models have no next-token logits to ablate or "
                           "patch: use a decoder (GPT-2 or a Llama-family checkpoint)")
    return model


@torch.no_grad()
def clean_pass(model: Model, ids: list[int], blocks: Iterable[LayerTrace]) -> CleanPass:
    """The streams, heads' outputs, pattern scores and logits of blocks (a trace of every
    layer of ids)."""
    streams, z, scores, final = [], [], [], None
    patterns = stacked_patterns(ids)  # (scores, T, T)
    for block in blocks:
        streams.append(block.residual)  # (T, d_model)
        z.append(block.weights @ block.values)  # (heads, T, hd): A · V per head
        found = head_scores(block.weights[None], patterns)  # name → (1, heads)
        scores.append({name: found[name][0] for name in SCORES})
        final = block.output
        del block  # its (heads, T, T) weights go before the next block's are made
    assert final is not None and len(streams) == model.spec.n_layer
    return CleanPass(ids, streams, z, editable(model).held_logits(final).float(), scores)


def edited_runs(model: Model, clean: CleanPass, variants: list[dict[int, Edit]],
                rows: list[int] | None = None) -> Iterator[Tensor]:
    """Logits (P, vocab) at rows (P positions; None: all T) of each variant of clean's text,
    each layer's z through its edits[layer]: several variants run together as a batch (their
    logits within BATCH_BYTES), each batch from the lowest layer it edits; the blocks below
    are not run again."""
    n, vocab = clean.logits.shape  # (T, vocab)
    kept = list(range(n)) if rows is None else rows
    size = max(1, BATCH_BYTES // (4 * len(kept) * vocab))
    decoder = editable(model)
    for begin in range(0, len(variants), size):
        batch = variants[begin:begin + size]
        first = min(min(edits) for edits in batch)

        def edit(layer: int, z: Tensor, batch: list[dict[int, Edit]] = batch) -> Tensor:
            if not any(layer in edits for edits in batch):
                return z  # (B, heads, T, hd) as the block made it
            return torch.stack([edits[layer](z[b]) if layer in edits else z[b]
                                for b, edits in enumerate(batch)])  # (B, heads, T, hd)

        stream = clean.streams[first].expand(len(batch), -1, -1)  # (B, T, d_model)
        with dense_rows():  # B · T rows a product: torch's on the dequantized matrix, faster
            final = decoder.edited(clean.ids, first, stream, edit)  # (B, T, d_model)
            final = final if rows is None else final[:, rows]  # (B, P, d_model)
            logits = decoder.held_logits(final.flatten(0, 1)).float()  # (B · P, vocab)
        yield from logits.unflatten(0, (len(batch), len(kept)))  # (P, vocab) each


def edited_logits(model: Model, clean: CleanPass, edits: dict[int, Edit]) -> Tensor:
    """Logits (T, vocab) of clean's text with each layer's z through edits[layer]."""
    return next(edited_runs(model, clean, [edits]))


def each_head(model: Model, clean: CleanPass, values: Callable[[int, int], Tensor],
              rows: list[int] | None = None) -> Iterator[tuple[int, int, Tensor]]:
    """Every head ablated alone, values(layer, head) (T, hd) in place of its output: layer,
    head and the logits (P, vocab) at rows (None: all T); a layer's heads run together, from
    that layer up."""
    spec = model.spec
    for layer in range(spec.n_layer):
        variants = [{layer: replaced(head, values(layer, head))}
                    for head in range(spec.num_heads)]
        for head, logits in enumerate(edited_runs(model, clean, variants, rows)):
            yield layer, head, logits


def mean_of(clean: CleanPass) -> Callable[[int, int], Tensor]:
    """Mean ablation's values: each head's output averaged over the positions, (T, hd)."""
    return lambda layer, head: clean.z[layer][head].mean(0).expand_as(clean.z[layer][head])


def replaced(head: int, values: Tensor, positions: Tensor | None = None) -> Edit:
    """An edit putting values (T, hd) in place of head's output (at positions, a (T,) mask of
    True where replaced; None: every position)."""

    def edit(z: Tensor) -> Tensor:
        out = z.clone()  # (heads, T, hd)
        if positions is None:
            out[head] = values
        else:
            out[head, positions] = values[positions]
        return out

    return edit
