"""One generation, start to end: the prompt built, the answer decoded step by step (each
token handed to on_token as it comes), and tensors turned into the plain result."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from attncli.activity import counted, doing, reached, spent, whole
from attncli.core.result import TokenInfo
from attncli.errors import AttnCliError
from attncli.models.decoding import DecodeStep
from attncli.models.family import Model, Tokens, open_model
from attncli.models.generate.engine import Step, cached_norms, decode
from attncli.models.generate.given import check_answer, teacher_forced
from attncli.models.generate.occlusion import looks, occlusion, spans_of
from attncli.models.generate.prompt import Prompt, answer_ids, build_prompt
from attncli.models.generate.receipt import answer_of, compare
from attncli.models.generate.sampling import Sampling, with_seed
from attncli.models.predict import token_texts
from attncli.opt import said
from attncli.records.asking import AUTO, AUTO_LOOKS, FLOAT32, GenerationRequest
from attncli.records.generation import AnswerStep, Candidate, GenerationResult
from attncli.records.given import Occluded

GREEDY = Sampling()


def generate_model(request: GenerationRequest,
                   on_token: Callable[[TokenInfo], None] | None = None) -> GenerationResult:
    """The model's answer to the request's prompt (or messages), or its given answer
    teacher-forced, and every step's weights, from its own decode step or the one pass, in the
    request's numerics (llama.cpp's: a GGUF's only).

    Ctrl-C during decoding keeps the tokens written so far (stopped: interrupted); before the
    first token it propagates. Ctrl-C while the views are made after the answer keeps the answer
    and its raw weights (without_views); after one that stopped the decoding, it propagates.
    """
    if request.numerics == FLOAT32:
        return _generate(request, on_token)
    from attncli.models.sources.formats import is_gguf
    from attncli.models.sources.gguf import qmatmul
    from attncli.models.stores.locate import resolve_path

    asked = said(f"--numerics {request.numerics}", f"numerics={request.numerics!r}")
    if not is_gguf(resolve_path(request.model)):
        raise AttnCliError(f"{asked} computes on a GGUF's quantized blocks, as llama.cpp does: "
                           f"{request.model!r} is not a GGUF file (its products are float32's)")
    if not qmatmul.ENABLED:  # every product would be float32's, under llama.cpp's name
        raise AttnCliError(f"{asked} computes in attncli's quantized matmul C extension, which "
                           "is off here (ATTNCLI_QMATMUL=0 or ATTNCLI_FUSED=0 in the environment, "
                           "or a build without a C compiler: `attncli doctor` says which)")
    with qmatmul.llama_cpp_numerics():
        result = _generate(request, on_token)
    return replace(result, numerics=request.numerics)


def _generate(request: GenerationRequest,
              on_token: Callable[[TokenInfo], None] | None) -> GenerationResult:
    model = open_model(request.model)
    built = build_prompt(model, request.model, request.prompt, request.system, request.raw,
                         request.allow_special, request.messages)
    sampling = with_seed(request.sampling)
    _check_keep(model, request)
    source = model.vocabulary()  # None: tiktoken's GPT-2
    texts = token_texts(request.model, Tokens(built.tokens, built.ids, None if source is not None
                                              else "gpt2", None), source)
    if request.reported is not None and request.answer is None:
        request = replace(request, answer=answer_of(request.reported))
    if request.answer is not None:
        return _given(model, built, request, texts)
    if request.json:
        check_json_size(model, len(built.ids), sampling.max_new_tokens, request)
    steps: list[Step] = []
    answer: list[TokenInfo] = []
    stopped = "max_new_tokens"
    decoders: list[DecodeStep] = []  # the one decoder, whose caches give the value norms
    doing(f"reading the prompt: {len(built.ids):,} tokens")
    try:
        for step in decode(model, built.ids, sampling, built.stop_ids,
                           on_decoder=decoders.append):
            counted("answer tokens", len(steps) + 1, sampling.max_new_tokens)
            info = _info(texts(step.token_id), len(built.ids) + len(answer))
            stop = step.token_id in built.stop_ids
            with whole():  # kept and streamed together: a Ctrl-C lands before or after both
                steps.append(step)
                answer.append(info)
                if on_token is not None and not stop:
                    on_token(info)  # the answer's text: the stop token is no part of it
            if stop:
                stopped = "eos"
    except KeyboardInterrupt:
        if not steps:
            raise
        spent()  # this Ctrl-C stopped the answer; one more while the views are made ends the run
        stopped = "interrupted"
    result = _result(model, built, sampling, request, steps, answer, stopped, texts)
    return _with_views(model, built, result, request, decoders[0] if decoders else None)


def without_views(result: GenerationResult) -> GenerationResult:
    """result as a Ctrl-C while its views were made leaves it: the answer and its raw weights,
    no value norms or occlusion drops."""
    return replace(result, view="raw", norms=None, occlusion=None, occluded=None)


def _given(model: Model, built: Prompt, request: GenerationRequest,
           texts: Callable[[int], dict[str, object]]) -> GenerationResult:
    """request.answer teacher-forced after the prompt: one pass, no generation."""
    assert request.answer is not None, "a given answer"
    ids = answer_ids(model, request.model, request.answer, request.allow_special)
    check_answer(model, built.ids, ids)
    if request.json:
        check_json_size(model, len(built.ids), len(ids), request)
    doing(f"reading the prompt and the given answer: {len(built.ids) + len(ids):,} tokens")
    forced = teacher_forced(model, built.ids, ids)
    answer = [_info(texts(i), len(built.ids) + s) for s, i in enumerate(ids)]
    result = _result(model, built, GREEDY, request, forced.steps, answer, "given", texts)
    result = replace(result, given_answer=True, norms=forced.norms if request.norms else None)
    if request.reported is not None:
        pieces = [bytes.fromhex(t.bytes_hex) if t.bytes_hex is not None
                  else t.text.encode("utf-8") for t in answer]
        result = replace(result, receipt=compare(
            request.reported, pieces, [s.logprob for s in forced.steps],
            [_spelt(texts(s.top_ids[0])) for s in forced.steps]))
    return _with_views(model, built, result, request)


def _with_views(model: Model, built: Prompt, result: GenerationResult,
                request: GenerationRequest,
                decoder: DecodeStep | None = None) -> GenerationResult:
    """_views, where a Ctrl-C while they are made keeps the answer without them
    (without_views); after a Ctrl-C that stopped the decoding, it propagates."""
    try:
        reached("views")
        return _views(model, built, result, request, decoder)
    except KeyboardInterrupt:
        if result.stopped == "interrupted":  # a second Ctrl-C: the first one stopped the answer
            raise
        return without_views(result)


def _views(model: Model, built: Prompt, result: GenerationResult, request: GenerationRequest,
           decoder: DecodeStep | None) -> GenerationResult:
    """result with the value norms and the occlusion drops the request needs (the norms from
    the decoder's caches where it has them, else one more pass; one masked pass per span of the
    prompt, batched), and the view they serve. The default view (auto) is decided here, once
    the text is known: occlusion where its passes take at most AUTO_LOOKS looks and no layer or
    head was asked for, else value."""
    ids = [t.id for t in result.answer if t.id is not None]
    view = request.view
    occluded = view in (AUTO, "occlusion") or "occlusion" in request.also
    spans = spans_of(request.occlude, built.tokens, built.sinks, result.turns) if occluded else []
    if view == AUTO:
        cost = looks(spans, len(built.ids) + len(ids))
        view = "raw" if not ids else "value" if request.narrowed or cost > AUTO_LOOKS \
            else "occlusion"
        result = replace(result, auto_looks=cost)
    result = replace(result, view=view)
    if not ids:
        return result
    if request.norms and result.norms is None and decoder is not None:
        doing(f"the value view: each of {model.spec.n_layer} layers' values through its W_O")
        result = replace(result, norms=cached_norms(decoder, built.ids + ids))
    if request.norms and result.norms is None:
        doing(f"the value view: one more pass over {len(built.ids) + len(ids):,} tokens")
        result = replace(result, norms=teacher_forced(model, built.ids, ids).norms)
    if view == "occlusion" or "occlusion" in request.also:
        result = replace(result, occlusion=occlusion(model, built.ids, ids, spans),
                         occluded=Occluded(request.occlude, spans))
    return result


def _kept(model: Model, request: GenerationRequest) -> tuple[int, int]:
    """The layers [a, b) the result holds of model's: those shown, unless it keeps all."""
    n = model.spec.n_layer
    return (0, n) if request.layers is None or request.keep_all else \
        request.layers.resolve(n, "layers")


