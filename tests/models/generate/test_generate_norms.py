"""A generation's value norms come from its own decoder's caches (no second pass over prompt +
answer): on tiny random checkpoints they equal ‖W_O^h v_j^h‖ made from transformers' value
vectors and output projection over the same prompt + answer, also where Ctrl-C stopped a step
after it had reached only some layers, and through `generate_model` as the value view uses
them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from attncli.models.decoding import DecodeStep
from attncli.models.family import open_model
from attncli.models.generate.engine import cached_norms, decode
from attncli.models.generate.sampling import Sampling
from attncli.models.gpt2 import decode as gpt2_decode
from attncli.models.llama.block import Finish
from tests.models.generate.conftest import CASES
from tests.tolerance import assert_near

PROMPT = [5, 71, 200, 13, 97, 150, 31]


def _reference(hf: Any, ids: list[int]) -> torch.Tensor:
    """(layers, heads, T) ‖W_O^h v_j^h‖ from transformers' own values and output projection."""
    config = hf.config
    gpt2 = config.model_type == "gpt2"
    blocks = hf.transformer.h if gpt2 else hf.model.layers
    values: list[torch.Tensor] = []
    hooks = [(block.attn.c_attn if gpt2 else block.self_attn.v_proj).register_forward_hook(
        lambda _m, _i, y: values.append(y[0])) for block in blocks]
    try:
        with torch.no_grad():
            hf(torch.tensor([ids]))
    finally:
        for hook in hooks:
            hook.remove()
    heads = config.num_attention_heads
    head_dim = config.hidden_size // heads
    group = 1 if gpt2 else heads // config.num_key_value_heads
    layers = []
    for block, v in zip(blocks, values, strict=True):
        if gpt2:  # c_attn's output is q, k, v side by side; c_proj is x @ W, W (d, d)
            v, w_o = v[:, 2 * config.hidden_size:], block.attn.c_proj.weight.T  # (d, d)
        else:
            w_o = block.self_attn.o_proj.weight  # (d_model, heads · hd)
        rows = []
        for h in range(heads):
            kv = h // group
            v_h = v[:, kv * head_dim:(kv + 1) * head_dim]  # (T, hd)
            rows.append((v_h @ w_o[:, h * head_dim:(h + 1) * head_dim].T).norm(dim=-1))  # (T,)
        layers.append(torch.stack(rows))  # (heads, T)
    return torch.stack(layers)  # (layers, heads, T)


@pytest.mark.parametrize("name", CASES)
def test_norms_from_the_caches_equal_transformers(models: dict[str, tuple[Path, Any]],
                                                  name: str) -> None:
    folder, hf = models[name]
    decoders: list[DecodeStep] = []
    made = list(decode(open_model(str(folder)), PROMPT, Sampling(max_new_tokens=5), frozenset(),
                       on_decoder=decoders.append))
    ids = PROMPT + [s.token_id for s in made]  # the last answer token: read by no step
    norms = cached_norms(decoders[0], ids)
    assert norms is not None and norms.shape[-1] == len(ids)
    assert_near(torch.from_numpy(norms), _reference(hf, ids))


# The Llama step's finish is its block's resolved Finish, called once the layer's cache holds
# the token.
@pytest.mark.parametrize(("name", "module", "part"), [("qwen2", Finish, "__call__"),
                                                      ("gpt2", gpt2_decode, "feed_forward")])
def test_a_step_stopped_after_one_layer_leaves_the_norms_whole(
        models: dict[str, tuple[Path, Any]], monkeypatch: pytest.MonkeyPatch, name: str,
        module: Any, part: str) -> None:
    folder, hf = models[name]
    decoders: list[DecodeStep] = []
    steps = decode(open_model(str(folder)), PROMPT, Sampling(max_new_tokens=6), frozenset(),
                   on_decoder=decoders.append)
    made = [next(steps) for _ in range(3)]
    finish = getattr(module, part)

    def stopped(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt  # after layer 0's cache took the fourth step's token

    monkeypatch.setattr(module, part, stopped)
    with pytest.raises(KeyboardInterrupt):
        next(steps)
    monkeypatch.setattr(module, part, finish)
    decoder = decoders[0]
    lengths = {c.length for c in decoder.caches} if name == "qwen2" else {  # type: ignore
        b.v_cache.shape[1] for b in decoder.blocks}  # type: ignore[attr-defined]
    assert len(lengths) == 2  # the layers disagree: the case cut to the shortest
    ids = PROMPT + [s.token_id for s in made]
    norms = cached_norms(decoder, ids)
    assert norms is not None
    assert_near(torch.from_numpy(norms), _reference(hf, ids))


def test_the_value_view_of_generate_takes_the_caches_norms(
        models: dict[str, tuple[Path, Any]], monkeypatch: pytest.MonkeyPatch) -> None:
    from attncli.models.generate import given, run
    from attncli.records.asking import GenerationRequest

    folder, hf = models["llama"]

    def no_second_pass(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the value view ran a second pass over prompt + answer")

    monkeypatch.setattr(run, "teacher_forced", no_second_pass)
    monkeypatch.setattr(given, "teacher_forced", no_second_pass)
    request = GenerationRequest(model=str(folder), prompt="the cat sat on the mat", view="value",
                                raw=True, sampling=Sampling(max_new_tokens=4))
    result = run.generate_model(request)
    ids = [t.id for t in result.prompt + result.answer if t.id is not None]
    assert result.view == "value" and result.norms is not None
    assert len(ids) == len(result.prompt) + 4
    assert_near(torch.from_numpy(np.asarray(result.norms)), _reference(hf, ids))


class _Uncached:
    """A decoder that cannot say its caches' value norms (not CachedValues): its steps only."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def step(self, token_id: int, position: int) -> Any:
        return self.inner.step(token_id, position)

    def step_layers(self, token_id: int, position: int) -> Any:
        return self.inner.step_layers(token_id, position)

    def prefill(self, token_ids: list[int]) -> None:
        self.inner.prefill(token_ids)

    def cache_bytes(self) -> int:
        return int(self.inner.cache_bytes())


@pytest.mark.parametrize("name", ["llama", "qwen2"])  # the gpt2 fixture's 384 ids: no text
def test_a_decoder_without_cached_values_takes_the_second_pass(
        models: dict[str, tuple[Path, Any]], monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """cached_norms says None for such a decoder, and the value view's norms come from the
    teacher-forced pass over prompt + answer instead: the same ‖W_O^h v_j^h‖."""
    from attncli.models.generate import run
    from attncli.records.asking import GenerationRequest

    folder, hf = models[name]
    model = open_model(str(folder))
    made = model.decoder
    monkeypatch.setattr(model, "decoder", lambda *a, **k: _Uncached(made(*a, **k)))
    monkeypatch.setattr(run, "open_model", lambda _name: model)
    passes: list[int] = []
    forced = run.teacher_forced

    def counted(*args: Any) -> Any:
        passes.append(1)
        return forced(*args)

    monkeypatch.setattr(run, "teacher_forced", counted)
    assert cached_norms(model.decoder(0, 4), PROMPT) is None
    request = GenerationRequest(model=str(folder), prompt="the cat sat on the mat", view="value",
                                raw=True, sampling=Sampling(max_new_tokens=3))
    result = run.generate_model(request)
    ids = [t.id for t in result.prompt + result.answer if t.id is not None]
    assert passes == [1] and result.norms is not None and len(result.answer) == 3
    assert_near(torch.from_numpy(np.asarray(result.norms)), _reference(hf, ids))
