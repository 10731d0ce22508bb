"""A Llama-family weight source checked against its config: every tensor's shape and dtype."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from attncli.core.sizes import LAYER_BOUND
from attncli.errors import AttnCliError
from attncli.models.llama.config import LlamaSpec, llama_spec
from attncli.models.sources.base import WeightSource
from attncli.models.sources.named import Named, check_tensors

_LAYER = re.compile(r"layers\.(\d+)\.")


@dataclass(frozen=True)
class LlamaCheckpoint:
    """A checked model: its spec, the key prefix of its tensors, and the tensors."""

    spec: LlamaSpec
    source: str  # what the user asked for: a hub name or a path
    prefix: str  # "model." (…ForCausalLM) or "" (the bare …Model)
    weights: Named = field(compare=False, repr=False)

    @property
    def directory(self) -> Path:
        return self.spec.directory


def expected_shapes(spec: LlamaSpec, layers: range) -> dict[str, tuple[int, ...]]:
    """Every tensor the forward pass through layers reads, without the prefix, and its shape."""
    d, f, hd = spec.d_model, spec.d_ff, spec.head_dim
    q, kv = spec.num_heads * hd, spec.kv_heads * hd
    block: dict[str, tuple[int, ...]] = {
        "input_layernorm.weight": (d,), "post_attention_layernorm.weight": (d,),
        "self_attn.q_proj.weight": (q, d), "self_attn.k_proj.weight": (kv, d),
        "self_attn.v_proj.weight": (kv, d), "self_attn.o_proj.weight": (d, q),
        "mlp.gate_proj.weight": (f, d), "mlp.up_proj.weight": (f, d),
        "mlp.down_proj.weight": (d, f),
    }  # fmt: skip
    if spec.qk_norm:
        block |= {"self_attn.q_norm.weight": (hd,), "self_attn.k_norm.weight": (hd,)}
    shapes: dict[str, tuple[int, ...]] = {"embed_tokens.weight": (spec.vocab_size, d)}
    for layer in layers:
        shapes |= {f"layers.{layer}.{name}": shape for name, shape in block.items()}
    return shapes


def _check(ckpt: LlamaCheckpoint, weights: Named) -> None:
    """Every tensor the run reads is present, float, and shaped as config.json says."""
    spec = ckpt.spec
    expected = expected_shapes(spec, range(spec.n_layer))
    bias_shapes = {"q_proj": spec.num_heads * spec.head_dim, "k_proj": spec.kv_heads
                   * spec.head_dim, "v_proj": spec.kv_heads * spec.head_dim, "o_proj": spec.d_model}
    for layer in range(spec.n_layer):
        for proj, width in bias_shapes.items():
            name = f"layers.{layer}.self_attn.{proj}.bias"
            if name in weights:  # Qwen2's q/k/v bias, or Llama's attention_bias
                expected[name] = (width,)
    check_tensors(expected, weights.shape, weights.dtype, weights.__contains__, ckpt.prefix,
                  ckpt.directory,
                  f"{spec.n_layer}-layer {spec.architecture}")


def llama_checkpoint(source: WeightSource, model: str) -> LlamaCheckpoint:
    """The source checked as its config.json's Llama-family model (headers only are read)."""
    folder = source.path  # a model folder, or a single file (GGUF) holding its config
    spec = llama_spec(folder, source.config())
    names = source.shapes()
    prefix = "model." if "model.embed_tokens.weight" in names else ""
    held = {m[1] for name in names if (m := _LAYER.match(name.removeprefix(prefix)))}
    # A few missing layers are listed by name below; an absurd claim is refused before that.
    if spec.n_layer > max(len(held), LAYER_BOUND):
        raise AttnCliError(f"config.json claims num_hidden_layers={spec.n_layer:,}, but "
                           f"{folder} holds tensors for {len(held):,} layer(s)")
    weights = Named(source, prefix)
    ckpt = LlamaCheckpoint(spec=spec, source=model, prefix=prefix, weights=weights)
    _check(ckpt, weights)
    return ckpt


@contextmanager
def open_llama(ckpt: LlamaCheckpoint) -> Iterator[Named]:
    """The checkpoint's tensors, read lazily as float32 by their unprefixed names."""
    yield ckpt.weights
