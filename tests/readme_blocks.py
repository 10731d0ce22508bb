"""The fenced blocks of README.md and of every docs/**/*.md page, read as commands and the output
each shows, and compared with what the commands really print."""

from __future__ import annotations

import difflib
import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from tests.tolerance import near

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
# Every Markdown page whose command blocks are run: the README, then the docs site's pages.
DOCUMENTS = [README, *sorted(p for p in DOCS.rglob("*.md") if "_build" not in p.parts)]
ELISION = "…"  # a line of this alone stands for any number of lines of the real output
ABSENT = "(absent)"  # how a key that one side lacks is named in a difference
FENCE = re.compile(r"^```(\S*).*$")
JQ_PATH = re.compile(r"\.|(\.[A-Za-z_]\w*|\[-?\d+\])+")
SHELL_SYNTAX = {"|", "||", "&", "&&", ";", "<", ">", ">>", "<&", ">&", "(", ")"}

# What `attncli cost` prints that changes from run to run, masked on both sides of a comparison:
# (name, pattern, replacement).
TIMINGS = [
    ("a time", r" *\d[\d,]*(?:\.\d+)? (?:ms|s)\b", " <time>"),
    # (– when the times did not grow with N, as on a loaded machine)
    ("a time's growth exponent", r"\b(naive|tiled) time (?:\d+\.\d+|–)", r"\1 time <exponent>"),
    # A column is as wide as its widest time, so the spaces between columns and the table's
    # rule follow the times too.
    ("the spaces between columns", r"(?<=\S)  +", "  "),
    ("the table's rule", r"^─+$", "<rule>"),
    # float32 rounding: which kernels torch picks differs by CPU (1.3e-06 on one, 1.2e-06 on
    # another); only a difference of float32 noise's size matches, a real error does not.
    ("the tiled-vs-naive difference", r"max \|diff\| [1-9]\.\de-0[67]\b",
     "max |diff| <float32 noise>"),
]

# The same rounding in the lessons' own checks: a difference of noise's size (float64's in
# permute, where the wrapped line starts with it, float32's in kvcache) reads as noise; a real
# difference does not match.
ROUNDING = [
    ("permute's float64 noise", r"\b[1-9]\.\de-1[5-7]\b", "<noise>"),
    ("kvcache's float32 noise", r"\b(weights|context) [1-9]\.\de-0[6-8]\b", r"\1 <noise>"),
]


# Where `attncli config` writes: the reader's settings file, each test's own here.
SETTINGS = [("the settings file", r" in \S*config\.toml$", " in <settings>")]


@dataclass(frozen=True)
class Block:
    """One fenced block: the line of its opening fence, its info string and its body, in the
    page named by source (its path from the repository root)."""

    line: int
    info: str
    body: tuple[str, ...]
    source: str = "README.md"

    @property
    def shows_commands(self) -> bool:
        """A console-style block: `$ command` lines, each followed by what it prints."""
        return any(line.startswith("$ ") for line in self.body)

    @property
    def lists_commands(self) -> bool:
        """A shell block that lists commands without their output."""
        return not self.shows_commands and self.info in ("sh", "bash", "shell")


@dataclass(frozen=True)
class Example:
    """One `$ command` of a console-style block and the lines the README shows under it."""

    line: int
    command: str
    shown: tuple[str, ...]
    source: str = "README.md"

    @property
    def width(self) -> int:
        """The COLUMNS the shown output implies: 80 when every line fits in 80, else 100."""
        widest = max((len(s.rstrip()) for s in self.shown), default=0)
        return 80 if widest <= 80 else 100


def prose() -> str:
    """The project's English prose, the README then each docs page: what the README alone was
    before it shrank, for the tests that need a long natural text."""
    return "\n".join(path.read_text(encoding="utf-8") for path in DOCUMENTS)


def document_blocks() -> list[Block]:
    """Every fenced block of every page in DOCUMENTS, in order."""
    return [b for path in DOCUMENTS
            for b in blocks(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))]


def blocks(text: str, source: str = "README.md") -> list[Block]:
    """Every fenced block of a Markdown text, in order; MyST's directives (```{toctree},
    ```{eval-rst}: Sphinx's instructions, not code) are left out."""
    found, lines = [], text.splitlines()
    k = 0
    while k < len(lines):
        match = FENCE.match(lines[k])
        if match is None:
            k += 1
            continue
        end = next((j for j in range(k + 1, len(lines)) if lines[j].startswith("```")), None)
        assert end is not None, f"{source}:{k + 1}: a fence that is never closed"
        if not match.group(1).startswith("{"):
            found.append(Block(k + 1, match.group(1), tuple(lines[k + 1:end]), source))
        k = end + 1
    return found


