"""One generation, start to end: the prompt built, the answer decoded step by step (each
token handed to on_token as it comes), and tensors turned into the plain result."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from attncli.activity import counted, doing
from attncli.core.result import TokenInfo
from attncli.errors import AttnCliError
from attncli.models.family import Model, Tokens, open_model
from attncli.models.generate.engine import Step, decode
from attncli.models.generate.prompt import Prompt, build_prompt
from attncli.models.generate.sampling import Sampling, with_seed
from attncli.models.predict import token_texts
from attncli.records.generation import GenerationResult


@dataclass(frozen=True)
class Keep:
    """Which weights the result keeps: layers [a, b) and one head, or all of them."""

    layers: tuple[int, int] | None = None
    head: int | None = None
    json: bool = False  # the weights go into a JSON: its size is checked against its budget


GREEDY = Sampling()
ALL = Keep()


def generate_model(model_path: str, prompt: str, sampling: Sampling = GREEDY,
                   system: str | None = None, raw: bool = False, keep: Keep = ALL,
                   on_token: Callable[[TokenInfo], None] | None = None,
                   allow_special: bool = False) -> GenerationResult:
    """The model's answer to prompt, and every step's weights from its own decode step.

    Ctrl-C during decoding keeps the tokens written so far (stopped: interrupted); before the
    first token it propagates.
    """
    model = open_model(model_path)
    if system is not None and raw:
        raise AttnCliError("--system goes into the chat template, and --raw sends the prompt "
                           "without it: use one of them")
    built = build_prompt(model, model_path, prompt, system, raw, allow_special)
    sampling = with_seed(sampling)
    _check_keep(model, keep)
    if keep.json:
        check_json_size(model, len(built.ids), sampling.max_new_tokens, keep)
    texts = token_texts(model_path, Tokens(built.tokens, built.ids, None if
                                           model.vocabulary() is not None else "gpt2", None))
    steps: list[Step] = []
    answer: list[TokenInfo] = []
    stopped = "max_new_tokens"
    doing(f"reading the prompt: {len(built.ids):,} tokens")
    try:
        for step in decode(model, built.ids, sampling, built.stop_ids):
            counted("answer tokens", len(steps) + 1, sampling.max_new_tokens)
            steps.append(step)
            answer.append(_info(texts(step.token_id), len(built.ids) + len(answer)))
            if on_token is not None:
                on_token(answer[-1])
            if step.token_id in built.stop_ids:
                stopped = "eos"
    except KeyboardInterrupt:
        if not steps:
            raise
        stopped = "interrupted"
    return _result(model, built, sampling, keep, steps, answer, stopped, texts)


def _check_keep(model: Model, keep: Keep) -> None:
    n, heads = model.spec.n_layer, model.spec.num_heads
    if keep.layers is not None and not 0 <= keep.layers[0] < keep.layers[1] <= n:
        raise AttnCliError(f"--layers {keep.layers[0]}:{keep.layers[1]} is outside the model's "
                           f"{n} layers (0:{n})")
    if keep.head is not None and not 0 <= keep.head < heads:
        raise AttnCliError(f"--head {keep.head} is outside the model's {heads} heads "
                           f"(0 to {heads - 1})")


def check_json_size(model: Model, prompt_len: int, max_new: int, keep: Keep) -> None:
    """Refuse, before any decoding, a JSON whose weights would pass its budget: step s keeps
    layers × heads × (prompt_len + s) weights."""
    from attncli.core.sizes import check_json_budget

    a, b = keep.layers or (0, model.spec.n_layer)
    heads = model.spec.num_heads if keep.head is None else 1
    keys = max_new * prompt_len + max_new * (max_new - 1) // 2  # Σ over steps of P + s
    check_json_budget((b - a) * heads * keys,
                      f"{b - a} layers × {heads} head{'s' if heads > 1 else ''} over {max_new:,} "
                      f"steps after a {prompt_len:,}-token prompt",
                      "keep fewer with --layers A:B and --head H, or write fewer tokens with "
                      "--max-new-tokens")


def _info(record: dict[str, object], index: int) -> TokenInfo:
    """A vocabulary record ({"id", "text", "bytes"?}) as the token at index."""
    data = record.get("bytes")
    return TokenInfo(index, int(record["id"]), str(record["text"]),  # type: ignore[call-overload]
                     data if isinstance(data, str) else None)


def _result(model: Model, built: Prompt, sampling: Sampling, keep: Keep, steps: list[Step],
            answer: list[TokenInfo], stopped: str,
            texts: Callable[[int], dict[str, object]]) -> GenerationResult:
    a, b = keep.layers or (0, model.spec.n_layer)
    heads = slice(None) if keep.head is None else slice(keep.head, keep.head + 1)
    records = [{"index": s, "position": step.position, "id": step.token_id, "prob": step.prob,
                "top": [{**texts(i), "prob": p}
                        for i, p in zip(step.top_ids, step.top_probs, strict=True)]}
               for s, step in enumerate(steps)]
    template = {"used": built.templated, "origin": built.origin}
    return GenerationResult(
        model=model.info(), prompt=built.tokens, answer=answer, given=built.given,
        template=template, sampling=sampling.to_dict(), stop_ids=sorted(built.stop_ids),
        stopped=stopped, sinks=built.sinks, steps=records,
        weights=[step.weights[a:b, heads] for step in steps],
        layers_kept=keep.layers, head_kept=keep.head)
