"""TransformerLens's side of the causal tests: the same tiny checkpoints as TransformerBridges,
hook_z edits and its patching utilities, on exactly attncli's token ids."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from tests.gpt2_fixtures import save_hf_gpt2
from tests.llama_fixtures import byte_level_tokenizer, save_family


def gpt2_pair(folder: Path) -> Any:
    """A random GPT-2 saved in folder, and the same weights as TransformerLens's bridge."""
    from transformers import PreTrainedTokenizerFast

    model = save_hf_gpt2(folder, seed=5, lm_head=True, n_layer=2, n_head=4, n_embd=32,
                         n_positions=128)
    PreTrainedTokenizerFast(tokenizer_object=byte_level_tokenizer(), bos_token="<|begin|>",
                            eos_token="<|end|>").save_pretrained(folder)
    return bridge(folder, model)


def llama_pair(folder: Path) -> Any:
    """A random Llama (grouped kv heads, RoPE, RMSNorm) in folder, and its bridge."""
    return bridge(folder, save_family(folder, "llama", seed=21))


def bridge(folder: Path, model: Any) -> Any:
    from transformer_lens.model_bridge import TransformerBridge

    out = TransformerBridge.boot_transformers(str(folder), hf_model=model, device="cpu")
    out.set_use_attn_result(True)
    return out


def hooked_logits(bridge: Any, ids: list[int], hooks: list[tuple[str, Any]]) -> torch.Tensor:
    """The bridge's logits (T, vocab) of ids with forward hooks."""
    with torch.no_grad():
        return bridge.run_with_hooks(torch.tensor([ids]), fwd_hooks=hooks)[0].float()


def z_hook(head: int, make: Any) -> Any:
    """A hook_z edit: head's output (batch, T, heads, hd) replaced by make(its clean value)."""

    def hook(z: torch.Tensor, hook: Any) -> torch.Tensor:  # noqa: ARG001
        z = z.clone()
        z[:, :, head] = make(z[:, :, head])
        return z

    return hook
