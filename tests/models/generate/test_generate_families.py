"""Greedy generation on tiny random checkpoints of every decoder family against transformers'
generate: the same tokens, and each step's weights (from the step's own caches) equal to
generate(output_attentions=True)'s for that step and to a teacher-forced full pass."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from attncli.errors import AttnCliError
from attncli.models.family import open_model
from attncli.models.generate.engine import decode
from attncli.models.generate.run import generate_model
from attncli.models.generate.sampling import Sampling
from attncli.records.asking import GenerationRequest
from tests.encoder_fixtures import save_encoder
from tests.family_fixtures import FAMILY_CASES, save_decoder
from tests.gpt2_fixtures import save_hf_gpt2
from tests.llama_fixtures import save_family
from tests.tolerance import assert_near

TOL = {"atol": 1e-5, "rtol": 1e-5}
PROMPT = [5, 71, 200, 13, 97, 150, 31, 260, 8, 120]  # ids inside every tiny vocabulary (≥ 320)
# name → how to save it; phi3's longrope switches factors past 8 positions, as generate's
# cache does not, so its prompt and answer stay within them.
LLAMA_STYLE = ("llama", "qwen2", "qwen3", "mistral")
CASES = [*LLAMA_STYLE, *FAMILY_CASES, "gpt2"]


def _save(folder: Path, name: str, seed: int) -> Any:
    if name in LLAMA_STYLE:
        return save_family(folder, name, seed=seed)
    if name == "gpt2":
        return save_hf_gpt2(folder, seed, lm_head=True, n_layer=2, n_embd=16, n_head=4,
                            vocab_size=384, n_positions=64)
    return save_decoder(folder, name, seed)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Any]]:
    root = tmp_path_factory.mktemp("generate-families")
    return {name: (root / name, _save(root / name, name, 90 + i).eval())
            for i, name in enumerate(CASES)}


def _prompt_and_n(name: str) -> tuple[list[int], int]:
    return (PROMPT[:4], 4) if name == "phi3" else (PROMPT, 8)


@pytest.mark.parametrize("name", CASES)
def test_greedy_tokens_and_every_steps_weights_match_transformers(
        models: dict[str, tuple[Path, Any]], name: str) -> None:
    folder, hf = models[name]
    prompt, n = _prompt_and_n(name)
    steps = list(decode(open_model(str(folder)), prompt, Sampling(max_new_tokens=n),
                        frozenset()))
    hf.generation_config.eos_token_id = None  # random weights: no token ends the answer
    out = hf.generate(torch.tensor([prompt]), do_sample=False, max_new_tokens=n,
                      min_new_tokens=n, output_attentions=True, return_dict_in_generate=True,
                      pad_token_id=0)
    assert [s.token_id for s in steps] == out.sequences[0, len(prompt):].tolist()
    assert len(steps) == n
    for s, layers in enumerate(out.attentions):
        got = torch.from_numpy(steps[s].weights)  # (L, H, P + s)
        assert got.shape[-1] == len(prompt) + s and steps[s].position == len(prompt) - 1 + s
        for layer, attn in enumerate(layers):
            ref = attn[0, :, -1, :]  # (H, keys): the last query row; a sliding layer's cache
            width = ref.shape[-1]  # holds only its window's keys
            assert_near(got[layer, :, -width:], ref, **TOL)
            assert not got[layer, :, :-width].any()  # outside the window: no weight


@pytest.mark.parametrize("name", CASES)
def test_each_step_is_a_row_of_the_teacher_forced_pass(models: dict[str, tuple[Path, Any]],
                                                       name: str) -> None:
    folder, _ = models[name]
    prompt, n = _prompt_and_n(name)
    model = open_model(str(folder))
    steps = list(decode(model, prompt, Sampling(max_new_tokens=n), frozenset()))
    every = model.all_layers(prompt + [s.token_id for s in steps])  # (L, H, T, T)
    for s, step in enumerate(steps):
        t = len(prompt) - 1 + s
        assert_near(torch.from_numpy(step.weights), every[:, :, t, :t + 1], **TOL)


def test_stop_ids_end_the_answer_and_n_caps_it(models: dict[str, tuple[Path, Any]]) -> None:
    folder, _ = models["llama"]
    model = open_model(str(folder))
    free = [s.token_id for s in decode(model, PROMPT, Sampling(max_new_tokens=6), frozenset())]
    assert len(free) == 6
    stopped = list(decode(model, PROMPT, Sampling(max_new_tokens=6), frozenset({free[2]})))
    first = free.index(free[2])
    assert [s.token_id for s in stopped] == free[:first + 1]  # the stop token is kept


def test_ctrl_c_keeps_what_was_written(models: dict[str, tuple[Path, Any]],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    folder, _ = models["llama"]
    seen: list[str] = []

    def interrupt_at_third(token: Any) -> None:
        seen.append(token.text)
        if len(seen) == 3:
            raise KeyboardInterrupt

    result = generate_model(GenerationRequest(str(folder), "the cat", raw=True,
                                              sampling=Sampling(max_new_tokens=10),
                                              view="raw", exclude_sinks=False),
                            on_token=interrupt_at_third)
    assert result.stopped == "interrupted"
    assert [t.text for t in result.answer] == seen and len(result.weights) == 3

    def interrupt_at_once(token: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("attncli.models.generate.run.decode",
                        lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        generate_model(GenerationRequest(str(folder), "the cat", raw=True,
                                         sampling=Sampling(max_new_tokens=10),
                                         view="raw", exclude_sinks=False),
                       on_token=interrupt_at_once)


def test_an_encoder_is_refused_in_one_line(tmp_path: Path) -> None:
    save_encoder(tmp_path / "bert", "bert", seed=3)
    with pytest.raises(AttnCliError, match="decoder") as caught:
        generate_model(GenerationRequest(str(tmp_path / "bert"), "the cat", raw=True,
                                         sampling=Sampling(max_new_tokens=2),
                                         view="raw", exclude_sinks=False))
    assert "\n" not in str(caught.value)


def test_gpt2_positions_bound_the_answer(models: dict[str, tuple[Path, Any]]) -> None:
    folder, _ = models["gpt2"]
    model = open_model(str(folder))
    limit = model.traits.max_tokens or 64
    with pytest.raises(AttnCliError, match="positions"):
        list(decode(model, PROMPT, Sampling(max_new_tokens=limit), frozenset()))


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("chunk", [256, 3])  # the prompt's queries at once, or 3 at a time
def test_prefill_fills_the_caches_that_stepping_fills(models: dict[str, tuple[Path, Any]],
                                                      name: str, chunk: int,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    import attncli.models.decoding as decoding

    monkeypatch.setattr(decoding, "PREFILL_QUERIES", chunk)
    model = open_model(str(models[name][0]))
    prompt, _ = _prompt_and_n(name)
    stepped, filled = model.decoder(0, len(prompt) + 2), model.decoder(0, len(prompt) + 2)
    for position, token_id in enumerate(prompt):
        stepped.step(token_id, position)
    filled.prefill(prompt)
    caches = [(c.keys, c.values) for c in stepped.caches] if name != "gpt2" else [
        (b.k_cache, b.v_cache) for b in stepped.blocks]
    refilled = [(c.keys, c.values) for c in filled.caches] if name != "gpt2" else [
        (b.k_cache, b.v_cache) for b in filled.blocks]
    for (keys, values), (filled_keys, filled_values) in zip(caches, refilled, strict=True):
        assert_near(filled_keys, keys, **TOL)
        assert_near(filled_values, values, **TOL)
    # The next step reads either cache alike: its weights and logits agree.
    after_steps, after_fill = (d.step_layers(prompt[0], len(prompt)) for d in (stepped, filled))
    assert_near(after_fill[0], after_steps[0], **TOL)
    assert_near(after_fill[1], after_steps[1])


@pytest.mark.parametrize("name", ["llama", "gpt2"])
def test_a_model_too_big_to_hold_streams_its_layers_with_the_same_answer(
        models: dict[str, tuple[Path, Any]], name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where every layer's float32 weights pass half the memory available, each step reads
    each layer again (one layer in memory): the tokens and every step's weights are the held
    decoder's, exactly."""
    from attncli import machine
    from attncli.models.generate import engine

    model = open_model(str(models[name][0]))
    shape = model.decode_shape()
    held = list(decode(model, PROMPT, Sampling(max_new_tokens=4), frozenset()))
    assert engine.holds(model)
    # Just too little to hold the float32 weights (held ≤ half of it), enough for the rest.
    weights = shape.held_bytes or 4 * (shape.layers * shape.token_macs + shape.head_weights)
    monkeypatch.setattr(machine, "available_bytes", lambda: 2 * weights - 2)
    assert not engine.holds(model)
    streamed = list(decode(model, PROMPT, Sampling(max_new_tokens=4), frozenset()))
    assert [s.token_id for s in streamed] == [s.token_id for s in held]
    for a, b in zip(streamed, held, strict=True):
        assert np.array_equal(a.weights, b.weights)


