"""What `heads` computes beyond the request, with its options: its layers, its probe, its
labels, its order (models/heads.py computes it; cli/scoring.py offers it)."""

from __future__ import annotations

from dataclasses import dataclass

from attncli.core.display import Window, parse_window
from attncli.opt import check_bounds, opt

THRESHOLD = 0.4  # --threshold: a head scoring at least this is labelled
PROBES = ("induction", "previous", "duplicate")


def _layers(text: str) -> Window:
    """--layers as typed: a:b, either end open, negatives from the end."""
    return parse_window(text, "--layers")


@dataclass(frozen=True)
class HeadsOptions:
    """What `heads` computes beyond the request: its layers, its probe, its labels, its order."""

    sort: str = opt("layer", help="Order of the table: layer, head, entropy, prev, first, self, "
                    "distance, previous_token, duplicate_token or induction (measures and scores "
                    "sort largest first).")
    # --layers a:b, 0-based and half-open; None: every layer
    layers: Window | None = opt(None, help="Only these layers: a:b, half-open and 0-based like "
                                "--rows (10:20, 25:, -4:); the forward pass stops at the last.",
                                show_default=False, metavar="A:B", parse=_layers)
    # induction, previous or duplicate: run on a repeated random probe
    probe: str | None = opt(None, help="Run on a built-in probe instead of a text: --probe-length "
                            "seeded random tokens (no special ones), repeated twice, after the "
                            "model's BOS when its tokenizer has one; heads scoring --threshold "
                            "or more on the probed score are labelled.", show_default=False,
                            choices=PROBES)
    probe_length: int = opt(50, min=1, max=4096, help="Random tokens before the probe repeats "
                            "them.")
    probe_seed: int = opt(0, help="Seed of the probe's tokens.")
    threshold: float = opt(THRESHOLD, min=0.0, max=1.0, help="Label a head whose score is at "
                           "least this: the probed score with --probe, else every score.")
    # each head mean-ablated alone: the rise of the text's mean loss
    effect: bool = opt(False, "--effect", help="Add each head's effect: the rise of the text's "
                       "mean loss with its output replaced by its mean over the positions (one "
                       "ablation per head, as `ablate --heads all`).")

    def __post_init__(self) -> None:
        check_bounds(self)
