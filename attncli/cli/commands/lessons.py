"""`attncli permute`, `kvcache`, `flash` and `cost`: the chapter's reasons why attention matters."""

from __future__ import annotations

from typing import Annotated

import typer

from attncli.cli.groups import Fields, command
from attncli.cli.lesson_options import Settings, Shown, Sizes
from attncli.cli.options import Chapter3, Checkpoint, Encoding, Output, Source, Variant
from attncli.cli.requests import request_of

KeepOpt = Annotated[str | None, typer.Option(
    help="With --model: evict keys from every layer's cache, keeping the latest W (window:W) "
    "and the first S (sinks:S,window:W); prints perplexity and top-1 agreement beside the full "
    "cache (StreamingLLM).", metavar="[sinks:S,]window:W", show_default=False)]


@command()
def permute(
    text_a: Annotated[str, typer.Argument(metavar="TEXT_A", help="The first text.")],
    text_b: Annotated[str, typer.Argument(metavar="TEXT_B", help="The same tokens reordered.")],
    encoding: Encoding,
    settings: Annotated[Chapter3, Fields("seed", "emb_dim", "d_out", "heads", "qkv_bias")],
    checkpoint: Annotated[Checkpoint, Fields("model", "layer")],
    shown: Annotated[Shown, Fields("precision", "lang")],
    output: Output,
    variant: Annotated[Variant, typer.Option(
        "--variant", "-v", help="Attention variant (qkv has no mask).")] = Variant.qkv,
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
    from attncli.core.request import Route
    from attncli.lessons.permute import permute_lesson
    from attncli.render.lessons.permute import render_permute

    output.check()
    # A checkpoint takes its layer and --allow-special; the chapter-3 settings go to a variant.
    spec = request_of((text_a, None), checkpoint, allow_special=encoding.allow_special)
    if spec.route is Route.chapter3:
        spec = request_of((text_a, None), encoding, settings, variant=variant)
    result = permute_lesson(spec, text_a, text_b)
    output.deliver_result(result, render_permute, shown.language(), shown.precision)


@command()
def kvcache(source: Source, checkpoint: Annotated[Checkpoint, Fields("model", "layer")],
            encoding: Encoding, settings: Settings, shown: Shown, output: Output,
            keep: KeepOpt = None) -> None:
    """Decode token by token with a key/value cache, each step checked against the full pass.

    Per step: the query's weights over the cache, the cache's length and bytes, and the
    multiply-adds with the cache and without it. Causal variants, or with --model a GPT-2 or
    Llama-family checkpoint (its cache holds kv_heads per layer: what GQA saves).

    Examples:

      attncli kvcache "Your journey starts with one step"

      attncli kvcache "..." --variant multihead --num-heads 2 --json | jq .totals

      attncli kvcache "The cat sat on the mat" --model samples/toy-gpt2 --layer -1

      attncli kvcache --file samples/streaming.txt --model M.gguf --keep sinks:4,window:64
    """
    from attncli.lessons.kvcache import kvcache_lesson
    from attncli.lessons.streaming import check_keep, streaming_model
    from attncli.render.lessons.kvcache import render_kvcache
    from attncli.render.lessons.streaming import render_streaming

    output.check()
    kept = None if keep is None else check_keep(keep, checkpoint.model, checkpoint.layer,
                                                output.page(), shown.head)
    spec = request_of(source.read(), checkpoint, encoding, settings)
    if kept is not None:
        output.deliver_result(streaming_model(spec, *kept), render_streaming, shown.language())
    else:
        output.deliver_result(kvcache_lesson(spec, shown.head), render_kvcache, shown.language(),
                              shown.precision, shown.head)


@command()
def flash(
    source: Source,
    encoding: Encoding,
    settings: Settings,
    shown: Shown,
    output: Output,
    block: Annotated[int, typer.Option(help="Keys per block.")] = 4,
    query: Annotated[int | None, typer.Option(
        help="The query shown, 0-based; negative counts from the end [default: the last].",
        show_default=False, metavar="I")] = None,
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
    from attncli.lessons.flash import flash_lesson
    from attncli.render.lessons.flash import render_flash

    output.check()
    result = flash_lesson(request_of(source.read(), encoding, settings), block, query, shown.head)
    output.deliver_result(result, render_flash, shown.language(), shown.precision)


@command()
def cost(
    settings: Annotated[Chapter3, Fields("seed")],
    shown: Annotated[Shown, Fields("lang")],
    output: Output,
    sizes: Sizes,
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

      attncli cost --max-tokens 16384 --num-heads 4 --emb-dim 256

      attncli cost --json | jq .fit
    """
    from attncli.lessons.cost import cost as run_cost
    from attncli.render.lessons.cost import render_cost

    output.check()
    result = run_cost(sizes.max_tokens, sizes.heads, sizes.emb_dim, settings.seed)
    output.deliver_result(result, render_cost, shown.language())
