"""A held Llama-family decoder's step (every block resolved once, q/k/v cut from one stacked
product on the GGUF's blocks, queries and keys turned by one RoPE, the step's RoPE row shared by
the layers) against a straightforward step written out below from the full pass's parts (each
tensor looked up by name, project()'s split and apply_rope), and against the streamed decoder
(each block read again at every step): the weights equal bit for bit, and the straightforward
step's logits too, in float32 and under llama.cpp's numerics (float16 caches, 8-bit
activations), where an ulp moves the answer."""

from __future__ import annotations

import math
from pathlib import Path

import gguf
import pytest
import torch
from torch import Tensor

from attncli.models.family import open_model
from attncli.models.llama.block import attention_input, embed, finish_block, linear
from attncli.models.llama.config import LlamaSpec
from attncli.models.llama.model import llama_logits
from attncli.models.llama.qkv import project
from attncli.models.llama.rope import LayerRopes, StepRopes
from attncli.models.sources.gguf.qmatmul import llama_cpp_numerics
from attncli.models.sources.named import Named
from attncli.models.unembed import held_unembedding
from tests.gguf_fixtures import write_k_llama, write_model
from tests.tolerance import assert_near

Q = gguf.GGMLQuantizationType
PROMPT = [5, 71, 200, 13, 97, 150, 31]  # ids inside the tiny vocabularies (≥ 267)
STEPS = 5
# file → whether its q, k and v are one held stack (qwen2's biases keep them apart)
FILES = {"llama-Q8_0": True, "llama-Q4_K": True, "qwen2-Q8_0": False, "qwen3-Q8_0": True}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("steps")
    paths = {name: root / f"{name}.gguf" for name in FILES}
    write_model(paths["llama-Q8_0"], "llama", Q.Q8_0)
    write_k_llama(paths["llama-Q4_K"], Q.Q4_K)
    write_model(paths["qwen2-Q8_0"], "qwen2", Q.Q8_0)
    write_model(paths["qwen3-Q8_0"], "qwen3", Q.Q8_0)
    return paths


def _f16(t: Tensor, cached: bool) -> Tensor:
    """t rounded as llama.cpp's float16 cache holds it, where its numerics are asked for."""
    return t.to(torch.float16).to(t.dtype) if cached else t


def _straight_step(read: Named, spec: LlamaSpec, keys: list[Tensor], values: list[Tensor],
                   token_id: int, t: int, cached: bool) -> tuple[Tensor, Tensor]:
    """Token t through every block, each tensor looked up by its name; keys and values
    (kv, t, hd) each, one a layer, are grown. Its weights (layers, heads, t+1) and logits."""
    x = embed(read, spec, [token_id])  # (1, d_model)
    every = []
    ropes = LayerRopes(spec, t + 1)
    for i in range(spec.n_layer):
        tables = ropes[i]  # each (t+1, rotary_dim), or None: a NoPE layer
        rope = None if tables is None else (tables[0][t:t + 1], tables[1][t:t + 1])
        heads = project(read, spec, i, attention_input(read, spec, i, x), rope)
        keys[i] = torch.cat([keys[i], _f16(heads.keys_rope, cached)], dim=1)  # (kv, t+1, hd)
        values[i] = torch.cat([values[i], _f16(heads.values, cached)], dim=1)
        grouped = _f16(heads.queries_rope, cached).reshape(
            spec.kv_heads, spec.group_size, spec.head_dim)  # (kv, group, hd)
        scores = torch.bmm(grouped.double(), keys[i].double().transpose(1, 2))  # (kv, g, t+1)
        attn_weights = torch.softmax(scores / math.sqrt(spec.head_dim), dim=-1).float()
        context = torch.bmm(_f16(attn_weights, cached), values[i]).view(1, -1)  # (1, h · hd)
        every.append(attn_weights.view(spec.num_heads, -1))  # (heads, t+1)
        attn_out = linear(read, f"layers.{i}.self_attn.o_proj", context)  # (1, d_model)
        x = finish_block(read, spec, i, x, attn_out)  # (1, d_model)
    table = held_unembedding(read, "embed_tokens.weight", spec.vocab_size, spec.d_model,
                             spec.head_name)  # (vocab, d_model): as a held decoder holds it
    return torch.stack(every), llama_logits(read, spec, x, table)[0]  # (L, h, t+1), (vocab,)


