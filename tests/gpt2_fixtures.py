"""Small GPT-2 checkpoints for the tests, built locally: nothing is ever downloaded."""

from __future__ import annotations

import os
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers is imported anywhere
os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"

import torch  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from torch import Tensor  # noqa: E402


def tiny_tensors(n_layer: int = 2, d: int = 8, vocab: int = 16, positions: int = 8,
                 prefix: str = "", seed: int = 0) -> dict[str, Tensor]:
    """A random GPT-2 state dict with the right names and shapes (no transformers needed)."""
    gen = torch.Generator().manual_seed(seed)
    shapes: dict[str, tuple[int, ...]] = {"wte.weight": (vocab, d), "wpe.weight": (positions, d)}
    for layer in range(n_layer):
        block = f"h.{layer}."
        shapes |= {
            block + "ln_1.weight": (d,), block + "ln_1.bias": (d,),
            block + "attn.c_attn.weight": (d, 3 * d), block + "attn.c_attn.bias": (3 * d,),
            block + "attn.c_proj.weight": (d, d), block + "attn.c_proj.bias": (d,),
            block + "ln_2.weight": (d,), block + "ln_2.bias": (d,),
            block + "mlp.c_fc.weight": (d, 4 * d), block + "mlp.c_fc.bias": (4 * d,),
            block + "mlp.c_proj.weight": (4 * d, d), block + "mlp.c_proj.bias": (d,),
        }  # fmt: skip
    shapes |= {"ln_f.weight": (d,), "ln_f.bias": (d,)}
    return {prefix + name: torch.randn(shape, generator=gen) for name, shape in shapes.items()}


def write_tiny(path: Path, **kwargs: int | str) -> Path:
    """Save tiny_tensors(**kwargs) as a safetensors file and return its path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(tiny_tensors(**kwargs), str(path))  # type: ignore[arg-type]
    return path


def save_hf_gpt2(directory: Path, seed: int, lm_head: bool = False, half: bool = False,
                 **config: float | int) -> torch.nn.Module:
    """Save a random transformers GPT-2 with safetensors; return it, eager and in eval mode."""
    from transformers import GPT2Config, GPT2LMHeadModel, GPT2Model

    torch.manual_seed(seed)
    # A wide initialisation makes attention peaked, so a wrong weight shows in the numbers.
    last_id = int(config.get("vocab_size", 50257)) - 1  # keeps bos/eos inside a small vocab
    cfg = GPT2Config(initializer_range=0.2, bos_token_id=last_id, eos_token_id=last_id, **config)
    model = (GPT2LMHeadModel if lm_head else GPT2Model)(cfg)
    if half:
        model = model.half()
    model.save_pretrained(directory, safe_serialization=True)
    # The reference runs in float32 on exactly the weights that were saved.
    model = model.float()
    model.set_attn_implementation("eager")  # the path that returns attention weights
    return model.eval()


def hf_reference(model: torch.nn.Module, token_ids: list[int]) -> dict[str, list[Tensor]]:
    """transformers' own attention weights, hidden states, and per-layer attention I/O."""
    body = getattr(model, "transformer", model)
    captured: dict[str, list[Tensor]] = {"ln_1": [], "attn": [], "qkv": []}
    hooks = []
    for block in body.h:
        hooks += [
            block.ln_1.register_forward_hook(lambda _m, _i, y: captured["ln_1"].append(y[0])),
            block.attn.register_forward_hook(lambda _m, _i, y: captured["attn"].append(y[0][0])),
            block.attn.c_attn.register_forward_hook(
                lambda _m, _i, y: captured["qkv"].append(y[0])),
        ]
    try:
        with torch.no_grad():
            out = model(torch.tensor([token_ids]), output_attentions=True,
                        output_hidden_states=True)
    finally:
        for hook in hooks:
            hook.remove()
    captured["attentions"] = [a[0] for a in out.attentions]  # each (heads, T, T)
    captured["hidden_states"] = [h[0] for h in out.hidden_states]  # each (T, d)
    return captured
