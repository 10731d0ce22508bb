"""The one error type attncli raises for bad usage or bad input, and the escaping that keeps
its message one clean line wherever it surfaces (the CLI's stderr, the Python API, browse)."""

import errno

# What a write to a closed descriptor, a full disk, a quota or a failing device reports: a
# write error, exit 1 (not bad input), wherever attncli writes.
WRITE_ERRNOS = (errno.EBADF, errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EPIPE)

# Unicode's explicit direction marks, embeddings, overrides and isolates: printed raw, they
# reverse or reorder what follows them on the line.
BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
                          "\u2066\u2067\u2068\u2069")


def escaped(text: str, lines: bool = False) -> str:
    """text with every control character written out (\\n, \\r, \\x1b, \\x9b, \\u202e…):
    one line, nothing a terminal would obey, and unchanged when escaped again; with lines, its
    line breaks and tabs are kept as they are."""
    if text.isprintable():  # nothing to escape: the common case, in C
        return text
    out = []
    for ch in text:
        if lines and ch in "\n\t":
            out.append(ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ord(ch) < 32 or ord(ch) == 127 or 0x80 <= ord(ch) < 0xA0:
            out.append(f"\\x{ord(ch):02x}")
        elif 0xD800 <= ord(ch) < 0xE000:  # a lone surrogate, which no output encoding holds
            out.append(f"\\u{ord(ch):04x}")
        elif ch in BIDI_CONTROLS:  # would reorder the rest of the terminal line
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return "".join(out)


class AttnCliError(Exception):
    """A user-facing problem: the CLI prints its message on one line and exits 2. The message
    is escaped when the error is made, so the API's errors are as clean as the CLI's."""

    exit_code = 2

    def __init__(self, message: object = "") -> None:
        super().__init__(escaped(str(message)))
