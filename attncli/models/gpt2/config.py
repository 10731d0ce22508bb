"""A GPT-2 checkpoint's sizes, from config.json or its tensor shapes, every tensor checked."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from attncli.core.sizes import LAYER_BOUND
from attncli.errors import AttnCliError
from attncli.models.activations import activation
from attncli.models.checks.values import (
    config_flag,
    config_int,
    config_str,
    epsilon,
    layer_index,
    shown,
)
from attncli.models.sources.base import WeightSource
from attncli.models.sources.named import Named, check_tensors, where
from attncli.models.stores.paths import is_dir

# Head counts of the four released GPT-2 sizes, by width (124M, 355M, 774M, 1.5B).
STANDARD_HEADS = {768: 12, 1024: 16, 1280: 20, 1600: 25}
# Config switches that change the maths and that attncli does not run.
STANDARD_OPTIONS = {
    "add_cross_attention": False,
}


@dataclass(frozen=True)
class Checkpoint:
    """A GPT-2 safetensors file whose tensors were checked against its config."""

    path: Path  # the .safetensors file
    source: str  # what the user asked for: a hub name or a path
    prefix: str  # "" (GPT2Model) or "transformer." (GPT2LMHeadModel)
    n_layer: int
    n_head: int
    n_embd: int
    n_inner: int  # MLP width, 4·n_embd for every released GPT-2
    n_positions: int
    vocab_size: int
    layer_norm_epsilon: float = 1e-5
    activation_function: str = "gelu_new"  # the MLP's; GPT-2's own is the tanh GELU
    scale_attn_weights: bool = True  # scores ÷ √head_dim
    scale_attn_by_inverse_layer_idx: bool = False  # scores ÷ (layer + 1) as well
    weights: Named | None = field(default=None, compare=False, repr=False)  # its tensors

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head

    def layer_index(self, layer: int) -> int:
        """The 0-based index of layer, which may count from the end (-1 is the last)."""
        return layer_index(layer, self.n_layer)

    def expected_shapes(self) -> dict[str, tuple[int, ...]]:
        """Every tensor the forward pass reads, without the prefix, and its shape."""
        d, f = self.n_embd, self.n_inner
        shapes: dict[str, tuple[int, ...]] = {"wte.weight": (self.vocab_size, d),
                                              "wpe.weight": (self.n_positions, d)}
        block: dict[str, tuple[int, ...]] = {
            "ln_1.weight": (d,), "ln_1.bias": (d,),
            "attn.c_attn.weight": (d, 3 * d), "attn.c_attn.bias": (3 * d,),
            "attn.c_proj.weight": (d, d), "attn.c_proj.bias": (d,),
            "ln_2.weight": (d,), "ln_2.bias": (d,),
            "mlp.c_fc.weight": (d, f), "mlp.c_fc.bias": (f,),
            "mlp.c_proj.weight": (f, d), "mlp.c_proj.bias": (d,),
        }  # fmt: skip
        for layer in range(self.n_layer):
            shapes.update({f"h.{layer}.{name}": shape for name, shape in block.items()})
        return shapes


@contextmanager
def open_weights(ckpt: Checkpoint) -> Iterator[Named]:
    """The checkpoint's tensors, read lazily as float32 by their unprefixed names."""
    assert ckpt.weights is not None, "a checkpoint from gpt2_checkpoint"
    yield ckpt.weights


def config_file(source: WeightSource) -> Path:
    """How messages name the config: config.json beside the weights."""
    return (source.path if is_dir(source.path) else source.path.parent) / "config.json"


def gpt2_checkpoint(source: WeightSource, model: str, heads: int | None = None) -> Checkpoint:
    """The source as a checked GPT-2: sizes from config.json where it has them, else shapes."""
    file = where(source)
    config = _read_config(source.config(), config_file(source))
    names = source.shapes()
    prefix = _key_prefix(names, file)
    shapes = {k.removeprefix(prefix): v for k, v in names.items() if k.startswith(prefix)}
    ckpt = _build(model, file, prefix, config, shapes, heads)
    dtypes = {k: source.dtype_name(prefix + k) for k in ckpt.expected_shapes() if k in shapes}
    _check_tensors(ckpt, shapes, dtypes)
    return replace(ckpt, weights=Named(source, prefix, finite=True))


def _read_config(config: dict[str, Any], config_file: Path) -> dict[str, Any]:
    """config.json as a dict (the registry chose GPT-2 by its model_type), every value checked."""
    check_gpt2_config(config, config_file)
    return config


def check_gpt2_config(config: dict[str, Any], config_file: Path) -> None:
    """A GPT-2 config's values: sizes, epsilon, switches and activation, each checked."""
    for option, standard in STANDARD_OPTIONS.items():
        if config.get(option, standard) != standard:
            raise AttnCliError(f"{config_file} sets {option}={shown(config[option])}; attncli "
                               f"runs the standard GPT-2 block ({option}={standard!r})")
    activation(config_str(config, "activation_function", "gelu_new", str(config_file)),
               source=str(config_file))  # an unknown one fails
    for option in ("scale_attn_weights", "scale_attn_by_inverse_layer_idx"):
        config_flag(config, option, option == "scale_attn_weights", str(config_file))
    for key in CONFIG_INTS:
        if config.get(key) is not None:
            config_int(config, key)
    epsilon(config, "layer_norm_epsilon", 1e-5)