def _joined(lines: tuple[str, ...], start: int) -> tuple[str, int]:
    """The command starting at lines[start], with `\\` continuation lines joined, and the index
    of the line after it."""
    parts, k = [], start
    while True:
        line = lines[k]
        if line.rstrip().endswith("\\"):
            parts.append(line.rstrip()[:-1].strip())
            k += 1
            continue
        parts.append(line.strip())
        return " ".join(p for p in parts if p), k + 1


def examples(block: Block) -> list[Example]:
    """The `$ command` lines of a console-style block, each with the output shown under it."""
    found, k = [], 0
    while k < len(block.body):
        if not block.body[k].startswith("$ "):
            assert not found, f"{block.source}:{block.line + 1 + k}: output before any `$ ` command"
            k += 1
            continue
        line = block.line + 1 + k
        command, k = _joined(block.body, k)
        start = k
        while k < len(block.body) and not block.body[k].startswith("$ "):
            k += 1
        found.append(Example(line, command[2:], block.body[start:k], block.source))
    return found


def listed(block: Block) -> list[tuple[int, str]]:
    """The commands of a shell block (continuations joined, comments kept), with their lines."""
    found, k = [], 0
    while k < len(block.body):
        if not block.body[k].strip() or block.body[k].lstrip().startswith("#"):
            k += 1
            continue
        line = block.line + 1 + k
        command, k = _joined(block.body, k)
        found.append((line, command))
    return found


def stages(command: str) -> list[list[str]] | None:
    """The command's pipeline as argv lists, or None when it uses any other shell syntax."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    tokens = list(lexer)
    if any(t in SHELL_SYNTAX - {"|"} for t in tokens) or "$(" in command or "`" in command:
        return None
    found: list[list[str]] = [[]]
    for token in tokens:
        if token == "|":
            found.append([])
        else:
            found[-1].append(token)
    return found


def jq_equivalent(args: list[str], data: str) -> str:
    """What `jq [-c] PATH` prints for a path filter such as `.stages.dropped` or `.a[0][1]`
    (the README's only use of jq), for a machine without jq."""
    flags = [a for a in args if a.startswith("-")]
    filters = [a for a in args if not a.startswith("-")]
    assert set(flags) <= {"-c"} and len(filters) == 1, f"jq {args} has no Python equivalent here"
    path = filters[0]
    assert JQ_PATH.fullmatch(path), f"jq filter {path!r} has no Python equivalent here"
    steps = re.findall(r"\.([A-Za-z_]\w*)|\[(-?\d+)\]", path)
    value = json.loads(data)
    for key, index in steps:
        if key:
            value = value.get(key) if isinstance(value, dict) else None
        elif index:
            value = value[int(index)] if isinstance(value, list) else None
    if "-c" in flags:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False) + "\n"
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"


def _as_json(text: str) -> object | None:
    try:
        return json.loads(text, parse_constant=_refuse)
    except ValueError:
        return None


def _refuse(name: str) -> None:
    raise ValueError(f"non-strict JSON constant {name}")


def _same(shown: object, real: object) -> bool:
    """JSON equality by value: 1 and 1.0 are one number, but true is not 1."""
    if isinstance(shown, dict) and isinstance(real, dict):
        return shown.keys() == real.keys() and all(_same(shown[k], real[k]) for k in shown)
    if isinstance(shown, list) and isinstance(real, list):
        return len(shown) == len(real) and all(map(_same, shown, real))
    if isinstance(shown, bool) or isinstance(real, bool):
        return type(shown) is type(real) and shown == real
    if type(shown) in (int, float) and type(real) in (int, float):
        return shown == real or _float_near(shown, real)
    return type(shown) is type(real) and shown == real


def _float_near(shown: float, real: float) -> bool:
    """Within the house bound where either is a fraction: attncli computes in float32, and which
    matmul kernel torch picks differs by CPU (0.13854756951332092 with AVX2,
    0.13854758441448212 with AVX-512); two integers are equal or differ."""
    if isinstance(shown, int) and isinstance(real, int):
        return False
    return near(shown, real)


