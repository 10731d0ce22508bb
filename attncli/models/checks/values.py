"""config.json values checked as values: integers of the right type and size, finite floats."""

from __future__ import annotations

from typing import Any, cast

from attncli.core.sizes import finite
from attncli.errors import AttnCliError

# The largest size a config may give (layers, heads, widths, windows, positions): every tensor
# dimension and token position attncli indexes fits in 32 bits, far past any released model.
INT_MAX = 2**31 - 1


def shown(value: object) -> str:
    """A config value as it appears in a message: short enough for one line."""
    if isinstance(value, list | dict):
        return f"a JSON {'list' if isinstance(value, list) else 'object'}"  # maybe nested deep
    if isinstance(value, str) and len(value) > 40:
        value = value[:40]  # repr of the start only: the whole may be megabytes
        return f"{value!r}..."
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10**40:
        return f"an integer of {len(str(abs(value)))} digits"
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:40]}..."


def config_int(config: dict[str, Any], key: str, default: int | None = None,
               where: str = "config.json", low: int = 1) -> int:
    """config[key] (default when absent): an integer in low..INT_MAX, or one line naming it."""
    value = config.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= INT_MAX:
        kind = "a positive integer" if low == 1 else f"an integer of at least {low}"
        if isinstance(value, int) and not isinstance(value, bool) and value > INT_MAX:
            kind = f"at most {INT_MAX:,}, which no checkpoint's tensors come near"
        raise AttnCliError(f"{where}: {key} must be {kind} (got {shown(value)})")
    return value


def config_number(config: dict[str, Any], key: str, default: float | None = None,
                  where: str = "config.json", low: float = 0.0, high: float | None = None,
                  closed: bool = False, what: str = "a finite number") -> float:
    """config[key]: a finite number float32 can hold, above low and below high if given
    (closed: low and high themselves allowed), or one line naming it."""
    value = config.get(key, default)
    in_range = (not isinstance(value, bool) and isinstance(value, int | float) and finite(value)
                and (value >= low if closed else value > low)
                and (high is None or (value <= high if closed else value < high)))
    if not in_range:
        bounds = (f"from {low:g}" if closed else f"above {low:g}") + (
            "" if high is None else f" {'to' if closed else 'and below'} {high:g}")
        raise AttnCliError(f"{where}: {key} must be {what} {bounds} (got {shown(value)})")
    return float(cast(float, value))


def config_flag(config: dict[str, Any], key: str, default: bool,
                where: str = "config.json") -> bool:
    """config[key]: true or false."""
    value = config.get(key, default)
    if not isinstance(value, bool):
        raise AttnCliError(f"{where}: {key} must be true or false (got {shown(value)})")
    return value


def config_str(config: dict[str, Any], key: str, default: str,
               where: str = "config.json") -> str:
    """config[key]: a string."""
    value = config.get(key, default)
    if not isinstance(value, str):
        raise AttnCliError(f"{where}: {key} must be a string (got {shown(value)})")
    return value


def epsilon(config: dict[str, Any], key: str, default: float) -> float:
    """A norm's epsilon: a small positive number, since a large one flattens every row."""
    return config_number(config, key, default, high=1.0, what="a small positive number")


def layer_index(layer: int, n_layer: int) -> int:
    """The 0-based index of --layer in an n_layer model, which may count from the end (-1 is
    the last); one line naming the range otherwise."""
    if not -n_layer <= layer < n_layer:
        raise AttnCliError(f"layer {layer} is out of range for this {n_layer}-layer model "
                           f"(use 0..{n_layer - 1}, or -{n_layer}..-1 from the end)")
    return layer % n_layer


def check_ids(token_ids: list[int], vocab_size: int) -> None:
    """Refuse empty input and token ids outside the model's vocabulary."""
    if not token_ids:
        raise AttnCliError("no tokens to run: the text is empty")
    for position, token_id in enumerate(token_ids):
        if not 0 <= token_id < vocab_size:
            raise AttnCliError(f"token id {token_id} at position {position} is outside the "
                               f"model's vocabulary (0..{vocab_size - 1})")
