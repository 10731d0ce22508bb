"""`attncli.generate`: a model's answer and what each answer token looked at, as a result that
shows itself in a notebook or a terminal like the others."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from attncli.api.args import checked, typed, window
from attncli.api.notebook import Shown
from attncli.errors import AttnCliError
from attncli.records.asking import GenerateView, GenerationRequest, Sampling

if TYPE_CHECKING:
    import torch
    from rich.console import Console, RenderableType

    from attncli.records.generation import GenerationResult


class Generation(Shown):
    """One generation: answer (text), answer_tokens, prompt_tokens, weights (one
    (layers, heads, keys) tensor per answer token, from its own decode step), to_dict() (the
    CLI's --json) and ranked(i) (the prompt tokens answer token i looked at most)."""

    def __init__(self, record: GenerationResult, view: GenerateView) -> None:
        self.record, self.view = record, view

    @property
    def answer(self) -> str:
        """The answer's text, as a runtime prints it: without the stop token that ended it
        (answer_tokens keep it)."""
        return self.record.answer_text

    @property
    def answer_tokens(self) -> list[str]:
        """The answer's tokens' texts."""
        return [t.text for t in self.record.answer]

    @property
    def prompt_tokens(self) -> list[str]:
        """The tokens the model was given (the template's, with a chat template)."""
        return [t.text for t in self.record.prompt]

    @property
    def weights(self) -> list[torch.Tensor]:
        """Per answer token, its step's raw weights (layers, heads, keys) as float32."""
        import torch

        return [torch.from_numpy(w.copy()) for w in self.record.weights]

    def ranked(self, at: int) -> list[tuple[str, float]]:
        """The prompt tokens answer token at looked at most, with their weights (the view's
        layers, heads, combine and sinks); an at outside the answer is one AttnCliError."""
        from dataclasses import replace

        from attncli.api.args import typed
        from attncli.records.shown import check_view

        check_view(self.record, replace(self.view, at=typed("Generation.ranked", "at", at, int)))
        return [(self.record.prompt[i].text, w) for i, w in self.record.ranked(at, self.view)]

    def to_dict(self) -> dict[str, Any]:
        """Equal to `attncli generate ... --json`."""
        from attncli.api.results import _plain

        return _plain(self.record.to_dict())

    def renderable(self, console: Console) -> RenderableType:
        from attncli.render.reports.generate import render_generation

        return render_generation(console, self.record, self.view)

    def page(self) -> str:
        """The terminal view as HTML, for a notebook."""
        import io

        from rich.console import Console

        console = Console(record=True, width=100, force_terminal=True, color_system="truecolor",
                          file=io.StringIO())
        console.print(self.renderable(console))
        return console.export_html(inline_styles=True)

    def summary(self) -> str:
        return (f"<Generation {len(self.record.answer)} tokens, stopped: {self.record.stopped}:"
                f" {self.answer[:60]!r}>")


@checked
def generate(prompt: str | None = None, model: str | os.PathLike[str] | None = None, *,
             messages: list[dict[str, Any]] | None = None, answer: str | None = None,
             logprobs: str | os.PathLike[str] | None = None,
             allow_special: bool = GenerationRequest.allow_special,
             max_new_tokens: int = Sampling.max_new_tokens, sample: bool = Sampling.sample,
             temperature: float = Sampling.temperature, top_p: float = Sampling.top_p,
             top_k: int = Sampling.top_k, seed: int | None = Sampling.seed,
             system: str | None = GenerationRequest.system, raw: bool = GenerationRequest.raw,
             numerics: str = GenerationRequest.numerics, at: int | str | None = None,
             layers: str | tuple[int, int] | None = None, head: int | None = None,
             combine: str = GenerateView.combine,
             exclude_sinks: bool = GenerateView.exclude_sinks,
             view: str = GenerateView.kind,
             occlude: str = GenerateView.occlude) -> Generation:
    """Let model answer prompt, or the conversation messages (OpenAI/Ollama chat), greedy
    unless sample; or, given answer, teacher-force it in one pass. Keeps what each answer token
    looked at (at: its index, or its text as --at takes it), shown by view (raw, value or
    occlusion, masking each token, word or turn as occlude says; auto: occlusion where its
    passes are few, else value), in numerics ("float32", or "llama.cpp": a GGUF's products as
    llama.cpp's CPU backend computes them). logprobs: the file where a runtime (Ollama,
    llama.cpp's server, an OpenAI-style API) saved the answer it wrote with its per-token
    log-probabilities, as --logprobs reads it: that answer is explained, with the receipt of
    each token's log-probability here beside the runtime's. allow_special: the prompt's special
    tokens' text read as those tokens. Every argument is checked before the model runs: a wrong
    type is one AttnCliError naming it."""
    for name, hint in ARGUMENTS.items():
        typed("generate", name, locals()[name], hint)
    from attncli.models.generate.conversation import parse_messages
    from attncli.models.generate.run import generate_model
    from attncli.records.shown import shown_view

    if (prompt is None) == (messages is None):
        raise AttnCliError("attncli.generate takes a prompt or messages=, one of them")
    reported = None
    if logprobs is not None:
        from attncli.models.generate.receipt import read_logprobs

        reported = read_logprobs(logprobs)
    sampling = Sampling(max_new_tokens=max_new_tokens, sample=sample, temperature=temperature,
                        top_p=top_p, top_k=top_k, seed=seed)
    request = GenerationRequest(
        str(typed("generate", "model", model, str)), prompt or "",
        None if messages is None else parse_messages(messages, "messages"), answer, reported,
        system=system, raw=raw, allow_special=allow_special, sampling=sampling,
        numerics=numerics, view=view, occlude=occlude, exclude_sinks=exclude_sinks,
        combine=combine, head=head, at=at, keep_all=True, layers=window(layers, "layers"))
    record = generate_model(request)
    return Generation(record, shown_view(record, request))


# generate()'s arguments (model and layers apart) and the types each must have.
ARGUMENTS: dict[str, Any] = {
    "prompt": str | None, "messages": list | None, "answer": str | None, "logprobs": str | None,
    "max_new_tokens": int, "sample": bool, "temperature": float, "top_p": float,
    "top_k": int, "seed": int | None, "system": str | None, "raw": bool,
    "allow_special": bool, "numerics": str, "at": int | str | None, "head": int | None,
    "combine": str, "exclude_sinks": bool, "view": str, "occlude": str}

