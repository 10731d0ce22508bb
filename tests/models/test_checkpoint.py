"""resolve_checkpoint: sizes from config.json or tensor shapes, and every refusal, one line each."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from attncli.errors import AttnCliError
from attncli.models.gpt2.config import Checkpoint, open_weights
from attncli.models.gpt2.family import resolve_checkpoint
from tests.gpt2_fixtures import tiny_tensors, write_tiny
from tests.tolerance import assert_near

TINY = {"n_layer": 2, "d": 8, "vocab": 16, "positions": 8}


def _config(directory: Path, **values: object) -> None:
    base = {"model_type": "gpt2", "n_layer": 2, "n_head": 2, "n_embd": 8, "n_positions": 8,
            "vocab_size": 16}
    (directory / "config.json").write_text(json.dumps(base | values), encoding="utf-8")


def _error(model: str | Path, heads: int | None = None) -> str:
    with pytest.raises(AttnCliError) as err:
        resolve_checkpoint(str(model), heads=heads)
    message = str(err.value)
    assert "\n" not in message
    return message


def test_directory_with_config(tmp_path: Path) -> None:
    write_tiny(tmp_path / "model.safetensors")
    _config(tmp_path, layer_norm_epsilon=1e-3)
    ckpt = resolve_checkpoint(str(tmp_path))
    assert ckpt == Checkpoint(path=tmp_path / "model.safetensors", source=str(tmp_path),
                              prefix="", n_layer=2, n_head=2, n_embd=8, n_inner=32,
                              n_positions=8, vocab_size=16, layer_norm_epsilon=1e-3)
    assert ckpt.head_dim == 4


@pytest.mark.parametrize(("d", "heads"), [(768, 12), (1024, 16), (1280, 20), (1600, 25)])
def test_bare_file_of_a_standard_width_infers_heads(tmp_path: Path, d: int, heads: int) -> None:
    file = write_tiny(tmp_path / "gpt.safetensors", n_layer=1, d=d, vocab=3, positions=2,
                      prefix="transformer.")
    ckpt = resolve_checkpoint(str(file))
    assert (ckpt.n_head, ckpt.n_embd, ckpt.n_layer, ckpt.prefix) == (heads, d, 1, "transformer.")
    assert (ckpt.vocab_size, ckpt.n_positions, ckpt.n_inner) == (3, 2, 4 * d)


def test_bare_file_of_an_odd_width_takes_heads_from_the_caller(tmp_path: Path) -> None:
    file = write_tiny(tmp_path / "toy.safetensors", **TINY)
    assert resolve_checkpoint(str(file), heads=4).n_head == 4
    assert _error(file) == (
        "cannot tell the number of heads of a 8-wide model without config.json; give it with "
        "--num-heads (standard widths: 768→12, 1024→16, 1280→20, 1600→25)")
    for bad in (3, 0):
        assert _error(file, heads=bad) == (
            f"heads must be a positive divisor of the model width (got n_embd=8, heads={bad})")


def test_heads_that_disagree_with_the_config(tmp_path: Path) -> None:
    write_tiny(tmp_path / "model.safetensors", **TINY)
    _config(tmp_path)
    assert resolve_checkpoint(str(tmp_path), heads=2).n_head == 2
    assert _error(tmp_path, heads=4) == "heads=4 disagrees with n_head=2 in config.json"


def test_tensors_load_lazily_as_float32_from_fp16(tmp_path: Path) -> None:
    tensors = {k: v.half() for k, v in tiny_tensors(**TINY).items()}  # type: ignore[arg-type]
    save_file(tensors, str(tmp_path / "model.safetensors"))
    ckpt = resolve_checkpoint(str(tmp_path), heads=2)
    with open_weights(ckpt) as weights:
        wte = weights["wte.weight"]
        rows = weights.rows("wte.weight", [3, 3, 0])
    assert wte.dtype == torch.float32
    # exact: rows are copies of the stored float32 values
    assert_near(rows, tensors["wte.weight"][[3, 3, 0]].float(), atol=0, rtol=0)


def test_truncated_file(tmp_path: Path) -> None:
    data = write_tiny(tmp_path / "full.safetensors", **TINY).read_bytes()
    (tmp_path / "cut.safetensors").write_bytes(data[: len(data) // 2])
    assert _error(tmp_path / "cut.safetensors", heads=2) == (
        f"cannot read {tmp_path / 'cut.safetensors'} as safetensors (truncated or corrupt?): "
        "Error while deserializing header: incomplete metadata, file not fully covered")


def test_missing_tensors(tmp_path: Path) -> None:
    tensors = tiny_tensors(**TINY)
    del tensors["h.1.mlp.c_fc.weight"], tensors["wpe.weight"]
    save_file(tensors, str(tmp_path / "model.safetensors"))
    _config(tmp_path)
    assert _error(tmp_path) == (
        f"{tmp_path / 'model.safetensors'} lacks the tensor wpe.weight a GPT-2 needs")
    tensors["wpe.weight"] = torch.zeros(8, 8)
    save_file(tensors, str(tmp_path / "model.safetensors"))
    assert _error(tmp_path) == (f"{tmp_path / 'model.safetensors'} lacks 1 tensor(s) a 2-layer "
                                f"GPT-2 needs: h.1.mlp.c_fc.weight")


def test_a_missing_block_named_by_config(tmp_path: Path) -> None:
    write_tiny(tmp_path / "model.safetensors", **TINY)
    _config(tmp_path, n_layer=3)
    message = _error(tmp_path)
    assert message.startswith(f"{tmp_path / 'model.safetensors'} lacks 12 tensor(s) a 3-layer "
                              f"GPT-2 needs: h.2.ln_1.weight, h.2.ln_1.bias, ")
    assert message.endswith(", ...")


@pytest.mark.parametrize(("name", "shape", "expected"), [
    ("transformer.h.0.attn.c_attn.weight", (24, 8), "(8, 24)"),
    ("transformer.h.1.mlp.c_proj.bias", (9,), "(8,)"),
    ("transformer.wpe.weight", (8, 9), "(8, 8)"),
])  # fmt: skip
def test_misshaped_tensor(tmp_path: Path, name: str, shape: tuple[int, ...],
                          expected: str) -> None:
    tensors = tiny_tensors(**TINY, prefix="transformer.")  # type: ignore[arg-type]
    tensors[name] = torch.zeros(shape)
    save_file(tensors, str(tmp_path / "model.safetensors"))
    _config(tmp_path)
    assert _error(tmp_path) == (f"tensor {name} in {tmp_path / 'model.safetensors'} has shape "
                                f"{shape}, expected {expected}")


def test_integer_tensor(tmp_path: Path) -> None:
    tensors = tiny_tensors(**TINY)
    tensors["h.0.ln_1.bias"] = torch.zeros(8, dtype=torch.int64)
    save_file(tensors, str(tmp_path / "model.safetensors"))
    assert _error(tmp_path, heads=2) == (
        f"tensor h.0.ln_1.bias in {tmp_path / 'model.safetensors'} has dtype I64, expected one "
        f"of F16, BF16, F32, F64")


def test_not_gpt2_at_all(tmp_path: Path) -> None:
    save_file({"embed_tokens.weight": torch.zeros(4, 4)}, str(tmp_path / "x.safetensors"))
    assert _error(tmp_path / "x.safetensors") == (
        f"{tmp_path / 'x.safetensors'} has no wte.weight (nor transformer.wte.weight): it is "
        "not a GPT-2 checkpoint")


@pytest.mark.parametrize(("values", "message"), [
    ({"model_type": "xglm"}, "describes a 'xglm' model; attncli reads GPT-2 (model_type "
                           "'gpt2'), Llama-family (llama, mistral, qwen2, qwen3), Gemma 2"),
    ({"model_type": {"a": 1}}, "gives model_type as a JSON object; attncli reads GPT-2"),
    ({"add_cross_attention": True}, "sets add_cross_attention=True; attncli runs the standard "
                                    "GPT-2 block (add_cross_attention=False)"),
    ({"activation_function": "prelu"}, "sets activation_function='prelu', which attncli does "
                                       "not implement (choose from gelu, gelu_10, "),
])  # fmt: skip
def test_config_that_is_not_plain_gpt2(tmp_path: Path, values: dict[str, object],
                                       message: str) -> None:
    write_tiny(tmp_path / "model.safetensors", **TINY)
    _config(tmp_path, **values)
    assert _error(tmp_path).startswith(f"{tmp_path / 'config.json'} {message}")


def test_config_with_a_bad_value(tmp_path: Path) -> None:
    write_tiny(tmp_path / "model.safetensors", **TINY)
    _config(tmp_path, n_layer="two")
    assert _error(tmp_path) == "config.json: n_layer must be a positive integer (got 'two')"
    _config(tmp_path, layer_norm_epsilon="tiny")
    assert _error(tmp_path) == ("config.json: layer_norm_epsilon must be a small positive "
                                "number above 0 and below 1 (got 'tiny')")
    (tmp_path / "config.json").write_text("{", encoding="utf-8")
    assert _error(tmp_path).startswith(f"{tmp_path / 'config.json'} is not valid JSON (")


def test_pickle_checkpoints_are_refused_unread(tmp_path: Path) -> None:
    torch.save(tiny_tensors(**TINY), tmp_path / "pytorch_model.bin")
    hint = "pickle files can run code when loaded, so attncli reads safetensors only"
    message = _error(tmp_path / "pytorch_model.bin")
    assert message.startswith(f"refusing to load {tmp_path / 'pytorch_model.bin'}: {hint}")
    assert "save_file(" in message
    assert _error(tmp_path).startswith(
        f"{tmp_path} has no .safetensors file, only pytorch_model.bin; {hint}")
    # A pickle under a safetensors name is recognised by its first bytes.
    (tmp_path / "pytorch_model.bin").rename(tmp_path / "sneaky.safetensors")
    assert _error(tmp_path / "sneaky.safetensors").startswith(
        f"{tmp_path / 'sneaky.safetensors'} is a pickle checkpoint, not safetensors; {hint}")