def _head_kept(request: GenerationRequest) -> int | None:
    """The one head the result holds (None: every head)."""
    return None if request.keep_all else request.head


def _check_keep(model: Model, request: GenerationRequest) -> None:
    heads = model.spec.num_heads
    _kept(model, request)
    if request.head is not None and not 0 <= request.head < heads:
        raise AttnCliError(f"--head {request.head} is outside the model's {heads} heads "
                           f"(0 to {heads - 1})")


# `generate --json`: a float32 weight as JSON text ("0.012345678, ", "1.2345678e-05, ") is at
# most 16 bytes, and the whole JSON is held to a budget, past which it is refused before the run.
JSON_WEIGHT_TEXT = 16
GENERATE_JSON_BUDGET = 256 * 10**6


def check_json_size(model: Model, prompt_len: int, max_new: int,
                    request: GenerationRequest) -> None:
    """Refuse, before any decoding, a JSON whose weights' text would pass its budget: step s
    keeps layers × heads × (prompt_len + s) weights."""
    from attncli.machine import size_text

    a, b = _kept(model, request)
    heads = model.spec.num_heads if _head_kept(request) is None else 1
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


def _result(model: Model, built: Prompt, sampling: Sampling, request: GenerationRequest,
            steps: list[Step], answer: list[TokenInfo], stopped: str,
            texts: Callable[[int], dict[str, object]]) -> GenerationResult:
    a, b = _kept(model, request)
    head = _head_kept(request)
    heads = slice(None) if head is None else slice(head, head + 1)
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
        layers_kept=None if request.layers is None or request.keep_all else (a, b),
        head_kept=head,
        turns=list(built.turns))
