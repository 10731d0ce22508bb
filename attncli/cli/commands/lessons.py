"""`attncli permute`, `kvcache`, `flash` and `cost`: the chapter's reasons why attention matters."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from attncli.cli.app import app
from attncli.cli.options import (
    BiasOpt,
    DOutOpt,
    EmbDimOpt,
    EncodingOpt,
    FileOpt,
    HeadsOpt,
    InputsOpt,
    JsonOpt,
    LangOpt,
    LayerOpt,
    ModelOpt,
    PositionsOpt,
    SaveJsonOpt,
    SaveOpt,
    SeedOpt,
    SpecialOpt,
    TextArg,
    Variant,
    VariantOpt,
)
from attncli.cli.output import check_outputs, deliver
from attncli.errors import AttnCliError

if TYPE_CHECKING:
    from attncli.core.request import Request

LessonPrecisionOpt = Annotated[int, typer.Option(min=0, max=8, help="Decimals shown.")]
ShownHeadOpt = Annotated[int, typer.Option(
    "--head", min=0, help="The head whose weights are shown (multihead, or --model).")]
KeepOpt = Annotated[str | None, typer.Option(
    help="With --model: evict keys from every layer's cache, keeping the latest W (window:W) "
    "and the first S (sinks:S,window:W); prints perplexity and top-1 agreement beside the full "
    "cache (StreamingLLM).", metavar="[sinks:S,]window:W", show_default=False)]


def _lang(lang: Any) -> str:
    from attncli.i18n import resolve_lang

    return resolve_lang(lang and lang.value, os.environ)


def _request(text: str | None, file: str | None, inputs: str | None,
             variant: Variant | None, default: Variant, model: str | None = None,
             layer: int | None = None, *,
             encoding: str, allow_special: bool, seed: int, emb_dim: int, positions: bool,
             d_out: int | None, heads: int | None, qkv_bias: bool) -> Request:
    """The lesson's request, with its input read (TEXT, --file, stdin or --inputs)."""
    from attncli.cli.requests import read_source
    from attncli.core.request import Request

    source_text, source_inputs = read_source(text, file, inputs)
    return Request(text=source_text, inputs=source_inputs,
                   variant=variant if model is not None else (variant or default),
                   encoding=encoding, allow_special=allow_special, seed=seed, emb_dim=emb_dim,
                   positions=positions, d_out=d_out, heads=heads, qkv_bias=qkv_bias,
                   model=model, layer=layer)


@app.command()
def permute(
    text_a: Annotated[str, typer.Argument(metavar="TEXT_A", help="The first text.")],
    text_b: Annotated[str, typer.Argument(metavar="TEXT_B", help="The same tokens reordered.")],
    variant: Annotated[Variant, typer.Option(
        "--variant", "-v", help="Attention variant (qkv has no mask).")] = Variant.qkv,
    encoding: EncodingOpt = "gpt2",
    allow_special: SpecialOpt = False,
    seed: SeedOpt = 123,
    emb_dim: EmbDimOpt = 8,
    d_out: DOutOpt = None,
    heads: HeadsOpt = None,
    qkv_bias: BiasOpt = False,
    model: ModelOpt = None,
    layer: LayerOpt = None,
    precision: LessonPrecisionOpt = 3,
    as_json: JsonOpt = False,
    lang: LangOpt = None,
    save: SaveOpt = None,
    save_json: SaveJsonOpt = None,
) -> None:
    """Show that attention without positions cannot tell word order: 猫吃鱼 vs 鱼吃猫.

    Both texts must hold the same tokens. Each runs with the same seed, without and with
    positional embeddings; B's weights are compared with A's, rows and columns reordered.

    Examples:

      attncli permute 猫吃鱼 鱼吃猫

      attncli permute "the cat eats the fish" "the fish eats the cat" --variant causal

      attncli permute 猫吃鱼 鱼吃猫 --json | jq .without_positions.max_abs_diff

    --model DIR runs a trained encoder's --layer (bert, roberta), positions left out and kept.
    """
    from attncli.core.request import Request
    from attncli.lessons.permute import permute as run_permute
    from attncli.lessons.permute import permute_model
    from attncli.render.lessons.permute import render_permute

    check_outputs(save, save_json)
    spec = Request(text=text_a, model=model, layer=layer, allow_special=allow_special) \
        if model is not None else Request(text=text_a, variant=variant, encoding=encoding,
                                          allow_special=allow_special, seed=seed,
                                          emb_dim=emb_dim, d_out=d_out, heads=heads,
                                          qkv_bias=qkv_bias)
    result = (permute_model if model is not None else run_permute)(spec, text_a, text_b)
    shown = _lang(lang)
    deliver(result.to_dict(), lambda out: render_permute(out, result, shown, precision),
            as_json, save, save_json)