def _key_prefix(shapes: dict[str, tuple[int, ...]], file: Path) -> str:
    for prefix in ("", "transformer."):
        if f"{prefix}wte.weight" in shapes:
            return prefix
    raise AttnCliError(f"{file} has no wte.weight (nor transformer.wte.weight): it is not a "
                       f"GPT-2 checkpoint")


def _table_shape(shapes: dict[str, tuple[int, ...]], name: str, ckpt_file: Path,
                 prefix: str) -> tuple[int, int]:
    """The (rows, width) shape of an embedding table, which the sizes are read from."""
    shape = shapes.get(name)
    if shape is None:
        raise AttnCliError(f"{ckpt_file} lacks the tensor {prefix}{name} a GPT-2 needs")
    if len(shape) != 2:
        raise AttnCliError(f"tensor {prefix}{name} in {ckpt_file} has shape {shape}, expected "
                           f"2 dimensions (rows, n_embd)")
    return shape[0], shape[1]


def _config_int(config: dict[str, Any], key: str, inferred: int) -> int:
    return inferred if config.get(key) is None else config_int(config, key)


def _build(model: str, file: Path, prefix: str, config: dict[str, Any],
           shapes: dict[str, tuple[int, ...]], heads: int | None) -> Checkpoint:
    """Sizes from config.json where it has them, else read off the tensor shapes."""
    vocab_size, n_embd = _table_shape(shapes, "wte.weight", file, prefix)
    n_positions, _ = _table_shape(shapes, "wpe.weight", file, prefix)
    blocks = {int(m[1]) for k in shapes if (m := re.match(r"h\.(\d+)\.", k))}
    check_checkpoint_claims(config, blocks, file)
    n_embd = _config_int(config, "n_embd", n_embd)
    fc_shape = shapes.get("h.0.mlp.c_fc.weight", (n_embd, 4 * n_embd))
    ckpt = Checkpoint(
        path=file, source=model, prefix=prefix,
        n_layer=_config_int(config, "n_layer", max(blocks, default=-1) + 1),
        n_head=_num_heads(config, heads, n_embd),
        n_embd=n_embd,
        n_inner=_config_int(config, "n_inner", fc_shape[-1]),
        n_positions=_config_int(config, "n_positions", n_positions),
        vocab_size=_config_int(config, "vocab_size", vocab_size),
        layer_norm_epsilon=epsilon(config, "layer_norm_epsilon", 1e-5),
        activation_function=str(config.get("activation_function", "gelu_new")),
        scale_attn_weights=config.get("scale_attn_weights", True),
        scale_attn_by_inverse_layer_idx=config.get("scale_attn_by_inverse_layer_idx", False),
    )  # fmt: skip
    if ckpt.n_layer < 1:
        raise AttnCliError(f"{file} has no transformer blocks (no h.0.* tensors)")
    return ckpt


def _num_heads(config: dict[str, Any], heads: int | None, n_embd: int) -> int:
    configured = config.get("n_head")
    if heads is not None and configured is not None and heads != configured:
        raise AttnCliError(f"heads={heads} disagrees with n_head={configured} in config.json")
    if heads is None:
        heads = configured if configured is not None else STANDARD_HEADS.get(n_embd)
    if heads is None:
        standard = ", ".join(f"{w}→{h}" for w, h in STANDARD_HEADS.items())
        raise AttnCliError(f"cannot tell the number of heads of a {n_embd}-wide model without "
                           f"config.json; give it with --num-heads (standard widths: {standard})")
    if isinstance(heads, bool) or not isinstance(heads, int) or heads < 1 or n_embd % heads:
        raise AttnCliError(f"heads must be a positive divisor of the model width (got "
                           f"n_embd={n_embd}, heads={heads})")
    return heads


def _check_tensors(ckpt: Checkpoint, shapes: dict[str, tuple[int, ...]],
                   dtypes: dict[str, str]) -> None:
    """Every needed tensor is present, float, and shaped as the config says."""
    check_tensors(ckpt.expected_shapes(), shapes.__getitem__, dtypes.__getitem__,
                  shapes.__contains__, ckpt.prefix, ckpt.path, f"{ckpt.n_layer}-layer GPT-2")


CONFIG_INTS = ("n_layer", "n_head", "n_embd", "n_inner", "n_positions", "vocab_size")


def check_checkpoint_claims(config: dict[str, Any], blocks: set[int], file: Path) -> None:
    """config.json's sizes have JSON integer types, and no more layers are claimed than held."""
    for key in CONFIG_INTS:
        value = config.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            shown = repr(value) if len(repr(value)) <= 40 else f"{repr(value)[:40]}..."
            raise AttnCliError(f"config.json: {key} must be a positive integer (got {shown})")
    held = len(blocks)
    claimed = config.get("n_layer")
    # A few missing blocks are listed by name later; an absurd claim is refused before that.
    if claimed is not None and claimed > max(held, LAYER_BOUND):
        raise AttnCliError(f"config.json claims n_layer={claimed:,}, but {file} holds tensors "
                           f"for {held:,} block(s)")
    if claimed is None and blocks and max(blocks) >= max(held, LAYER_BOUND):
        raise AttnCliError(f"{file} names a tensor for layer {max(blocks):,}, but holds tensors "
                           f"for {held:,} block(s); layers must be numbered 0..{held - 1}")
