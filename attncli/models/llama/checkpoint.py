"""A Llama-family weight source checked against its config: every tensor's shape and dtype."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attncli.core.sizes import LAYER_BOUND
from attncli.errors import AttnCliError
from attncli.models.llama.config import LlamaArch, LlamaSpec, llama_spec, respec
from attncli.models.sources.base import WeightSource
from attncli.models.sources.mapped import Mapped, Piece
from attncli.models.sources.named import Named, check_tensors

_LAYER = re.compile(r"layers\.(\d+)\.")


@dataclass(frozen=True)
class Layout:
    """Where a family on the Llama block keeps each tensor the block reads.

    layer maps a block name (Llama's, as model.py reads it) to the stored suffix within
    layer i and, for a fused tensor, which piece of it: (suffix, groups, start, stop) with the
    sizes of the spec. Names it leaves out are stored under the block's own name.
    """

    prefixes: tuple[str, ...] = ("model.", "")  # ...ForCausalLM, or the bare ...Model
    top: tuple[tuple[str, str], ...] = ()  # block name → stored name, outside the layers
    heads: tuple[str, ...] = ("lm_head.weight",)  # the untied unembedding, outside the prefix
    layer: Callable[[LlamaSpec], dict[str, tuple[str, int, int, int | None]]] | None = None

    def table(self, spec: LlamaSpec, prefix: str) -> dict[str, Piece]:
        """Every renamed block tensor of every layer, as a Piece of a stored tensor."""
        table = {name: Piece(prefix + stored) for name, stored in self.top}
        if self.layer is None:
            return table
        pieces = self.layer(spec)
        for i in range(spec.n_layer):
            for name, (stored, groups, start, stop) in pieces.items():
                for part in ("weight", "bias"):
                    table[f"layers.{i}.{name}.{part}"] = Piece(
                        f"{prefix}layers.{i}.{stored}.{part}", groups, start, stop)
        return table


LLAMA_LAYOUT = Layout()


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
    """Every tensor the forward pass through layers reads, by block name, and its shape."""
    d, f, hd = spec.d_model, spec.d_ff, spec.head_dim
    q, kv = spec.num_heads * hd, spec.kv_heads * hd
    norms = {"input_layernorm": spec.pre_attn_norm, "attn_output_norm": spec.post_attn_norm,
             "post_attention_layernorm": spec.pre_mlp_norm or spec.parallel,
             "mlp_output_norm": spec.post_mlp_norm}
    block: dict[str, tuple[int, ...]] = {
        f"{name}.weight": (d,) for name, present in norms.items() if present}
    block |= {
        "self_attn.q_proj.weight": (q, d), "self_attn.k_proj.weight": (kv, d),
        "self_attn.v_proj.weight": (kv, d), "self_attn.o_proj.weight": (d, q),
        **({"mlp.gate_proj.weight": (f, d)} if spec.gated_mlp else {}),
        "mlp.up_proj.weight": (f, d), "mlp.down_proj.weight": (d, f),
    }  # fmt: skip
    if spec.qk_norm:
        block |= {"self_attn.q_norm.weight": (hd,), "self_attn.k_norm.weight": (hd,)}
    if spec.qk_norm_whole:
        block |= {"self_attn.q_norm.weight": (q,), "self_attn.k_norm.weight": (kv,)}
    shapes: dict[str, tuple[int, ...]] = {"embed_tokens.weight": (spec.vocab_size, d)}
    for layer in layers:
        shapes |= {f"layers.{layer}.{name}": shape for name, shape in block.items()}
    return shapes


def _check(ckpt: LlamaCheckpoint, weights: Named) -> None:
    """Every tensor the run reads is present, float, and shaped as config.json says; a bias
    the checkpoint has (Qwen2's q/k/v, GPT-NeoX's everywhere) as wide as its weight's rows."""
    spec = ckpt.spec
    expected = expected_shapes(spec, range(spec.n_layer))
    for name, shape in list(expected.items()):
        bias = name.removesuffix(".weight") + ".bias"
        if name.startswith("layers.") and bias in weights:
            expected[bias] = shape[:1]
    check_tensors(expected, weights.shape, weights.dtype, weights.__contains__, weights,
                  ckpt.directory, f"{spec.n_layer}-layer {spec.architecture}")
    if isinstance(weights, Mapped):
        _check_fused(weights, ckpt.directory)


def _check_fused(weights: Mapped, directory: Path) -> None:
    """A fused tensor (Phi-3's qkv_proj, GPT-NeoX's query_key_value) holds exactly its pieces:
    groups × the rows up to the last piece's end, so no piece reads a neighbour's rows."""
    stored = weights.source.shapes()
    ends: dict[str, tuple[int, int]] = {}
    for piece in weights.table.values():
        if piece.stop is not None and piece.name in stored:
            groups, end = ends.get(piece.name, (piece.groups, 0))
            ends[piece.name] = groups, max(end, piece.stop)
    for name, (groups, end) in sorted(ends.items()):
        rows = stored[name][0] if stored[name] else 0
        if rows != groups * end:
            raise AttnCliError(f"{directory}: tensor {name} has {rows:,} rows, but config.json's "
                               f"heads and sizes give its fused pieces {groups * end:,}")


def check_layer_claim(config: dict[str, Any], held: int | None, folder: object) -> None:
    """num_hidden_layers checked before anything is built per layer (a family's layer_types,
    its NoPE flags, every layer's window). A few missing layers are listed by name later; an
    absurd claim is refused here, before a list of two billion layers is made."""
    text = config.get("text_config")  # a multimodal file's language model
    claimed = (text if isinstance(text, dict) else config).get("num_hidden_layers")
    if isinstance(claimed, int) and claimed > max(held or 0, LAYER_BOUND):
        where = f"{folder} holds tensors for {held:,} layer(s)" if held is not None \
            else f"no checkpoint has more than {LAYER_BOUND:,}"
        raise AttnCliError(f"config.json claims num_hidden_layers={claimed:,}, but {where}")


def llama_checkpoint(source: WeightSource, model: str, arch: LlamaArch,
                     layout: Layout = LLAMA_LAYOUT) -> LlamaCheckpoint:
    """The source checked as its config.json's model (headers only are read)."""
    folder = source.path  # a model folder, or a single file (GGUF) holding its config
    names = source.shapes()
    embedding = dict(layout.top).get("embed_tokens.weight", "embed_tokens.weight")
    prefix = next((p for p in layout.prefixes if p + embedding in names), layout.prefixes[-1])
    held = {m[1] for name in names if (m := _LAYER.match(name.removeprefix(prefix)))}
    config = source.config()
    check_layer_claim(config, len(held), folder)
    spec = llama_spec(folder, config, arch)
    head = next((h for h in layout.heads if h in names), layout.heads[0])
    spec = respec(spec, head_name=head)
    weights = Mapped(source, prefix, layout.table(spec, prefix))
    ckpt = LlamaCheckpoint(spec=spec, source=model, prefix=prefix, weights=weights)
    _check(ckpt, weights)
    return ckpt


@contextmanager
def open_llama(ckpt: LlamaCheckpoint) -> Iterator[Named]:
    """The checkpoint's tensors, read lazily as float32 by their unprefixed names."""
    yield ckpt.weights