@app.command()
def kvcache(
    text: TextArg = None,
    file: FileOpt = None,
    inputs: InputsOpt = None,
    model: ModelOpt = None,
    layer: LayerOpt = None,
    variant: VariantOpt = None,
    encoding: EncodingOpt = "gpt2",
    allow_special: SpecialOpt = False,
    seed: SeedOpt = 123,
    emb_dim: EmbDimOpt = 8,
    positions: PositionsOpt = True,
    d_out: DOutOpt = None,
    heads: HeadsOpt = None,
    qkv_bias: BiasOpt = False,
    head: ShownHeadOpt = 0,
    keep: KeepOpt = None,
    precision: LessonPrecisionOpt = 3,
    as_json: JsonOpt = False,
    lang: LangOpt = None,
    save: SaveOpt = None,
    save_json: SaveJsonOpt = None,
) -> None:
    """Decode token by token with a key/value cache, each step checked against the full pass.

    Per step: the query's weights over the cache, the cache's length and bytes, and the
    multiply-adds with the cache and without it. Causal variants, or with --model a GPT-2 or
    Llama-family checkpoint (its cache holds kv_heads per layer: what GQA saves).

    Examples:

      attncli kvcache "Your journey starts with one step"

      attncli kvcache "..." --variant multihead --heads 2 --json | jq .totals

      attncli kvcache "The cat sat on the mat" --model samples/toy-gpt2 --layer -1

      attncli kvcache --file samples/streaming.txt --model M.gguf --keep sinks:4,window:64
    """
    from attncli.lessons.kvcache import kvcache as run_kvcache
    from attncli.lessons.setup import build, lesson_config
    from attncli.render.lessons.kvcache import render_kvcache

    check_outputs(save, save_json)
    kept = _keep(keep, model, layer, save)
    if kept is not None and head != 0:
        raise AttnCliError("--keep measures every layer and head together: --head picks the "
                           "head of the plain lesson's weights; leave it out")
    spec = _request(text, file, inputs, variant, Variant.causal, model, layer, encoding=encoding,
                    allow_special=allow_special, seed=seed, emb_dim=emb_dim, positions=positions,
                    d_out=d_out, heads=heads, qkv_bias=qkv_bias)
    shown = _lang(lang)
    if kept is not None:
        from attncli.lessons.streaming import streaming_model
        from attncli.render.lessons.streaming import render_streaming

        stream = streaming_model(spec, *kept)
        deliver(stream.to_dict(), lambda out: render_streaming(out, stream, shown), as_json, save,
                save_json)
        return
    if spec.model is not None:
        from attncli.lessons.kvcache import kvcache_model

        result = kvcache_model(spec)
    else:
        result = run_kvcache(build(spec), lesson_config(spec))
    heads_run = len(result.steps[0].weights)
    if head >= heads_run:
        raise AttnCliError(f"--head {head} is out of range (use 0..{heads_run - 1})")
    deliver(result.to_dict(), lambda out: render_kvcache(out, result, shown, precision, head),
            as_json, save, save_json)