@pytest.mark.parametrize("chunk", [7, None])
@pytest.mark.parametrize("name", CASES)
def test_a_held_decoder_reads_its_unembedding_once_and_its_logits_are_the_chunked_ones(
        models: dict[str, tuple[Path, Any]], name: str, chunk: int | None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Held, the whole unembedding is read once (at the first logits) and each step's logits
    are one product with it; streamed, its rows are read VOCAB_CHUNK at a time at every step.
    The layers' weights are the same bit for bit. The logits too where the chunk covers the
    vocabulary (the same product); 7 rows a chunk (many products, another BLAS kernel for so
    narrow a one) sums each dot product in another order: float32 noise."""
    from attncli.models import unembed as unembed_module
    from attncli.models.gpt2 import decode as gpt2_decode
    from attncli.models.llama import decode as llama_decode

    reads: list[int] = []

    def counted(weights: Any, embedding: str, vocab: int, *shape: Any) -> torch.Tensor:
        reads.append(vocab)
        return unembed_module.held_unembedding(weights, embedding, vocab, *shape)

    for module in (gpt2_decode, llama_decode):
        monkeypatch.setattr(module, "held_unembedding", counted)
    if chunk is not None:
        monkeypatch.setattr(unembed_module, "VOCAB_CHUNK", chunk)
    model = open_model(str(models[name][0]))
    prompt, n = _prompt_and_n(name)
    held, streamed = (model.decoder(0, len(prompt) + n, held=h) for h in (True, False))
    for position, token_id in enumerate(prompt):
        held_weights, held_logits = held.step_layers(token_id, position)
        streamed_weights, streamed_logits = streamed.step_layers(token_id, position)
        assert torch.equal(held_weights, streamed_weights)
        if chunk is None:
            assert torch.equal(held_logits, streamed_logits)
        else:
            assert_near(held_logits, streamed_logits)
    assert len(reads) == 1 and held_logits.shape == (reads[0],)


@pytest.mark.parametrize("name", ["llama", "gpt2"])
def test_holds_counts_the_unembedding_beside_the_layers(
        models: dict[str, tuple[Path, Any]], name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Held means every layer's float32 weights and the float32 unembedding fit half the
    memory available: a byte short of that for the unembedding streams instead."""
    from attncli import machine
    from attncli.models.generate import engine

    model = open_model(str(models[name][0]))
    shape = model.decode_shape()
    assert shape.head_weights == model.logits(torch.zeros(1, shape.d_in)).shape[1] * shape.d_in
    need = (shape.layers * shape.token_macs + shape.head_weights) * 4  # float32 bytes held
    monkeypatch.setattr(machine, "available_bytes", lambda: 2 * need)
    assert engine.holds(model)
    monkeypatch.setattr(machine, "available_bytes", lambda: 2 * need - 2)
    assert not engine.holds(model)


def test_a_prefill_chunk_holds_its_float64_scores_to_the_byte_budget() -> None:
    from attncli.models.decoding import PREFILL_BYTES, PREFILL_QUERIES, prefill_queries

    for heads, tokens in [(32, 2000), (9, 2000), (32, 128), (64, 131_072), (1, 1), (32, 1)]:
        chunk = prefill_queries(heads, tokens)
        assert 1 <= chunk <= min(PREFILL_QUERIES, tokens)
        assert chunk == 1 or 8 * heads * chunk * tokens <= PREFILL_BYTES
    assert prefill_queries(32, 2000) == PREFILL_BYTES // (8 * 32 * 2000)  # 16 queries, 8 MB
    assert prefill_queries(32, 128) == 128  # a short prompt: every query at once


def test_prefill_spans_cut_the_prompt_evenly_within_the_work_budget() -> None:
    from attncli.models.decoding import PREFILL_ROWS, PREFILL_WORK, prefill_spans

    assert prefill_spans(0, 1) == []
    for tokens in (1, 255, 256, 257, 2000, 8191):
        for row_bytes in (1, 131_072, 229_376, 2**30):
            spans = prefill_spans(tokens, row_bytes)
            most = max(PREFILL_ROWS, PREFILL_WORK // row_bytes)
            sizes = [end - start for start, end in spans]
            assert spans[0][0] == 0 and spans[-1][1] == tokens
            assert all(a[1] == b[0] for a, b in zip(spans[:-1], spans[1:], strict=True))
            assert max(sizes) <= most and max(sizes) - min(sizes) <= 1
            assert len(spans) == 1 or min(sizes) >= most // 2  # no short tail
    assert prefill_spans(2000, 229_376) == [(0, 500), (500, 1000), (1000, 1500), (1500, 2000)]


SPANNED = [name for name in CASES if name != "gpt2"]  # the Llama block's decoders


def _long_prompt(model: Any) -> list[int]:
    """A prompt of up to 96 ids inside every tiny vocabulary, within the model's positions."""
    limit = model.spec.positions or 128
    return [(7 * k + 3) % 250 + 5 for k in range(min(96, limit - 2))]


def _spanned_prefill(model: Any, prompt: list[int], rows: int,
                     monkeypatch: pytest.MonkeyPatch) -> Any:
    """A decoder whose prefill took the prompt's row-by-row parts rows at a time."""
    import attncli.models.decoding as decoding

    with monkeypatch.context() as patched:
        patched.setattr(decoding, "PREFILL_ROWS", rows)
        patched.setattr(decoding, "PREFILL_WORK", 1)
        decoder = model.decoder(0, len(prompt) + 1)
        decoder.prefill(prompt)
    return decoder


def _assert_same_numbers(spanned: Any, whole: Any, prompt: list[int]) -> None:
    """The caches, the next step's weights and its logits of a prefill in spans equal the whole
    prompt's within the standard tolerance (1e-5 + 1e-5·|whole|). On the CPUs measured they are
    the same bits, each row's products its own; that is BLAS's choice, not a promise: another
    CPU's BLAS may take another kernel for another count of rows, which sums in another order."""
    def close(a: torch.Tensor, b: torch.Tensor) -> None:
        assert_near(a, b, equal_nan=True)

    for a, b in zip(spanned.caches, whole.caches, strict=True):
        close(a.keys, b.keys), close(a.values, b.values)
    after = [d.step_layers(prompt[0], len(prompt)) for d in (spanned, whole)]
    close(after[0][0], after[1][0]), close(after[0][1], after[1][1])


@pytest.mark.parametrize("name", SPANNED)
def test_a_prefill_in_spans_of_rows_fills_the_caches_of_one_span(
        models: dict[str, tuple[Path, Any]], name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The norms, projections and feed-forward taken 32 rows at a time (three spans of a
    96-token prompt) fill every layer's cache as the whole prompt at once does, and the next
    step's weights and logits are the same (BLAS's few-row kernels sum otherwise, so spans are
    kept long)."""
    model = open_model(str(models[name][0]))
    prompt = _long_prompt(model)
    whole = _spanned_prefill(model, prompt, 4096, monkeypatch)
    spanned = _spanned_prefill(model, prompt, 32, monkeypatch)
    _assert_same_numbers(spanned, whole, prompt)


@pytest.mark.parametrize("qtype", ["Q4_K", "Q8_0"])
def test_a_gguf_prefill_in_spans_is_the_whole_prompts(
        tmp_path: Path, qtype: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a GGUF's blocks, spans of at least DENSE_FROM rows take the dense product the whole
    prompt takes: the same caches, weights and logits."""
    import gguf

    from attncli.models.decoding import prefill_spans
    from attncli.models.sources.gguf.qmatmul import DENSE_FROM
    from tests.gguf_fixtures import write_k_llama, write_model

    kind = getattr(gguf.GGMLQuantizationType, qtype)
    path = tmp_path / f"tiny-{qtype}.gguf"
    if qtype == "Q8_0":
        write_model(path, "llama", kind)
    else:
        write_k_llama(path, kind, seed=5)
    model = open_model(str(path))
    prompt = _long_prompt(model)
    with monkeypatch.context() as patched:
        import attncli.models.decoding as decoding

        patched.setattr(decoding, "PREFILL_ROWS", 2 * DENSE_FROM)
        patched.setattr(decoding, "PREFILL_WORK", 1)
        assert min(e - s for s, e in prefill_spans(len(prompt), 1)) >= DENSE_FROM
    whole = _spanned_prefill(model, prompt, 4096, monkeypatch)
    spanned = _spanned_prefill(model, prompt, 2 * DENSE_FROM, monkeypatch)
    _assert_same_numbers(spanned, whole, prompt)


def test_the_prefills_row_by_row_parts_see_a_span_at_a_time(
        models: dict[str, tuple[Path, Any]], monkeypatch: pytest.MonkeyPatch) -> None:
    """The feed-forward and the q/k/v projections never see more than a span's rows: what
    they hold is bounded by the span, whatever the prompt's length."""
    from attncli.models.llama import block, qkv

    seen: list[int] = []

    def counting(cls: Any) -> None:
        call = cls.__call__

        def counted(self: Any, x: torch.Tensor, *args: Any) -> Any:
            seen.append(x.shape[0])
            return call(self, x, *args)

        monkeypatch.setattr(cls, "__call__", counted)

    counting(block.FeedForward)
    counting(qkv.Projection)
    model = open_model(str(models["llama"][0]))
    prompt = _long_prompt(model)
    _spanned_prefill(model, prompt, 32, monkeypatch)
    assert seen and max(seen) == 32 and len(seen) == 2 * 3 * model.spec.n_layer
