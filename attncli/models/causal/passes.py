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
from attncli.models.causal.readout import Read, Readout, read, split
from attncli.models.family import Editable, LayerTrace, Model
from attncli.models.scores import SCORES, head_scores, stacked_patterns
from attncli.models.sources.gguf.qmatmul import dense_rows

Edit = Callable[[Tensor], Tensor]  # z (heads, T, hd) → the z the block uses
WAVE_BYTES = 256 * 2**20  # the activations of the variants run together, about


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


def edited_reads(model: Model, clean: CleanPass, variants: list[dict[int, Edit]],
                 readout: Readout, start: int = 0) -> Iterator[Read]:
    """Each variant of clean's text (each layer's z through its edits[layer]) read at
    readout's rows, in order. Variants, in order of the lowest layer each edits, run together
    in waves (their activations within WAVE_BYTES): a wave starts at its lowest layer from the
    clean stream there, and each variant joins it at its own lowest layer, so no variant runs
    a block below the layers it edits, and each block's matrices are read once a wave. With
    start, the edits change positions start.. only (each takes z (heads, T - start, hd)): the
    earlier positions are clean's at every layer, attended to and not run again."""
    firsts = [min(edits) for edits in variants]
    assert firsts == sorted(firsts), "variants come in order of their lowest edited layer"
    assert all(row >= start for row in readout.rows), "rows before start are clean's"
    n, spec = len(clean.ids), model.spec
    per_variant = 4 * (n - start) * (24 * spec.d_model + 3 * spec.num_heads * n)  # bytes
    size = max(1, WAVE_BYTES // per_variant)
    decoder = editable(model)
    head, rows = decoder.head(), [row - start for row in readout.rows]
    for begin in range(0, len(variants), size):
        wave, layers = variants[begin:begin + size], firsts[begin:begin + size]

        def enter(layer: int, x: Tensor, layers: list[int] = layers) -> Tensor:
            joining = layers.count(layer) if layer > layers[0] else 0
            if not joining:
                return x  # (B, S, d_model)
            tail = clean.streams[layer][start:]  # (S, d_model)
            return torch.cat([x, tail.expand(joining, -1, -1)])  # (B', S, d_model)

        def edit(layer: int, z: Tensor, wave: list[dict[int, Edit]] = wave) -> Tensor:
            if not any(layer in edits for edits in wave[:z.shape[0]]):
                return z  # (B, heads, S, hd) as the block made it
            return torch.stack([edits[layer](z[b]) if layer in edits else z[b]
                                for b, edits in enumerate(wave[:z.shape[0]])])  # (B, heads, S, hd)

        stream = clean.streams[layers[0]][start:].expand(layers.count(layers[0]), -1, -1)
        with dense_rows():  # B · S rows a product: torch's on the dequantized matrix, faster
            final = decoder.edited(clean.ids, layers[0], stream, edit, enter,
                                   clean.streams if start else None)  # (B, S, d_model)
            tokens = readout.tokens.repeat(len(wave), 1)  # (B · P, K)
            whole = read(head, final[:, rows].flatten(0, 1), tokens, readout.reference)
        yield from split(whole, len(wave))


def edited_logits(model: Model, clean: CleanPass, edits: dict[int, Edit]) -> Tensor:
    """Logits (T, vocab) of clean's text with each layer's z through edits[layer]."""
    decoder, first = editable(model), min(edits)
    final = decoder.edited(clean.ids, first, clean.streams[first][None],
                           lambda layer, z: edits[layer](z[0])[None] if layer in edits else z)
    return decoder.held_logits(final[0]).float()  # (T, vocab)


def each_head(model: Model, clean: CleanPass, values: Callable[[int, int], Tensor],
              readout: Readout) -> Iterator[tuple[int, int, Read]]:
    """Every head ablated alone, values(layer, head) (T, hd) in place of its output: layer,
    head and its pass read at readout's rows."""
    spec = model.spec
    heads = [(layer, head) for layer in range(spec.n_layer) for head in range(spec.num_heads)]
    variants = [{layer: replaced(head, values(layer, head))} for layer, head in heads]
    for (layer, head), found in zip(heads, edited_reads(model, clean, variants, readout),
                                    strict=True):
        yield layer, head, found


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
