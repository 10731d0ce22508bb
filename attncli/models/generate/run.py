"""One generation, start to end: the prompt built, the answer decoded step by step (each
token handed to on_token as it comes), and tensors turned into the plain result."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from attncli.activity import counted, doing
from attncli.core.display import Window
from attncli.core.result import TokenInfo
from attncli.errors import AttnCliError
from attncli.models.family import Model, Tokens, open_model
from attncli.models.generate.engine import Step, decode
from attncli.models.generate.given import check_answer, teacher_forced
from attncli.models.generate.occlusion import looks, occlusion, spans_of
from attncli.models.generate.prompt import Prompt, answer_ids, build_prompt
from attncli.models.generate.receipt import Reported, answer_of, compare
from attncli.models.generate.sampling import Sampling, with_seed
from attncli.models.predict import token_texts
from attncli.records.asking import AUTO, AUTO_LOOKS
from attncli.records.generation import AnswerStep, Candidate, GenerationResult
from attncli.records.given import Occluded


@dataclass(frozen=True)
class Keep:
    """Which weights the result keeps: --layers (a window of the model's layers) and one head,
    or all of them."""

    layers: Window | None = None
    head: int | None = None
    json: bool = False  # the weights go into a JSON: its size is checked against its budget


GREEDY = Sampling()
ALL = Keep()


@dataclass(frozen=True)
class Asked:
    """What the model is asked besides the prompt: a conversation, a given answer to explain
    instead of its own, and the views beyond raw weights the result must hold."""

    messages: list[dict[str, Any]] | None = None  # a chat, rendered by the template
    answer: str | None = None  # teacher-forced in one pass, no generation
    norms: bool = False  # keep ‖W_O v‖ per head and key, for the value view
    occlusion: bool = False  # one masked pass per prompt span, for the occlusion view
    reported: list[Reported] | None = None  # a runtime's log-probs: the receipt (and answer)
    # the view asked for: raw, value, occlusion or auto (decided in _with_views), the one made
    # recorded in the result (show draws it again)
    view: str = "raw"
    occlude: str = "word"  # what occlusion masks together: token, word or turn
    # --layers, --head or --combine given: auto shows value, since they choose among
    # attention's layers and heads, which occlusion (the whole model) has none of
    attention: bool = False


NOTHING_MORE = Asked()


def generate_model(model_path: str, prompt: str, sampling: Sampling = GREEDY,
                   system: str | None = None, raw: bool = False, keep: Keep = ALL,
                   on_token: Callable[[TokenInfo], None] | None = None,
                   allow_special: bool = False, asked: Asked = NOTHING_MORE) -> GenerationResult:
    """The model's answer to prompt (or asked's messages), or asked's given answer
    teacher-forced, and every step's weights, from its own decode step or the one pass.

    Ctrl-C during decoding keeps the tokens written so far (stopped: interrupted); before the
    first token it propagates.
    """
    model = open_model(model_path)
    if system is not None and (raw or asked.messages is not None):
        raise AttnCliError("--system goes into the chat template, and --raw sends the prompt "
                           "without it: use one of them" if raw else "--messages holds the "
                           "system turn: give it there, not with --system")
    built = build_prompt(model, model_path, prompt, system, raw, allow_special, asked.messages)
    sampling = with_seed(sampling)
    _check_keep(model, keep)
    source = model.vocabulary()  # None: tiktoken's GPT-2
    texts = token_texts(model_path, Tokens(built.tokens, built.ids, None if source is not None
                                           else "gpt2", None), source)
    if asked.reported is not None and asked.answer is None:
        asked = replace(asked, answer=answer_of(asked.reported))
    if asked.answer is not None:
        return _given(model, model_path, built, asked, keep, texts, allow_special)
    if keep.json:
        check_json_size(model, len(built.ids), sampling.max_new_tokens, keep)
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
    result = _result(model, built, sampling, keep, steps, answer, stopped, texts)
    return _with_views(model, built, result, asked)


def _given(model: Model, model_path: str, built: Prompt, asked: Asked, keep: Keep,
           texts: Callable[[int], dict[str, object]], allow_special: bool) -> GenerationResult:
    """asked.answer teacher-forced after the prompt: one pass, no generation."""
    assert asked.answer is not None, "a given answer"
    ids = answer_ids(model, model_path, asked.answer, allow_special)
    check_answer(model, built.ids, ids)
    if keep.json:
        check_json_size(model, len(built.ids), len(ids), keep)
    doing(f"reading the prompt and the given answer: {len(built.ids) + len(ids):,} tokens")
    forced = teacher_forced(model, built.ids, ids)
    answer = [_info(texts(i), len(built.ids) + s) for s, i in enumerate(ids)]
    result = _result(model, built, GREEDY, keep, forced.steps, answer, "given", texts)
    result = replace(result, given_answer=True, norms=forced.norms if asked.norms else None)
    if asked.reported is not None:
        pieces = [bytes.fromhex(t.bytes_hex) if t.bytes_hex is not None
                  else t.text.encode("utf-8") for t in answer]
        result = replace(result, receipt=compare(
            asked.reported, pieces, [s.logprob for s in forced.steps],
            [_spelt(texts(s.top_ids[0])) for s in forced.steps]))
    return _with_views(model, built, result, replace(asked, norms=False))


def _with_views(model: Model, built: Prompt, result: GenerationResult,
                asked: Asked) -> GenerationResult:
    """result with the value norms and the occlusion drops asked for (one more pass, or one
    masked pass per span of the prompt, batched), and the view they serve. The default view
    (auto) is decided here, once the text is known: occlusion where its passes take at most
    AUTO_LOOKS looks and no layer or head was asked for, else value."""
    ids = [t.id for t in result.answer if t.id is not None]
    spans = (spans_of(asked.occlude, built.tokens, built.sinks, result.turns)
             if asked.view == AUTO or asked.occlusion else [])
    if asked.view == AUTO:
        cost = looks(spans, len(built.ids) + len(ids))
        chosen = "raw" if not ids else "value" if asked.attention or cost > AUTO_LOOKS \
            else "occlusion"
        asked = replace(asked, view=chosen, occlusion=chosen == "occlusion",
                        norms=asked.norms or (chosen == "value" and result.norms is None))
        result = replace(result, auto_looks=cost)
    result = replace(result, view=asked.view)
    if not ids:
        return result
    if asked.norms:
        result = replace(result, norms=teacher_forced(model, built.ids, ids).norms)
    if asked.occlusion:
        result = replace(result, occlusion=occlusion(model, built.ids, ids, spans),
                         occluded=Occluded(asked.occlude, spans))
    return result


def _kept(model: Model, keep: Keep) -> tuple[int, int]:
    """The layers [a, b) keep holds of model's."""
    n = model.spec.n_layer
    return (0, n) if keep.layers is None else keep.layers.resolve(n, "layers")


