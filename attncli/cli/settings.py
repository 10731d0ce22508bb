"""attncli's settings file and the default model.

The file is TOML, `model = "smollm2"`: $ATTNCLI_CONFIG, else $XDG_CONFIG_HOME/attncli/config.toml,
else ~/.config/attncli/config.toml. `attncli config` reads and writes it (written whole into a
temporary file beside it, then renamed over it: never half-written). The commands that need a
model (heads, generate, scan, browse --generate) take --model, else $ATTNCLI_MODEL, else the file's
`model`; run, explain and compare keep the book's chapter-3 variants without --model.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

from attncli.errors import AttnCliError, escaped
from attncli.models.stores.cachedir import xdg_base
from attncli.models.stores.paths import expanded, file_mode

CONFIG_ENV = "ATTNCLI_CONFIG"
MODEL_ENV = "ATTNCLI_MODEL"
KEYS = {"model": "the model heads, generate, scan and browse --generate use without --model "
                 "(a path, a store's name such as smollm2 or llama3.2:1b, ollama:NAME, ...)"}
LIMIT = 64 * 1024  # a settings file is a few lines


def config_path() -> Path:
    """$ATTNCLI_CONFIG, else $XDG_CONFIG_HOME/attncli/config.toml, else ~/.config/...."""
    if os.environ.get(CONFIG_ENV):
        return expanded(os.environ[CONFIG_ENV], CONFIG_ENV)
    base = xdg_base("XDG_CONFIG_HOME")
    try:
        root = Path(base).expanduser() if base else Path.home() / ".config"
    except RuntimeError:  # no HOME and no password entry
        raise AttnCliError(f"cannot find the home folder for attncli's settings; set "
                           f"{CONFIG_ENV} to a file") from None
    return root / "attncli" / "config.toml"


def _toml() -> Any:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover (the package requires tomli there)
        import tomli as tomllib
    return tomllib


def _parsed(path: Path) -> dict[str, Any]:
    """The file as TOML ({} where there is no file); what is not TOML is one line naming it."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO would wait, a device never end
            raise AttnCliError(f"attncli's settings {path} is not a regular file")
        with open(path, "rb") as stream:
            data = stream.read(LIMIT + 1)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as err:
        reason = getattr(err, "strerror", None) or err
        raise AttnCliError(f"cannot read attncli's settings {path}: {reason}") from None
    if len(data) > LIMIT:
        raise AttnCliError(f"attncli's settings {path} is over {LIMIT // 1024} KB: not a "
                           "settings file")
    tomllib = _toml()
    try:
        doc = tomllib.loads(data.decode("utf-8-sig"))  # a BOM, as Windows editors write one
    except UnicodeDecodeError:
        raise AttnCliError(f"attncli's settings {path} is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as err:
        raise AttnCliError(f"attncli's settings {path} is not TOML: {err}") from None
    except RecursionError:  # tomllib parses nested arrays and tables by recursion
        raise AttnCliError(f"attncli's settings {path} is not TOML: nested too deeply for a "
                           "settings file") from None
    return dict(doc)


def read_settings(path: Path | None = None) -> dict[str, str]:
    """The file's settings ({} where there is no file); bad content is one line naming it."""
    path = path or config_path()
    doc = _parsed(path)
    for key, value in doc.items():
        if key not in KEYS:
            raise AttnCliError(f"attncli's settings {path}: unknown setting {key!r} (known: "
                               f"{', '.join(KEYS)}); `attncli config unset {key}` removes it")
        if not isinstance(value, str) or not value:
            raise AttnCliError(f"attncli's settings {path}: {key} must be a non-empty string "
                               f"(got {json.dumps(value, default=str)[:60]})")
    return doc


def check_key(key: str) -> str:
    """key, refused in one line unless it is a setting attncli knows."""
    if key not in KEYS:
        raise AttnCliError(f"unknown setting {key!r} (known: {', '.join(KEYS)})")
    return key


def toml_line(key: str, value: str) -> str:
    """key = "value" in TOML: JSON's escapes are TOML's, and DEL is escaped too."""
    quoted = json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
    return f"{key} = {quoted}\n"


def write_setting(key: str, value: str | None, path: Path | None = None) -> Path:
    """Set key to value (None: remove it, even a key attncli does not know) in the file, written
    whole and renamed into place."""
    path = path or config_path()
    if value is None:  # the rest is kept as it is, right or wrong, for the next unset
        settings = {k: v for k, v in _parsed(path).items() if k != key and isinstance(v, str)}
    else:
        check_key(key)
        settings = {k: v for k, v in read_settings(path).items() if k != key}
    if value is not None:
        if not value or "\0" in value:
            raise AttnCliError(f"{key} must be a non-empty string without NUL")
        settings[key] = value
    text = "".join(toml_line(k, v) for k, v in sorted(settings.items()))
    try:
        encoded = text.encode("utf-8")
    except UnicodeEncodeError:
        raise AttnCliError(f"{key}'s value is not valid UTF-8 text") from None
    if len(encoded) > LIMIT:  # the file would be refused by every later read, unset too
        raise AttnCliError(f"{key}'s value would make attncli's settings over "
                           f"{LIMIT // 1024} KB ({len(encoded):,} bytes): not a setting")
    import tempfile

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".config-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(encoded)
            os.chmod(tmp, file_mode(path))  # a new file as open() makes it, an old one as it was
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError as err:
        raise AttnCliError(f"cannot write attncli's settings {path}: "
                           f"{err.strerror or err}") from None
    return path


def default_model() -> tuple[str, str] | None:
    """The default model and where it is set ($ATTNCLI_MODEL, or the file), None if nowhere."""
    if os.environ.get(MODEL_ENV):
        return os.environ[MODEL_ENV], MODEL_ENV
    path = config_path()
    model = read_settings(path).get("model")
    return (model, str(path)) if model else None


def needed_model(given: str | None, command: str, why: str = "") -> str:
    """--model, else the default model; one line saying how to give one where there is none."""
    if given:
        return given
    found = default_model()
    if found is None:
        raise AttnCliError(f"{command} needs --model{why}, or a default model: "
                           f"{MODEL_ENV}=NAME, or `attncli config set model NAME` "
                           "(`attncli pull smollm2` fetches a small one)")
    return found[0]


def default_note() -> str | None:
    """What --help says of the default model: "smollm2 (from ATTNCLI_MODEL)", None when there
    is none (or the settings cannot be read: the command itself will say why)."""
    try:
        found = default_model()
    except AttnCliError:
        return None
    return None if found is None else f"{escaped(found[0])} (from {escaped(found[1])})"
