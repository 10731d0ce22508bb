"""A given answer, teacher-forced, on tiny random checkpoints against transformers: each step's
weights are rows of transformers' full forward over prompt + answer and its log-probabilities
that forward's log-softmax; a greedy answer given back equals generate's own steps; the value
norms equal ‖W_O^h v_j^h‖ computed from transformers' value vectors and o_proj; occlusion
equals transformers' forward with the span's keys masked, batched or not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from attncli.errors import AttnCliError
from attncli.models.family import open_model
from attncli.models.generate import occlusion as occlusion_module
from attncli.models.generate.engine import decode
from attncli.models.generate.given import check_answer, teacher_forced
from attncli.models.generate.occlusion import masked, occlusion
from attncli.models.generate.sampling import Sampling
from tests.gguf_fixtures import smollm2
from tests.models.generate.conftest import CASES
from tests.tolerance import assert_near

PROMPT = [5, 71, 200, 13, 97, 150, 31]
ANSWER = [260, 8, 120, 44, 9]  # ids inside every tiny vocabulary (≥ 320)


def _hf_forward(hf: Any, ids: list[int], mask: torch.Tensor | None = None) -> Any:
    kwargs: dict[str, Any] = {}
    if mask is not None:  # (1, 1, T, T) additive: 0 where a query may look, -inf elsewhere
        kwargs["attention_mask"] = torch.where(mask, 0.0, -torch.inf)[None, None]
    with torch.no_grad():
        return hf(torch.tensor([ids]), output_attentions=True, **kwargs)


@pytest.mark.parametrize("name", CASES)
def test_steps_are_rows_of_transformers_full_forward(models: dict[str, tuple[Path, Any]],
                                                     name: str) -> None:
    folder, hf = models[name]
    forced = teacher_forced(open_model(str(folder)), PROMPT, ANSWER)
    out = _hf_forward(hf, PROMPT + ANSWER)
    logprobs = torch.log_softmax(out.logits[0].double(), dim=-1)  # (T, vocab)
    p = len(PROMPT)
    for s, step in enumerate(forced.steps):
        assert step.token_id == ANSWER[s] and step.position == p - 1 + s
        ref = torch.stack([a[0, :, p - 1 + s, :p + s] for a in out.attentions])  # (L, H, P+s)
        assert_near(torch.from_numpy(step.weights), ref)
        want = logprobs[p - 1 + s]
        # the bound this test has always used: 1e-5 flat, no relative part
        assert_near(step.logprob, float(want[ANSWER[s]]), rtol=0)
        assert step.rank == 1 + int((want > want[ANSWER[s]]).sum())
        assert step.top_ids[0] == int(want.argmax())


@pytest.mark.parametrize("name", CASES)
def test_a_greedy_answer_given_back_equals_generates_own_steps(
        models: dict[str, tuple[Path, Any]], name: str) -> None:
    folder, _ = models[name]
    model = open_model(str(folder))
    made = list(decode(model, PROMPT, Sampling(max_new_tokens=6), frozenset()))
    forced = teacher_forced(model, PROMPT, [s.token_id for s in made])
    for own, given in zip(made, forced.steps, strict=True):
        assert given.rank == 1 and own.token_id == given.token_id
        assert_near(torch.from_numpy(given.weights), torch.from_numpy(own.weights))
        # the bound this test has always used: 1e-5 flat, no relative part
        assert_near(own.logprob, given.logprob, rtol=0)
        assert given.top_ids[0] == own.top_ids[0]


def test_value_norms_equal_transformers_values_through_o_proj(
        models: dict[str, tuple[Path, Any]]) -> None:
    folder, hf = models["qwen2"]  # grouped-query attention: each kv head read by 2 heads
    values: list[torch.Tensor] = []
    hooks = [layer.self_attn.v_proj.register_forward_hook(
        lambda _m, _i, y: values.append(y[0])) for layer in hf.model.layers]
    try:
        _hf_forward(hf, PROMPT + ANSWER)
    finally:
        for hook in hooks:
            hook.remove()
    config = hf.config
    head_dim = config.hidden_size // config.num_attention_heads
    group = config.num_attention_heads // config.num_key_value_heads
    forced = teacher_forced(open_model(str(folder)), PROMPT, ANSWER)
    for layer, v in enumerate(values):
        w_o = hf.model.layers[layer].self_attn.o_proj.weight  # (d_model, heads · hd)
        for h in range(config.num_attention_heads):
            v_h = v[:, (h // group) * head_dim:(h // group + 1) * head_dim]  # (T, hd)
            ref = (v_h @ w_o[:, h * head_dim:(h + 1) * head_dim].T).norm(dim=-1)  # (T,)
            assert_near(torch.from_numpy(forced.norms[layer, h]), ref)


@pytest.mark.parametrize("spans", [[[j] for j in range(1, len(PROMPT))],  # each token
                                   [[1, 2], [5, 6], [3, 4]]])  # words: tokens masked together
@pytest.mark.parametrize("name", ["llama", "qwen2", "gpt2"])
def test_occlusion_equals_masking_the_span_in_transformers(models: dict[str, tuple[Path, Any]],
                                                           name: str,
                                                           spans: list[list[int]]) -> None:
    folder, hf = models[name]  # llama, qwen2: the batched passes from the span; gpt2: one each
    drops = occlusion(open_model(str(folder)), PROMPT, ANSWER, spans)
    p, a = len(PROMPT), len(ANSWER)
    causal = torch.ones(p + a, p + a, dtype=torch.bool).tril()  # (T, T)
    rows = slice(p - 1, p + a - 1)
    chosen = torch.tensor(ANSWER)[:, None]

    def logprobs(mask: torch.Tensor) -> torch.Tensor:
        logits = _hf_forward(hf, PROMPT + ANSWER, mask).logits[0, rows].double()  # (A, vocab)
        return torch.log_softmax(logits, dim=-1).gather(1, chosen)[:, 0]  # (A,)

    base = logprobs(causal)
    assert all(row[0] == 0.0 for row in drops)  # in no span: not masked
    assert max(abs(v) for row in drops for v in row) > 1e-3  # masking changed something
    for span in spans:
        want = base - logprobs(causal & masked(p + a, span))
        for j in span:  # every token of the span holds the span's drop
            assert_near(torch.tensor([row[j] for row in drops], dtype=torch.float64), want,
                        atol=2e-5)  # a difference of two log-probs: twice the bound


def test_occlusion_in_batches_of_one_equals_one_batch(models: dict[str, tuple[Path, Any]],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    model = open_model(str(models["llama"][0]))
    spans = [[4, 5], [1], [2, 3], [6]]  # taken by first token: each batch from its own start
    together = occlusion(model, PROMPT, ANSWER, spans)
    monkeypatch.setattr(occlusion_module, "BATCH_ROWS", 1)  # one span a batch
    apart = occlusion(model, PROMPT, ANSWER, spans)
    assert_near(torch.tensor(apart), torch.tensor(together), atol=2e-5)  # two log-probs apart


def test_an_empty_answer_or_one_past_the_positions_is_one_line(
        models: dict[str, tuple[Path, Any]]) -> None:
    model = open_model(str(models["gpt2"][0]))  # 64 positions
    with pytest.raises(AttnCliError, match="the answer is empty"):
        teacher_forced(model, PROMPT, [])
    with pytest.raises(AttnCliError, match="64 positions"):
        teacher_forced(model, PROMPT, [5] * 60)


@pytest.mark.parametrize("name", ["llama", "smollm2"])
def test_an_answer_past_a_rope_models_positions_is_refused(models: dict[str, tuple[Path, Any]],
                                                          name: str) -> None:
    """A RoPE family has no fixed limit (traits.max_tokens None); the checkpoint's positions
    (max_position_embeddings, GGUF's context_length) bound a given answer as they bound
    generate's: SmolLM2 given 13,206 prompt tokens and an answer went on to the one pass's
    (heads, T, T) weights, 6.3 GB, and out of memory."""
    model = open_model(str(smollm2() if name == "smollm2" else models[name][0]))
    limit = model.spec.positions
    assert model.traits.max_tokens is None and limit is not None
    with pytest.raises(AttnCliError, match=f"go past the model's {limit:,} positions"):
        check_answer(model, [5] * (limit - 1), [9, 9])
    check_answer(model, [5] * (limit - 2), [9, 9])  # the last position is still the model's


def test_under_llama_cpp_numerics_a_given_answer_is_read_as_decode_reads_it(
        tmp_path: Path) -> None:
    # The one pass kept keys, values and weights float32 where decode's cache rounds them to
    # float16: SmolLM2's own greedy answer given back was up to 0.2 nats from its steps.
    import gguf

    from attncli.models.generate.engine import cached_norms
    from attncli.models.sources.gguf.qmatmul import llama_cpp_numerics
    from tests.gguf_fixtures import write_k_llama

    path = tmp_path / "tiny-Q4_K.gguf"
    write_k_llama(path, gguf.GGMLQuantizationType.Q4_K, seed=3)
    model = open_model(str(path))
    decoders: list[Any] = []
    with llama_cpp_numerics():
        made = list(decode(model, PROMPT, Sampling(max_new_tokens=6), frozenset(),
                           on_decoder=decoders.append))
        ids = [s.token_id for s in made]
        forced = teacher_forced(model, PROMPT, ids)
        norms = cached_norms(decoders[0], PROMPT + ids)
    assert norms is not None and forced.norms.shape == norms.shape
    assert (forced.norms == norms).all()
    for own, given in zip(made, forced.steps, strict=True):
        assert (own.token_id, own.position, own.logprob, own.rank, own.top_ids) == (
            given.token_id, given.position, given.logprob, given.rank, given.top_ids)
        assert (own.weights == given.weights).all()


def test_the_pass_keeps_no_layers_whole_weights(models: dict[str, tuple[Path, Any]],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Each layer's (heads, T, T) weights are let go once its answer rows are copied: a slice of
    them alone (and .float() of float32 is the tensor itself) kept every layer's, 5.8 GB at
    SmolLM2's 2,000 tokens where the pass needs 1.8."""
    import gc
    import weakref

    model = open_model(str(models["llama"][0]))
    alive_at_end: list[int] = []
    trace = model.trace

    def watched(ids: list[int], layer: int) -> Any:
        refs = []
        for t in trace(ids, layer):
            refs.append(weakref.ref(t.weights))
            yield t
        gc.collect()
        alive_at_end.append(sum(r() is not None for r in refs))

    monkeypatch.setattr(model, "trace", watched)
    teacher_forced(model, PROMPT, ANSWER)
    assert model.spec.n_layer >= 2 and alive_at_end and alive_at_end[0] <= 1


def test_a_pass_that_does_not_fit_is_refused_before_it_runs(
        models: dict[str, tuple[Path, Any]], monkeypatch: pytest.MonkeyPatch) -> None:
    import attncli.machine as machine
    from attncli.models.generate.given import pass_bytes

    model = open_model(str(models["llama"][0]))
    need = pass_bytes(model, len(PROMPT), len(ANSWER))
    monkeypatch.setattr(machine, "available_bytes", lambda: 2 * need - 2)
    with pytest.raises(AttnCliError, match=r"^--answer needs one pass over the prompt's 7 tokens "
                                           r"and the answer's 5 through all \d+ layers"):
        teacher_forced(model, PROMPT, ANSWER)
    monkeypatch.setattr(machine, "available_bytes", lambda: 2 * need)
    teacher_forced(model, PROMPT, ANSWER)