def _keep(keep: str | None, model: str | None, layer: int | None,
          save: Path | None) -> tuple[int, int] | None:
    """--keep's (sinks, window) checked before any input is read, or None without it."""
    if keep is None:
        return None
    from attncli.cli.output import is_page
    from attncli.lessons.streaming import check_keep

    kept = check_keep(keep, model, layer)
    if is_page(save):
        raise AttnCliError("--keep draws no page: use --save-json, or --save with .svg or .txt")
    return kept


@app.command()
def flash(
    text: TextArg = None,
    file: FileOpt = None,
    inputs: InputsOpt = None,
    block: Annotated[int, typer.Option(help="Keys per block.")] = 4,
    query: Annotated[int | None, typer.Option(
        help="The query shown, 0-based; negative counts from the end [default: the last].",
        show_default=False, metavar="I")] = None,
    variant: VariantOpt = None,
    encoding: EncodingOpt = "gpt2",
    allow_special: SpecialOpt = False,
    seed: SeedOpt = 123,
    emb_dim: EmbDimOpt = 8,
    positions: PositionsOpt = True,
    d_out: DOutOpt = None,
    heads: HeadsOpt = None,
    qkv_bias: BiasOpt = False,
    head: ShownHeadOpt = 0,
    precision: LessonPrecisionOpt = 3,
    as_json: JsonOpt = False,
    lang: LangOpt = None,
    save: SaveOpt = None,
    save_json: SaveJsonOpt = None,
) -> None:
    """Follow the online softmax of the tiled (flash) path for one query, block by block.

    Per key block: its scaled scores and maximum, the running maximum m, the rescale factor
    exp(m_old − m_new), the running sum l and the accumulator; then the weights and context
    rebuilt from them, checked against the naive full pass.

    Examples:

      attncli flash "Your journey starts with one step" --block 2

      attncli flash "..." --block 2 --query 3 --variant multihead --head 1

      attncli flash "..." --block 2 --json | jq '.steps[] | {keys, m, l}'
    """
    from attncli.lessons.flash import flash as run_flash
    from attncli.lessons.setup import build, lesson_config
    from attncli.render.lessons.flash import render_flash

    check_outputs(save, save_json)
    spec = _request(text, file, inputs, variant, Variant.causal, encoding=encoding,
                    allow_special=allow_special, seed=seed, emb_dim=emb_dim, positions=positions,
                    d_out=d_out, heads=heads, qkv_bias=qkv_bias)
    result = run_flash(build(spec), lesson_config(spec), block, query, head)
    shown = _lang(lang)
    deliver(result.to_dict(), lambda out: render_flash(out, result, shown, precision),
            as_json, save, save_json)


@app.command()
def cost(
    max_tokens: Annotated[int, typer.Option(help="The largest N; N doubles from 128.")] = 4096,
    heads: Annotated[int, typer.Option(help="Attention heads.")] = 1,
    emb_dim: Annotated[int, typer.Option(help="d_out, split across the heads.")] = 64,
    seed: SeedOpt = 123,
    as_json: JsonOpt = False,
    lang: LangOpt = None,
    save: SaveOpt = None,
    save_json: SaveJsonOpt = None,
) -> None:
    """Measure the O(n²) cost: time and peak bytes of the naive and the tiled path as N doubles.

    Each size runs in a fresh measurement; the bytes are those of the tensors each pass
    allocates, tracked as torch creates and frees them. Exponents are fitted on a log-log
    scale, given only where the last three doublings agree (else the reason says the range
    is too short), and the naive memory projected to 32K and 128K tokens. The naive path is
    skipped where it would need more than 2 GiB; sizes that would not fit in memory, or take
    minutes, are refused before anything runs.

    Examples:

      attncli cost

      attncli cost --max-tokens 16384 --heads 4 --emb-dim 256

      attncli cost --json | jq .fit
    """
    from attncli.lessons.cost import cost as run_cost
    from attncli.render.lessons.cost import render_cost

    check_outputs(save, save_json)
    result = run_cost(max_tokens, heads, emb_dim, seed)
    shown = _lang(lang)
    deliver(result.to_dict(), lambda out: render_cost(out, result, shown), as_json, save,
            save_json)