@pytest.mark.parametrize("numerics", ["float32", "llama.cpp"])
@pytest.mark.parametrize("name", ["llama-Q8_0", "llama-Q4_K", "qwen2-Q8_0"])
def test_a_held_step_is_the_straightforward_step_bit_for_bit(
        files: dict[str, Path], name: str, numerics: str) -> None:
    cached = numerics == "llama.cpp"
    with llama_cpp_numerics(cached), torch.no_grad():
        model = open_model(str(files[name]))
        decoder = model.decoder(0, len(PROMPT) + STEPS)
        assert decoder.held  # type: ignore[attr-defined]
        spec: LlamaSpec = decoder.spec  # type: ignore[attr-defined]
        read = model.ckpt.weights.reading_once()  # type: ignore[attr-defined]
        keys = [torch.empty(spec.kv_heads, 0, spec.head_dim) for _ in range(spec.n_layer)]
        values = [k.clone() for k in keys]
        for t, token_id in enumerate(PROMPT[:2]):  # the first positions, held to the same
            _straight_step(read, spec, keys, values, token_id, t, cached)
            decoder.step_layers(token_id, t)
        token_id = PROMPT[2]
        for t in range(2, 2 + STEPS):
            got_weights, got_logits = decoder.step_layers(token_id, t)
            ref_weights, ref_logits = _straight_step(read, spec, keys, values, token_id, t,
                                                     cached)
            assert torch.equal(got_weights, ref_weights)
            assert torch.equal(got_logits, ref_logits)
            token_id = int(got_logits.argmax())


@pytest.mark.parametrize("numerics", ["float32", "llama.cpp"])
@pytest.mark.parametrize("name", sorted(FILES))
def test_a_held_decoder_resolves_its_blocks_once_and_steps_as_the_streamed_one(
        files: dict[str, Path], name: str, numerics: str) -> None:
    with llama_cpp_numerics(numerics == "llama.cpp"), torch.no_grad():
        model = open_model(str(files[name]))
        held, streamed = (model.decoder(0, len(PROMPT) + STEPS, held=h) for h in (True, False))
        for decoder in (held, streamed):
            decoder.prefill(PROMPT[:-1])  # type: ignore[attr-defined]
        token_id = PROMPT[-1]
        for s in range(STEPS):
            position = len(PROMPT) - 1 + s
            held_weights, held_logits = held.step_layers(token_id, position)
            streamed_weights, streamed_logits = streamed.step_layers(token_id, position)
            assert torch.equal(held_weights, streamed_weights)
            # The held unembedding is one product on the file's blocks, the streamed one
            # dequantized rows a chunk at a time: the same sums in another order; under
            # llama.cpp's numerics only the held one's activations are 8-bit (both as on main).
            if numerics == "float32":
                assert_near(held_logits, streamed_logits)
            token_id = int(held_logits.argmax())
    blocks = held._held_blocks  # type: ignore[attr-defined]
    assert len(blocks) == model.ckpt.spec.n_layer  # type: ignore[attr-defined]
    assert held._block(1) is blocks[1]  # type: ignore[attr-defined]  # resolved once
    assert bool(blocks[0].projection.qkv.widths) is FILES[name]  # one stacked product
    assert streamed._held_blocks == []  # type: ignore[attr-defined]  # read at each step


def test_layers_sharing_a_rope_share_the_steps_row(tmp_path: Path) -> None:
    """StepRopes cuts position t's row once for every layer whose tables are the same, and
    the signed sin once per table; a new position cuts a new row."""
    path = tmp_path / "llama.gguf"
    write_model(path, "llama", Q.Q8_0)
    spec = open_model(str(path)).ckpt.spec  # type: ignore[attr-defined]
    assert spec.n_layer >= 2
    steps = StepRopes(LayerRopes(spec, 8), spec.head_dim)
    first, second = steps.row(0, 3), steps.row(1, 3)
    assert first is not None and first is second
    later = steps.row(1, 4)
    assert later is not None and later is not first and later.sin.data_ptr() != first.sin.data_ptr()
    assert steps._tables[0] is steps._tables[1]  # the signed tables made once
