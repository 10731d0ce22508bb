"""What a reader's forward returned, made into a plain tensor `check` can compare, or one line
that says what came back: a 0-d, sparse, nested, meta or complex tensor, a dict, a generator."""

from __future__ import annotations

import torch
from torch import Tensor

from attncli.checker.load import said, theirs


def described(value: object) -> str:
    """What a value that is not a usable tensor is, in a few words."""
    name = said(type(value).__name__, 60)
    if isinstance(value, tuple | list):
        if not value:
            return f"an empty {name}"
        return f"a {name} whose first item is {described(value[0])}"
    if isinstance(value, Tensor):
        return f"a {name}"
    article = "an" if name[:1].lower() in "aeiou" else "a"
    return f"{article} {name}"


def _not_dense(result: Tensor) -> str | None:
    """Why a tensor cannot be compared as it is, or None when it can."""
    if result.is_nested:
        return "a nested tensor (torch.nested): return one (b, T, d_out) tensor"
    if result.layout is not torch.strided:
        return f"a {said(result.layout)} tensor: return a dense one (.to_dense())"
    if result.device.type != "cpu":
        return f"a tensor on the {said(result.device)} device, which holds no numbers"
    if result.is_quantized:
        return f"a quantized tensor ({said(result.dtype)})"
    if result.is_complex():
        return f"a complex tensor ({said(result.dtype)})"
    return None


def usable(result: object, want: tuple[int, ...], wide: bool) -> Tensor | str:
    """The reader's output as a float32 CPU tensor of shape want, else the line that says what
    came back. A tuple or list gives its first item (context, weights); wide: the output is
    num_heads × d_out wide, as the wrapper's."""
    if isinstance(result, tuple | list) and result and isinstance(result[0], Tensor):
        result = result[0]  # (context, weights): the context is what is compared
    if not isinstance(result, Tensor):
        return f"your forward returned {described(result)}, not a tensor"
    try:
        why = _not_dense(result)
        if why is not None:
            return f"your forward returned {why}"
        shape = tuple(int(n) for n in result.shape)
        if shape != want:
            hint = " (num_heads × d_out wide, as the book's MultiHeadAttentionWrapper: give " \
                "--kind wrapper)" if wide else ""
            zero = " (a 0-d tensor, one number)" if not shape else ""
            return f"your forward returned shape {shape}{zero}; the book's returns {want}{hint}"
        plain = torch.empty(want, dtype=torch.float32)  # (b, T, d_out) or (T, d_out)
        with torch._C.DisableTorchFunctionSubclass():  # a subclass of theirs: its numbers only
            plain.copy_(result.detach())
    except KeyboardInterrupt:
        raise
    except BaseException as err:  # a tensor subclass of theirs that raises when it is read
        return f"your forward returned {described(result)} that cannot be read: {theirs(err)}"
    return plain
