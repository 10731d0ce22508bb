"""What a generation holds, as plain data, and its JSON contract (to_dict); the views of one
answer token's attention (layers and heads combined, sinks left out) as numpy, no torch.

Step s is the decode step that chose answer token s: its query is the token before it, and its
weights (layers, heads, P + s) cover the P prompt tokens and answer tokens 0..s-1.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from attncli.core.result import ModelInfo, TokenInfo
from attncli.records.asking import (
    AUTO_LOOKS,
    COMBINES,
    FLOAT32,
    OCCLUDE,
    VIEWS,
    GenerateView,
    Sampling,
)
from attncli.records.given import Occluded, Receipt, Template, Turn

__all__ = ["COMBINES", "OCCLUDE", "VIEWS", "GenerateView", "GenerationResult"]

STOPPED = ("eos", "max_new_tokens", "interrupted", "given")
# A found sink takes over twice the mean share of the prompt's own tokens while its value norm
# is under 0.8 of their median (SmolLM2's ' the' in "What is the capital of France?": 2.9×
# the share, 0.75 the norm; its content words: about 1× each).
SINK_SHARE = 2.0
SINK_NORM = 0.8


@dataclass(frozen=True)
class Candidate:
    """One of a step's likeliest next tokens, and its probability."""

    id: int
    text: str
    prob: float
    bytes_hex: str | None = None  # the token's bytes, where its tokenizer has them

    def to_dict(self) -> dict[str, Any]:
        """The candidate as --json writes it: {id, text, bytes?, prob}."""
        return {"id": self.id, "text": self.text,
                **({} if self.bytes_hex is None else {"bytes": self.bytes_hex}), "prob": self.prob}


@dataclass(frozen=True)
class AnswerStep:
    """The decode step (or the teacher-forced pass's row) that chose answer token index: its
    query's position, the token, its probability and rank, and the likeliest tokens."""

    index: int
    position: int
    id: int
    prob: float
    top: list[Candidate]
    logprob: float | None = None  # None in a file saved before it was written
    rank: int | None = None  # 1 + how many tokens were likelier (1: the greedy choice)

    def to_dict(self) -> dict[str, Any]:
        """The step as --json writes it, its weights apart."""
        said = {"logprob": self.logprob, "rank": self.rank}
        return {"index": self.index, "position": self.position, "id": self.id, "prob": self.prob,
                **{k: v for k, v in said.items() if v is not None},
                "top": [c.to_dict() for c in self.top]}