def _check_keep(model: Model, keep: Keep) -> None:
    heads = model.spec.num_heads
    _kept(model, keep)
    if keep.head is not None and not 0 <= keep.head < heads:
        raise AttnCliError(f"--head {keep.head} is outside the model's {heads} heads "
                           f"(0 to {heads - 1})")


# `generate --json`: a float32 weight as JSON text ("0.012345678, ", "1.2345678e-05, ") is at
# most 16 bytes, and the whole JSON is held to a budget, past which it is refused before the run.
JSON_WEIGHT_TEXT = 16
GENERATE_JSON_BUDGET = 256 * 10**6


def check_json_size(model: Model, prompt_len: int, max_new: int, keep: Keep) -> None:
    """Refuse, before any decoding, a JSON whose weights' text would pass its budget: step s
    keeps layers × heads × (prompt_len + s) weights."""
    from attncli.core.sizes import size_text

    a, b = _kept(model, keep)
    heads = model.spec.num_heads if keep.head is None else 1
    keys = max_new * prompt_len + max_new * (max_new - 1) // 2  # Σ over steps of P + s
    cells = (b - a) * heads * keys
    if cells * JSON_WEIGHT_TEXT > GENERATE_JSON_BUDGET:
        raise AttnCliError(f"{b - a} layers × {heads} head{'s' if heads > 1 else ''} over "
                           f"{max_new:,} steps after a {prompt_len:,}-token prompt would put up "
                           f"to {cells:,} weights (about {size_text(cells * JSON_WEIGHT_TEXT)}) "
                           f"in the JSON, past its {size_text(GENERATE_JSON_BUDGET)} budget; "
                           "keep fewer with --layers A:B and --head H, or write fewer tokens "
                           "with --max-new-tokens")


def _spelt(record: dict[str, object]) -> str:
    """A vocabulary record's text as a runtime writes it (its bytes, not attncli's label, which
    shows a newline as \\n and a lone space as ␣)."""
    data = record.get("bytes")
    return bytes.fromhex(data).decode("utf-8", "replace") if isinstance(data, str) \
        else str(record["text"])


def _info(record: dict[str, object], index: int) -> TokenInfo:
    """A vocabulary record ({"id", "text", "bytes"?}) as the token at index."""
    data = record.get("bytes")
    return TokenInfo(index, int(record["id"]), str(record["text"]),  # type: ignore[call-overload]
                     data if isinstance(data, str) else None)


def _candidate(record: dict[str, object], prob: float) -> Candidate:
    """A vocabulary record ({"id", "text", "bytes"?}) as a step's candidate."""
    data = record.get("bytes")
    return Candidate(int(record["id"]), str(record["text"]), prob,  # type: ignore[call-overload]
                     data if isinstance(data, str) else None)


def _result(model: Model, built: Prompt, sampling: Sampling, keep: Keep, steps: list[Step],
            answer: list[TokenInfo], stopped: str,
            texts: Callable[[int], dict[str, object]]) -> GenerationResult:
    a, b = _kept(model, keep)
    heads = slice(None) if keep.head is None else slice(keep.head, keep.head + 1)
    records = [AnswerStep(s, step.position, step.token_id, step.prob,
                          [_candidate(texts(i), p)
                           for i, p in zip(step.top_ids, step.top_probs, strict=True)],
                          step.logprob, step.rank)
               for s, step in enumerate(steps)]
    return GenerationResult(
        model=model.info(), prompt=built.tokens, answer=answer, given=built.given,
        template=built.template, sampling=sampling, stop_ids=sorted(built.stop_ids),
        stopped=stopped, sinks=built.sinks, steps=records,
        weights=[step.weights[a:b, heads] for step in steps],
        layers_kept=None if keep.layers is None else (a, b), head_kept=keep.head,
        turns=list(built.turns))
