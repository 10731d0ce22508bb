"""`attncli generate`."""

from __future__ import annotations

from typing import Annotated

import typer

from attncli.cli.app import app
from attncli.cli.options import FileOpt, HeadOpt, JsonOpt, SpecialOpt, TextArg
from attncli.cli.output import console, emit, emit_json

ModelReq = Annotated[str, typer.Option("--model", "-m", help="The decoder that answers: a folder, "
                                       "a .gguf file, or a cached model name.")]
MaxNewOpt = Annotated[int, typer.Option(help="The most answer tokens written.")]
SampleOpt = Annotated[bool, typer.Option("--sample", help="Sample the next token (else greedy).")]
TempOpt = Annotated[float, typer.Option(help="With --sample: logits divided by this first.")]
TopPOpt = Annotated[float, typer.Option(help="With --sample: keep the likeliest tokens whose "
                                        "mass reaches this.")]
GenTopKOpt = Annotated[int, typer.Option("--top-k", help="With --sample: keep this many "
                                         "likeliest tokens (0: all).")]
GenSeedOpt = Annotated[int | None, typer.Option("--seed", help="With --sample: the seed that "
                                                "reproduces the draw [default: a fresh one, "
                                                "recorded in --json].", show_default=False)]
SystemOpt = Annotated[str | None, typer.Option(help="A system message for the chat template.",
                                               show_default=False)]
RawOpt = Annotated[bool, typer.Option("--raw", help="Send the prompt without the chat template.")]
ShowTemplateOpt = Annotated[bool, typer.Option("--show-template",
                                               help="Print what the model is given, and stop.")]
AtOpt = Annotated[int | None, typer.Option("--at", help="The answer token (0-based) whose "
                                           "attention is drawn over the text.",
                                           show_default=False)]
LayersOpt = Annotated[str | None, typer.Option("--layers", help="Layers A:B combined (half-open) "
                                               "[default: all].", show_default=False)]
CombineOpt = Annotated[str, typer.Option(help="How layers and heads combine: mean or max.")]
SinksOpt = Annotated[bool, typer.Option("--exclude-sinks/--keep-sinks", help="Leave out the "
                                        "first token and the template's own tokens, and "
                                        "renormalise (--json keeps raw weights).")]


def _span(text: str | None) -> tuple[int, int] | None:
    from attncli.errors import AttnCliError

    if text is None:
        return None
    a, sep, b = text.partition(":")
    if not sep or not a.strip().isdigit() or not b.strip().isdigit():
        raise AttnCliError(f"--layers takes A:B, two whole numbers (got {text!r})")
    return int(a), int(b)


@app.command()
def generate(
    text: TextArg = None, file: FileOpt = None, model: ModelReq = "",
    max_new_tokens: MaxNewOpt = 48, sample: SampleOpt = False, temperature: TempOpt = 1.0,
    top_p: TopPOpt = 1.0, top_k: GenTopKOpt = 0, seed: GenSeedOpt = None,
    system: SystemOpt = None, raw: RawOpt = False, show_template: ShowTemplateOpt = False,
    allow_special: SpecialOpt = False, at: AtOpt = None, layers: LayersOpt = None,
    head: HeadOpt = None, combine: CombineOpt = "mean", exclude_sinks: SinksOpt = True,
    as_json: JsonOpt = False,
) -> None:
    """Let the model answer, then show what each answer token looked at.

    Examples:

      attncli generate "What is the capital of France?" --model SmolLM2.gguf

      attncli generate "Name a colour" --model M --sample --seed 1 --at 0 --layers 0:8
    """
    from attncli.core.inputs import read_text
    from attncli.errors import AttnCliError
    from attncli.models.generate.result import GenerateView, check_view
    from attncli.models.generate.run import Keep, generate_model
    from attncli.models.generate.sampling import Sampling
    from attncli.render.reports.generate import render_generation

    if not model:
        raise AttnCliError("generate needs --model: the decoder that answers")
    prompt = read_text(text, file)
    sampling = Sampling(max_new_tokens=max_new_tokens, sample=sample, temperature=temperature,
                        top_p=top_p, top_k=top_k, seed=seed)
    view = GenerateView(at=at, layers=_span(layers), head=head, combine=combine,
                        exclude_sinks=exclude_sinks)
    if show_template:
        from attncli.models.family import open_model
        from attncli.models.generate.prompt import build_prompt

        built = build_prompt(open_model(model), model, prompt, system, raw, allow_special)
        typer.echo(built.given, nl=False)
        return
    keep = Keep(view.layers, head) if as_json else Keep()
    result = generate_model(model, prompt, sampling, system=system, raw=raw, keep=keep,
                            allow_special=allow_special)
    check_view(result, view)
    if as_json:
        emit_json(result.to_dict())
        return
    out = console()
    emit(out, render_generation(out, result, view))
