"""The MLP activations a Hugging Face config may name (activation_function, hidden_act)."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from attncli.errors import AttnCliError
from attncli.models.checks.values import shown

_TANH_C = math.sqrt(2.0 / math.pi)


def _gelu_tanh(x: Tensor) -> Tensor:
    """GPT-2's tanh approximation, written out."""
    return 0.5 * x * (1.0 + torch.tanh(_TANH_C * (x + 0.044715 * torch.pow(x, 3.0))))


def _gelu_erf(x: Tensor) -> Tensor:
    return x * 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))


def _gelu_fast(x: Tensor) -> Tensor:
    return 0.5 * x * (1.0 + torch.tanh(x * 0.7978845608 * (1.0 + 0.044715 * x * x)))


def _laplace(x: Tensor, mu: float = 0.707107, sigma: float = 0.282095) -> Tensor:
    return 0.5 * (1.0 + torch.erf((x - mu).div(sigma * math.sqrt(2.0))))


ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "gelu": F.gelu,
    "gelu_10": lambda x: torch.clip(F.gelu(x), -10, 10),
    "gelu_fast": _gelu_fast,
    "gelu_new": _gelu_tanh,
    "gelu_python": _gelu_erf,
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "gelu_python_tanh": _gelu_tanh,
    "gelu_accurate": _gelu_tanh,
    "hardswish": F.hardswish,
    "laplace": _laplace,
    "leaky_relu": F.leaky_relu,
    "linear": lambda x: x,
    "mish": lambda x: x * torch.tanh(F.softplus(x)),
    "quick_gelu": lambda x: x * torch.sigmoid(1.702 * x),
    "relu": F.relu,
    "relu2": lambda x: torch.square(F.relu(x)),
    "relu6": F.relu6,
    "sigmoid": torch.sigmoid,
    "silu": F.silu,
    "swish": F.silu,
    "sqrtsoftplus": lambda x: F.softplus(x).sqrt(),
    "tanh": torch.tanh,
}


def activation(name: str, key: str = "activation_function",
               source: str = "config.json") -> Callable[[Tensor], Tensor]:
    """The named activation; a name attncli does not implement is refused, naming the key."""
    if name not in ACTIVATIONS:
        raise AttnCliError(f"{source} sets {key}={shown(name)}, which attncli does not implement "
                           f"(choose from {', '.join(ACTIVATIONS)})")
    return ACTIVATIONS[name]