def _first_difference(shown: object, real: object, path: str) -> str:
    """Where two JSON values first differ, as a jq path with both values."""
    if isinstance(shown, dict) and isinstance(real, dict):
        for key in [*shown, *(k for k in real if k not in shown)]:
            a, b = shown.get(key, ABSENT), real.get(key, ABSENT)
            if not _same(a, b):
                return _first_difference(a, b, f"{path}.{key}")
    if isinstance(shown, list) and isinstance(real, list) and len(shown) == len(real):
        for k, (a, b) in enumerate(zip(shown, real, strict=True)):
            if not _same(a, b):
                return _first_difference(a, b, f"{path}[{k}]")
    return f"{path or '.'}: the page shows {json.dumps(shown)[:200]}, it prints " \
           f"{json.dumps(real)[:200]}"


def _trimmed(lines: list[str]) -> list[str]:
    lines = [line.rstrip() for line in lines]
    while lines and not lines[-1]:
        lines.pop()
    return lines


# A printed result of float maths: a decimal of three places or more, as weights, scores and
# contexts print (counts, ids, byte ratios and times, of fewer places, are compared as text).
DECIMAL = re.compile(r"-?\d+\.(\d{3,})(?:e[-+]?\d+)?")


def _line_same(shown: str, real: str) -> bool:
    """The same text, and each printed decimal within one unit of its last printed place: two
    results within the house bound of each other round to neighbours at most (0.1385 and 0.1386
    where the CPU's kernel moves the fifth digit), so a real error still differs."""
    if shown == real:
        return True
    if DECIMAL.sub("#", shown) != DECIMAL.sub("#", real):
        return False
    pairs = zip(DECIMAL.finditer(shown), DECIMAL.finditer(real), strict=True)
    return all(_decimal_near(a, b) for a, b in pairs)


def _decimal_near(shown: re.Match[str], real: re.Match[str]) -> bool:
    if shown.group(0) == real.group(0):
        return True
    places = len(shown.group(1))
    if places != len(real.group(1)) or "e" in shown.group(0) + real.group(0):
        return False
    # 1.5 units: one unit apart, with room for the binary rounding of the two decimals.
    return near(float(real.group(0)), float(shown.group(0)), atol=1.5 * 10.0**-places, rtol=0)


def _same_lines(shown: list[str], real: list[str]) -> bool:
    return len(shown) == len(real) and all(map(_line_same, shown, real))


def _matches(shown: list[str], real: list[str]) -> bool:
    """Whether the real lines are the shown ones, each `…` line standing for any run of lines."""
    parts: list[list[str]] = [[]]
    for line in shown:
        if line.strip() == ELISION:
            parts.append([])
        else:
            parts[-1].append(line)
    if len(parts) == 1:
        return _same_lines(shown, real)
    first, *middle, last = parts
    if not _same_lines(real[:len(first)], first) or len(real) < len(first) + len(last):
        return False
    if last and not _same_lines(real[len(real) - len(last):], last):
        return False
    at, end = len(first), len(real) - len(last)
    for part in middle:
        found = next((k for k in range(at, end - len(part) + 1)
                      if _same_lines(real[k:k + len(part)], part)), None)
        if found is None:
            return False
        at = found + len(part)
    return True


def differences(example: Example, printed: str, masks: list[tuple[str, str, str]]) -> str:
    """Empty when the printed output is what the page shows; else a diff that says why.

    JSON is compared by value; text line by line after trailing spaces are stripped and each
    mask (name, pattern, replacement) is applied to both sides."""
    shown_text = "\n".join(example.shown)
    shown_json = _as_json(shown_text) if shown_text.strip() else None
    if shown_json is not None:
        real_json = _as_json(printed)
        if _same(shown_json, real_json):
            return ""
        if real_json is None:
            return f"it prints no JSON:\n{printed[:2000]}"
        return f"its JSON differs at {_first_difference(shown_json, real_json, '')}"
    shown, real = _trimmed(list(example.shown)), _trimmed(printed.splitlines())
    for _, pattern, replacement in masks:
        shown = [re.sub(pattern, replacement, line) for line in shown]
        real = [re.sub(pattern, replacement, line) for line in real]
    if _matches(shown, real):
        return ""
    diff = "\n".join(difflib.unified_diff(shown, real, example.source, "printed", lineterm="",
                                         n=2))
    if any(line.strip() == ELISION for line in shown):
        return f"(each `{ELISION}` line of the page stands for any run of lines)\n{diff}"
    return diff