@dataclass(frozen=True)
class GenerationResult:
    """A model's answer to a prompt, and what each answer token looked at."""

    model: ModelInfo
    prompt: list[TokenInfo]
    answer: list[TokenInfo]  # indices continue the prompt's: answer token s is P + s
    given: str  # the text the model was given: the template's output, or the raw prompt
    template: Template  # the chat template the prompt went through, or none
    sampling: Sampling  # how the tokens were chosen (a given answer's: greedy, unused)
    stop_ids: list[int]
    stopped: str  # eos, max_new_tokens or interrupted
    sinks: list[int]  # prompt indices --exclude-sinks leaves out: the first, the template's own
    steps: list[AnswerStep]  # per answer token
    weights: list[np.ndarray] = field(default_factory=list)  # per step (layers, heads, P + s)
    layers_kept: tuple[int, int] | None = None  # the layers weights hold, when fewer than all
    head_kept: int | None = None  # the one head weights hold, when only one
    given_answer: bool = False  # the answer was given and teacher-forced, not generated
    turns: list[Turn] = field(default_factory=list)  # each message's tokens
    norms: np.ndarray | None = None  # (layers, heads, P + A) ‖W_O^h v_j^h‖: the value view
    occlusion: list[list[float]] | None = None  # (A, P) log-prob drop with each token masked
    occluded: Occluded | None = None  # what occlusion masked together
    receipt: Receipt | None = None  # a runtime's log-probs against attncli's
    view: str = "raw"  # the view it was made for: raw, value or occlusion
    # the default view's measure: occlusion's cost in looks (passes over the whole text), when
    # --view auto chose the view by it (occlusion at most AUTO_LOOKS, else value); else None
    auto_looks: float | None = None
    numerics: str = FLOAT32  # the arithmetic: float32, or llama.cpp's (records/asking.py)

    @property
    def answer_text(self) -> str:
        """The answer's text: its tokens' bytes joined and read as UTF-8, since a token may
        hold part of a character (its label alone is then its bytes written out, \\xf0\\x9f);
        bytes that are no UTF-8 (a character the answer stopped inside) written out the same;
        without the stop token that ended it (<|im_end|>, </s>: a runtime prints none, and the
        steps keep it)."""
        answer = self.answer
        if self.stopped == "eos" and answer and answer[-1].id in self.stop_ids:
            answer = answer[:-1]
        if any(t.bytes_hex is None for t in answer):
            return "".join(t.text for t in answer)
        data = b"".join(bytes.fromhex(t.bytes_hex or "") for t in answer)
        return data.decode("utf-8", "backslashreplace")

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract of `attncli generate`: raw weights, never renormalised."""
        kept: dict[str, Any] = {"layers": list(self.layers_kept or (0, self.model.layers)),
                                "head": self.head_kept}
        return {"kind": "generate", "model": self.model.to_dict(),
                "config": {"sampling": self.sampling_dict(), "template": self.template.to_dict(),
                           "stop_ids": self.stop_ids, "stopped": self.stopped,
                           "weights": kept, "given": self.given_answer, "view": self.view,
                           "numerics": self.numerics,
                           **({} if self.auto_looks is None else
                              {"view_chosen": {"by": "auto", "occlusion_looks": self.auto_looks,
                                               "most_looks": AUTO_LOOKS}})},
                "given": self.given,
                "prompt": [t.to_dict() for t in self.prompt],
                "answer": [t.to_dict() for t in self.answer],
                "sinks": self.sinks, "turns": [t.to_dict() for t in self.turns],
                **({} if self.norms is None else {"value_norms": self.norms}),
                **({} if self.occlusion is None else {"occlusion": self.occlusion}),
                **({} if self.occluded is None else {"occlusion_spans": self.occluded.to_dict()}),
                **({} if self.receipt is None else {"receipt": self.receipt.to_dict()}),
                "steps": [{**step.to_dict(),
                           "weights": self.weights[s] if s < len(self.weights) else None}
                          for s, step in enumerate(self.steps)]}

    def auto_note(self) -> str | None:
        """What the default view chose, and why, where it is other than occlusion: one line."""
        if self.auto_looks is None or self.view == "occlusion":
            return None
        if self.auto_looks <= AUTO_LOOKS:  # cheap, so chosen for --layers, --head or --combine
            return (f"--layers, --head and --combine choose among attention's layers and heads: "
                    f"showing {self.view}; ask --view occlusion for the whole model's "
                    f"({self.auto_looks:.1f} looks)")
        return (f"the occlusion view would take {self.auto_looks:.1f} looks (over "
                f"{AUTO_LOOKS}): showing {self.view}; ask --view occlusion for it")

    def sampling_dict(self) -> dict[str, Any]:
        """config.sampling: the sampling record's, or the given answer's length."""
        if self.given_answer:
            return {"max_new_tokens": len(self.answer), "strategy": "given"}
        return self.sampling.to_dict()

    def labels(self) -> list[str]:
        """Every token's label, prompt then answer."""
        return [t.text for t in self.prompt + self.answer]

    def row(self, step: int, view: GenerateView) -> np.ndarray:
        """Step's view over its keys (P + step,): raw or value-weighted weights, the view's
        layers and heads combined and, with exclude_sinks, the sinks set to 0 and the rest
        renormalised to sum to 1; or occlusion's log-prob drops (nats) over the prompt."""
        if view.kind == "occlusion":
            return self._occluded(step, view)
        weights = np.asarray(self.weights[step], dtype=np.float64)  # (L, H, t+1)
        if view.kind == "value":  # α_ij·‖W_O^h v_j^h‖ (Kobayashi 2020): what j adds to i
            weights = weights * self._held_norms()[..., :weights.shape[-1]]
        a, b = self._layer_span(view)
        heads = slice(None) if view.head is None else slice(*self._head_span(view.head))
        chosen = weights[a:b, heads].reshape(-1, weights.shape[-1])  # (L·H, t+1)
        row = chosen.mean(axis=0) if view.combine == "mean" else chosen.max(axis=0)
        if view.exclude_sinks or view.kind == "value":
            row = row.copy()
            if view.exclude_sinks:
                row[[i for i in self.left_out() if i < row.shape[0]]] = 0.0
            total = row.sum()
            row = row / total if total > 0 else row
        return row  # (t+1,)

    @cached_property
    def found_sinks(self) -> list[int]:
        """Prompt tokens that act as sinks by what they are, not where they are: each takes
        more than SINK_SHARE times the mean share of the prompt's own tokens of the answer's
        raw attention (every layer and head held), while its value norm ‖W_O v‖ is under
        SINK_NORM times their median: much looked at, little taken. Needs the value norms."""
        if self.norms is None or not self.weights:
            return []
        p, fixed = len(self.prompt), set(self.sinks)
        own = [j for j in range(p) if j not in fixed]
        if len(own) < 3:
            return []
        share = np.mean([np.asarray(w, dtype=np.float64)[..., :p].mean(axis=(0, 1))
                         for w in self.weights], axis=0)  # (P,)
        norm = self._held_norms()[..., :p].mean(axis=(0, 1))  # (P,)
        mean_share, median_norm = share[own].mean(), np.median(norm[own])
        return [j for j in own if share[j] > SINK_SHARE * mean_share
                and norm[j] < SINK_NORM * median_norm]

    def left_out(self) -> list[int]:
        """The sinks a view leaves out: the first token, the template's, and those found."""
        return sorted(set(self.sinks) | set(self.found_sinks))

    def _held_norms(self) -> np.ndarray:
        """The value norms of the layers and heads the weights hold: (L, H, P + A)."""
        norms = np.asarray(self.norms, dtype=np.float64)
        a, b = self.layers_kept or (0, self.model.layers)
        heads = slice(None) if self.head_kept is None else slice(self.head_kept,
                                                                 self.head_kept + 1)
        return norms[a:b, heads]

    def _occluded(self, step: int, view: GenerateView) -> np.ndarray:
        """Answer token step's log-prob drop with each prompt token masked (P + step,): 0 on
        answer tokens and, with exclude_sinks, on the sinks."""
        assert self.occlusion is not None, "the occlusion view needs occlusion computed"
        row = np.zeros(len(self.prompt) + step)
        row[:len(self.prompt)] = self.occlusion[step]
        if view.exclude_sinks:
            row[[i for i in self.left_out() if i < row.shape[0]]] = 0.0
        return row

    def _layer_span(self, view: GenerateView) -> tuple[int, int]:
        """The view's layers as indices into the layers the weights hold."""
        held = self.layers_kept or (0, self.model.layers)
        a, b = view.layers or held
        return a - held[0], b - held[0]

    def _head_span(self, head: int) -> tuple[int, int]:
        start = head if self.head_kept is None else 0
        return start, start + 1

    def ranked(self, step: int, view: GenerateView, prompt_only: bool = True) -> list[
            tuple[int, float]]:
        """The view's k keys that step looked at most: (index, weight), heaviest first, ties by
        position; prompt_only keeps prompt tokens only. The sinks a view leaves out are not
        ranked, nor, in the occlusion view, tokens no pass masked: their 0 is no measure (it
        ranked them above the words whose masking raised the answer's log-prob)."""
        row = self.row(step, view)
        keys = row[:len(self.prompt)] if prompt_only else row
        hidden = set(self.left_out()) if view.exclude_sinks else set()
        masked = (None if view.kind != "occlusion" or self.occluded is None
                  else {i for span in self.occluded.spans for i in span})
        shown = [i for i in range(keys.shape[0])
                 if i not in hidden and (masked is None or i in masked)]
        order = sorted(shown, key=lambda i: (-keys[i], i))[:view.k]
        return [(i, float(keys[i])) for i in order]

    def shares(self, view: GenerateView) -> tuple[float, float]:
        """The answer's attention to the prompt and to its own earlier tokens, each the mean
        over answer tokens of the share of its row."""
        if not self.weights:
            return 0.0, 0.0
        prompt_len = len(self.prompt)
        to_prompt = [float(self.row(s, view)[:prompt_len].sum()) for s in range(len(self.weights))]
        to_answer = [float(self.row(s, view)[prompt_len:].sum())
                     for s in range(len(self.weights))]
        return float(np.mean(to_prompt)), float(np.mean(to_answer))
