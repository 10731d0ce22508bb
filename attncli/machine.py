"""What this machine has room for: the memory that may be allocated now (MemAvailable, and the
address space an RLIMIT_AS leaves), the one check that refuses what would not fit in half of it,
and reads bounded before they are made. Every part estimates its own sizes and asks here."""

from __future__ import annotations

import os
import resource
import stat
import sys
from pathlib import Path
from typing import BinaryIO

from attncli.errors import AttnCliError

READ_LIMIT = 64 * 2**20  # bytes read from --file, --inputs or standard input
UNKNOWN_MEMORY = 2**40  # the bound used where the memory available cannot be read


def size_text(num_bytes: float) -> str:
    """A byte count for people: 512 MB, 9.1 GB."""
    if num_bytes >= 1e12:
        return f"{num_bytes / 1e12:,.1f} TB"
    return f"{num_bytes / 1e9:.1f} GB" if num_bytes >= 1e9 else f"{num_bytes / 1e6:.0f} MB"


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None


def _address_space_left() -> int | None:
    """What RLIMIT_AS leaves of the address space, or None without a limit."""
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return None
    return max(soft - _vm_size(), 0)


def _vm_size() -> int:
    """Bytes of address space this process holds now (0 where /proc cannot tell)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            return next(int(line.split()[1]) * 1024 for line in status
                        if line.startswith("VmSize:"))
    except (OSError, ValueError, StopIteration):
        return 0


def memory_available() -> int:
    """Bytes the machine's processes together may use now (MemAvailable): an address-space
    limit is each process's own, so it does not bound several."""
    free = _meminfo_available()
    return free if free is not None else UNKNOWN_MEMORY


def available_bytes() -> int:
    """Bytes that may be allocated now: the smaller of free memory and the address space left."""
    known = [b for b in (_meminfo_available(), _address_space_left()) if b is not None]
    return min(known) if known else UNKNOWN_MEMORY


# Address space that loading each package maps: VmSize after the import less before, with the
# CPU wheels on x86-64 (numpy 120 MB; torch 480 MB more, and numpy's where it loads it), plus
# a margin. With less, the loaders fail inside C, not with a MemoryError: OpenBLAS exits 1,
# libtorch aborts on std::bad_alloc, dlopen's ImportError is a traceback.
LOAD_SPACE = {"numpy": 128 * 2**20, "torch": 496 * 2**20}


def check_loadable(package: str) -> None:
    """Refuse in one line, before package loads, where an address-space limit (ulimit -v)
    leaves less than loading it maps."""
    need = LOAD_SPACE.get(package, 0)
    if package == "torch" and "numpy" not in sys.modules:
        need += LOAD_SPACE["numpy"]
    left = _address_space_left()
    if left is not None and left < need:
        raise AttnCliError(f"out of memory: loading {package} maps about {size_text(need)} of "
                           f"address space, and the limit (ulimit -v) leaves {size_text(left)}; "
                           "raise the limit")


def fits(need: int, free: int | None = None) -> bool:
    """Whether need is at most half the memory available (free: as available_bytes() found
    it): estimates are rough, and the process, its temporaries and the rest of the machine need
    the other half."""
    return need <= (available_bytes() if free is None else free) // 2


def check_fits(need: int, what: str, hint: str = "") -> None:
    """Refuse what needs more than half the memory available (fits)."""
    free = available_bytes()
    if not fits(need, free):
        raise AttnCliError(f"{what} ({size_text(need)}), more than half the {size_text(free)} "
                           f"available{'; ' + hint if hint else ''}")


def read_limited(stream: BinaryIO, what: str, limit: int = READ_LIMIT) -> bytes:
    """At most limit bytes of stream; more (a huge file, /dev/zero) is refused."""
    try:
        if stat.S_ISREG(os.fstat(stream.fileno()).st_mode):
            size = os.fstat(stream.fileno()).st_size
            if size > limit:
                raise AttnCliError(f"{what} holds {size:,} bytes, more than the "
                                   f"{limit // 2**20} MiB attncli reads")
    except (OSError, ValueError, AttributeError):
        pass  # not a real file (a test's BytesIO): the read below is bounded anyway
    data = stream.read(limit + 1)
    if len(data) > limit:
        raise AttnCliError(f"{what} goes on past the {limit // 2**20} MiB attncli reads "
                           "(a device or pipe that never ends?)")
    return data


def read_path_limited(path: Path, what: str) -> bytes:
    """At most READ_LIMIT bytes of the file at path (OSError for the caller to word)."""
    with open(path, "rb") as stream:
        return read_limited(stream, f"{what} {str(path)!r}")
