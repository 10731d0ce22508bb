"""Looking at a path that may be hostile: false, never an exception, where it cannot be seen."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from attncli.errors import AttnCliError

_SPECIAL = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
            (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def is_file(path: Path) -> bool:
    """path.is_file(), false too where the path cannot be looked at (too long, unreadable)."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def is_dir(path: Path) -> bool:
    """path.is_dir(), false too where the path cannot be looked at (too long, unreadable)."""
    try:
        return path.is_dir()
    except (OSError, ValueError):
        return False


def exists(path: Path) -> bool:
    """path.exists(), false too where it cannot be looked at (a folder above it that may not be
    searched, a name too long), where Path.exists raises."""
    return os.path.exists(path)


def folder_state(path: Path) -> tuple[bool, str | None]:
    """(whether path is there, what is wrong with it as a folder: None for a folder or nothing
    there, "not a folder" for a file or device, or why it cannot be looked at)."""
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return False, None
    except OSError as err:  # EACCES from a folder above it, ELOOP, ENAMETOOLONG
        return False, f"cannot be looked at: {err.strerror or type(err).__name__}"
    except ValueError:  # a NUL byte
        return False, "cannot be looked at: a NUL byte in its name"
    return True, None if stat.S_ISDIR(mode) else "not a folder"


def file_mode(target: Path) -> int:
    """The permissions for a file written beside target and renamed over it (mkstemp makes it
    private): target's own where it is a file, else what a plain open() gives under the umask."""
    try:
        info = os.stat(target)
        if stat.S_ISREG(info.st_mode):
            return stat.S_IMODE(info.st_mode)
    except (OSError, ValueError):
        pass
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def is_model_gguf(name: str) -> bool:
    """A GGUF file name that holds a model: a vision projector (mmproj) does not."""
    lower = name.lower()
    return lower.endswith(".gguf") and "mmproj" not in lower


def special_kind(path: Path) -> str | None:
    """What path is (links followed) where it is a FIFO, a device or a socket, which an open()
    could wait on forever or read without end; None for a file, a folder or what cannot be seen."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    return next((kind for test, kind in _SPECIAL if test(mode)), None)


def expanded(value: str, what: str) -> Path:
    """value as a path, a leading ~ or ~user expanded; one line naming what (an environment
    variable, --model) where that home folder cannot be found."""
    try:
        return Path(value).expanduser()
    except RuntimeError:  # ~user of no such user, or ~ with no HOME and no password entry
        head = value.split("/", 1)[0]
        raise AttnCliError(f"{what} is {value!r}, but the home folder of {head} cannot be "
                           "found; give the folder's full path") from None
