"""What the commands handed down (issue #39, thin commands), tested in its new home in-process:
show's view of a saved file (saved/shown.py, render/saved.py), browse's terminal, exit
and saver, the lessons' checks, scan's and heads' groups, the generation helpers, and the
Output and Chapter3 methods the commands share."""

from __future__ import annotations

import io
import json
import os
import re
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import typer
from rich.console import Console
from rich.text import Text

import attncli.cli
from attncli.cli.options import Chapter3, Encoding, Output, Source
from attncli.core.display import Window
from attncli.core.request import Extract, Request
from attncli.core.result import TokenInfo
from attncli.core.variants import Variant
from attncli.errors import AttnCliError
from attncli.saved.shown import check_inside, refuse_unused, saved_doc, shown_view

SENTENCE = "Your journey starts with one step"


def _run(text: str = SENTENCE, **extract: Any) -> Any:
    from attncli.models.run import run_request

    impl = extract.pop("impl", "auto")
    return run_request(Request(text=text, variant=Variant.causal, impl=impl), Extract(**extract))


# show: what a saved file's kind refuses, its view, its JSON.

@pytest.mark.parametrize(("kind", "given", "attended", "message"), [
    ("run", [], True, "--at, --layers, --combine, --keep-sinks and --view raw|value|occlusion "
     "apply to `generate` JSON only"),
    ("heads", [], True, "--at, --layers, --combine, --keep-sinks and --view"),
    ("heads", ["--cols", "--head"], False, "--head does not apply to `heads` JSON: it holds each "
     "head's measures, not its weights"),
    ("scan", ["--rows"], False, "--rows does not apply to `heads` JSON"),
    ("generate", ["--show", "--query"], False, "--query does not apply to `generate` JSON: "
     "choose the answer token with --at"),
])
def test_refuse_unused_names_the_first_option_a_kind_has_no_use_for(
        kind: str, given: list[str], attended: bool, message: str) -> None:
    with pytest.raises(AttnCliError, match="^" + re.escape(message)):
        refuse_unused(kind, given, attended)


@pytest.mark.parametrize(("kind", "given", "attended"), [
    ("run", ["--head", "--query", "--show", "--rows", "--cols"], False),
    ("compare", ["--rows"], False),
    ("generate", ["--head"], True),
    ("heads", [], False),
])
def test_refuse_unused_lets_what_a_kind_draws_pass(kind: str, given: list[str],
                                                   attended: bool) -> None:
    refuse_unused(kind, given, attended)


def test_shown_view_takes_the_saved_window_and_stages_unless_given() -> None:
    windowed = _run(stages=("scores",), rows=Window("--rows", 1, 3))
    windows, stages = shown_view(windowed, (None, None), None)
    assert windows == (Window("--rows", 1, 3), Window("--cols", 0, 6))
    assert stages == ("scores",)
    mine = (Window("--rows", 0, 2), None)
    assert shown_view(windowed, mine, ("weights",)) == ((mine[0], Window("--cols", 0, 6)),
                                                        ("weights",))
    whole = _run(stages=())
    assert shown_view(whole, (None, None), None) == ((None, None), None)


def test_shown_view_leaves_a_tiled_runs_own_corner_and_keeps_no_stages() -> None:
    tiled = _run(impl="tiled")
    assert tiled.long is not None and tiled.window == {"rows": [0, 6], "cols": [0, 6]}
    assert shown_view(tiled, (None, None), None) == ((None, None), None)
    shown = _run(impl="tiled", rows=Window("--rows", 2, 4))
    assert shown_view(shown, (None, None), None)[0][0] == Window("--rows", 2, 4)


def test_check_inside_holds_a_tiled_file_to_its_window() -> None:
    tiled = _run(impl="tiled", rows=Window("--rows", 2, 4))
    check_inside(tiled, (2, 3), None)
    with pytest.raises(AttnCliError, match=r"^--rows 1:3 is outside the window this file holds "
                                           r"\(--rows 2:4\); run it again with --rows 1:3$"):
        check_inside(tiled, (1, 3), None)
    check_inside(_run(), (0, 6), (5, 6))  # a naive run holds every weight


def test_saved_doc_is_what_the_saving_command_writes() -> None:
    first, second = _run(), _run("one two three four five six")
    assert saved_doc("run", [first], {"ignored": 1}) == first.to_dict()
    assert saved_doc("compare", [first, second], {}) == {
        "kind": "compare", "variants": [first.to_dict(), second.to_dict()]}
    weights = saved_doc("weights", [first], {})
    assert weights == {"kind": "weights", "tokens": [t.to_dict() for t in first.tokens],
                       "weights": first.weights}
    summary: dict[str, Any] = {"kind": "scan", "scan": {}, "heads": []}
    assert saved_doc("scan", [first], summary) == summary  # its strings escaped (none here)
    assert saved_doc("scan", [first], {"scan": {}}) == {"kind": "scan", "scan": {}}


def test_render_file_draws_weights_without_stages_and_runs_as_run_does() -> None:
    from attncli.core.display import View, display_of
    from attncli.render.run import render_run
    from attncli.render.saved import render_file, render_saved
    from tests.conftest import rendered

    result = _run(stages=("scores",))
    display = display_of(result, 4, View.table, stages=("scores",))
    assert rendered(lambda c: render_file(c, "run", [result], display)) == \
        rendered(lambda c: render_run(c, result, display))
    bare = display_of(result, 4, View.table)
    assert rendered(lambda c: render_file(c, "weights", [result], display)) == \
        rendered(lambda c: render_saved(c, result, bare))


# browse: the terminal, the exit, the saver, a saved generation.

def test_check_terminal_refuses_a_pipe_and_a_dumb_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    from attncli.browse.terminal import check_terminal

    monkeypatch.setattr(os, "isatty", lambda fd: fd != 1)
    with pytest.raises(AttnCliError, match="standard output is not one"):
        check_terminal()
    monkeypatch.setattr(os, "isatty", lambda fd: True)
    monkeypatch.setenv("TERM", "dumb")
    with pytest.raises(AttnCliError, match="a TERM=dumb terminal is not one"):
        check_terminal()
    monkeypatch.setenv("TERM", "xterm-256color")
    check_terminal()


def test_run_in_terminal_runs_the_app_and_says_whether_a_worker_is_left(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from attncli.browse import terminal
    from attncli.browse.app import WORKER

    monkeypatch.setattr(threading, "excepthook", threading.excepthook)  # restored after
    made: list[Any] = []
    release = threading.Event()

    class App:
        def __init__(self, source: Any, save: Any, driver_class: Any) -> None:
            made.append((source, save, getattr(driver_class, "__name__", None)))
            self.return_code: int | None = None

        def run(self) -> None:  # Textual draws on stderr: here, stdout's terminal
            made.append(os.path.samestat(os.fstat(1), os.fstat(2)))
            self.return_code = 130
            threading.Thread(target=release.wait, name=WORKER, daemon=True).start()

    monkeypatch.setattr("attncli.browse.app.BrowseApp", App)
    stderr = os.fstat(2)
    assert not os.path.samestat(os.fstat(1), stderr)  # pytest captures the two apart
    try:
        assert terminal.run_in_terminal("source", "saver") == (130, True)  # type: ignore[arg-type]
    finally:
        release.set()
    assert made == [("source", "saver", "Driver"), True]  # the driver that reads on
    assert os.path.samestat(os.fstat(2), stderr)  # stderr is back for the messages
    assert threading.excepthook is terminal._quiet_lost_terminal


def test_leave_exits_at_once_only_while_a_worker_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    from attncli.cli import streams

    streams.leave(0, busy=False)
    with pytest.raises(typer.Exit) as raised:
        streams.leave(3, busy=False)
    assert raised.value.exit_code == 3
    exits: list[int] = []

    class Exited(Exception):
        pass

    def fake_exit(code: int) -> None:
        exits.append(code)
        raise Exited

    monkeypatch.setattr(os, "_exit", fake_exit)
    with pytest.raises(Exited):
        streams.leave(0, busy=True)
    monkeypatch.setattr(streams, "was_interrupted", lambda: True)
    monkeypatch.setattr(streams, "interruption", lambda: ("terminated", 143))
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    with pytest.raises(Exited):
        streams.leave(0, busy=True)
    assert exits == [0, 143]
    assert err.getvalue() == "attncli: error: terminated\n"


def test_saver_writes_each_screen_under_a_fresh_name(tmp_path: Path) -> None:
    from attncli.cli.output import Saver

    save = Saver(tmp_path / "screens")
    first, second = save("txt", "simple attention\n", None), save("txt", "again\n", None)
    assert [Path(first).name, Path(second).name] == ["attncli-browse-1.txt",
                                                     "attncli-browse-2.txt"]
    assert Path(first).read_text() == "simple attention\n"
    console = Console(record=True, file=io.StringIO(), width=40)
    console.print("simple attention")
    svg = Path(save("svg", console.export_svg(title="attncli browse"), None)).read_text()
    assert "simple" in svg and "font-face" not in svg and "cdnjs" not in svg  # fetches nothing
    blocked = tmp_path / "file"
    blocked.write_text("")
    with pytest.raises(AttnCliError, match=f"^--save-dir {blocked}"):
        Saver(blocked)("txt", "simple attention\n", None)


def test_saved_generation_refuses_what_generate_never_writes(tmp_path: Path) -> None:
    from attncli.browse.generation import saved_generation

    path = tmp_path / "list.json"
    path.write_text("[1, 2]")
    with pytest.raises(AttnCliError, match="^--generation takes `attncli generate --json`"):
        saved_generation(str(path))


# The lessons: --keep, the shown head, flash.

@pytest.mark.parametrize(("given", "message"), [
    ({"model": None}, "--keep needs --model"),
    ({"layer": 1, "page": True}, "--keep evicts keys in every layer"),
    ({"page": True, "head": 1}, "--keep draws no page: use --save-json, or --save with .svg"),
    ({"head": 1}, "--keep measures every layer and head together"),
])
def test_check_keep_refuses_in_the_commands_order(given: dict[str, Any], message: str) -> None:
    from attncli.lessons.streaming import check_keep

    args = {"model": "m", "layer": None} | given
    with pytest.raises(AttnCliError, match="^" + message):
        check_keep("sinks:2,window:4", **args)


def test_check_keep_parses_what_applies() -> None:
    from attncli.lessons.streaming import check_keep

    assert check_keep("sinks:2,window:4", "m", None) == (2, 4)


def test_kvcache_lesson_refuses_a_head_the_run_lacks() -> None:
    from attncli.lessons.kvcache import kvcache_lesson

    request = Request(text=SENTENCE, variant=Variant.multihead, heads=2)
    assert len(kvcache_lesson(request, head=1).steps[0].weights) == 2
    with pytest.raises(AttnCliError, match=r"^--head 2 is out of range \(use 0..1\)$"):
        kvcache_lesson(request, head=2)


def test_flash_lesson_is_flash_on_the_requests_lesson() -> None:
    from attncli.lessons.flash import flash, flash_lesson
    from attncli.lessons.setup import build, lesson_config

    request = Request(text=SENTENCE, variant=Variant.multihead, heads=2)
    assert flash_lesson(request, 2, 3, 1).to_dict() == flash(
        build(request), lesson_config(request), 2, 3, 1).to_dict()


# scan and heads: their groups and checks.

def test_check_scan_wants_pyarrow_then_a_model(monkeypatch: pytest.MonkeyPatch) -> None:
    from attncli.scan.run import check_scan

    pytest.importorskip("pyarrow")
    assert check_scan("m") == "m"
    with pytest.raises(AttnCliError, match=r"^attncli scan needs --model PATH\|NAME$"):
        check_scan(None)
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow raises ImportError
    with pytest.raises(AttnCliError, match="^scan writes Parquet and needs pyarrow"):
        check_scan(None)


def test_scanning_builds_the_settings_and_plan() -> None:
    from attncli.cli.scoring import Scanning
    from attncli.scan.plan import ScanPlan
    from attncli.scan.pool import usable_cores
    from attncli.scan.worker import ScanSettings, TooLong

    assert ScanSettings.too_long == TooLong.cut.value
    scanning = Scanning(field="body", max_tokens=64, too_long=TooLong.skip, ray="",
                        part_size=8, threshold=0.5)
    assert scanning.settings("m", Encoding(allow_special=True)) == ScanSettings(
        model="m", encoding="gpt2", allow_special=True, max_tokens=64, too_long="skip")
    assert scanning.plan(Path("c"), Path("o")) == ScanPlan(Path("c"), Path("o"), "body",
                                                          usable_cores(), None, 8, 0.5)
    assert Scanning(workers=3, ray="local").plan(Path("c"), Path("o")).workers == 3


def test_heads_takes_its_options_record_and_checks_the_probe_against_the_text() -> None:
    """HeadsOptions' fields are heads' options: --layers parsed by its marker, --probe one of
    its choices; a probe and a text together are refused in one line."""
    import attncli.cli.commands  # noqa: F401  (registers every command)
    from attncli.cli.scoring import scored_text
    from attncli.records.heads import HeadsOptions

    probing = HeadsOptions(probe="previous", probe_length=7)
    with pytest.raises(AttnCliError, match="^--probe previous runs on its own random tokens"):
        scored_text(probing, Source(text="a b"))
    assert scored_text(probing, Source()) == ""
    assert scored_text(HeadsOptions(), Source(text="a b")) == "a b"
    command = typer.main.get_command(attncli.cli.app.app).commands["heads"]  # type: ignore[attr-defined]
    ctx = typer.Context(command, info_name="heads")
    layers = next(p for p in command.get_params(ctx) if p.name == "layers")
    probe = next(p for p in command.get_params(ctx) if p.name == "probe")
    assert layers.type.convert("1:3", layers, ctx) == Window("--layers", 1, 3)
    assert list(probe.type.choices) == ["induction", "previous", "duplicate"]
    with pytest.raises(AttnCliError, match="--layers"):
        layers.type.convert("x", layers, ctx)
    with pytest.raises(AttnCliError, match="--probe-length must be from 1 to 4096"):
        HeadsOptions(probe_length=0)


# Generation: the template's JSON and the answer's call.

def test_prompt_to_dict_is_show_templates_json() -> None:
    from attncli.models.generate.prompt import Prompt
    from attncli.records.given import Template

    tokens = [TokenInfo(0, 5, "Hi", "4869")]
    prompt = Prompt(tokens, [5], "Hi", Template(True, "tokenizer_config.json"), frozenset(), [0])
    assert prompt.to_dict() == {"kind": "template", "given": "Hi",
                                "template": {"used": True, "origin": "tokenizer_config.json"},
                                "prompt": [{"index": 0, "id": 5, "text": "Hi", "bytes": "4869"}]}


def test_cli_groups_declare_and_never_run_a_model() -> None:
    """The option groups (cli/*.py beside commands/) read and check what is given; the doors
    that run a model are called from the commands alone."""
    import ast

    doors = {"generate_model", "run_request", "run_heads", "open_model", "permute_lesson",
             "kvcache_lesson", "streaming_model", "flash_lesson"}
    folder = Path(attncli.cli.__file__).parent
    found = []
    for path in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            name = node.id if isinstance(node, ast.Name) else \
                node.attr if isinstance(node, ast.Attribute) else None
            if name in doors:
                found.append(f"{path.name}: {name}")
    assert found == []
    commands = (folder / "commands" / "generate.py").read_text(encoding="utf-8")
    assert "generate_model(" in commands  # the check is not vacuous


# What the commands share: Output, Chapter3, request_of.

class _Record:
    def to_dict(self) -> dict[str, Any]:
        return {"x": 1.5}


def _render(console: Console, record: _Record, label: str, *, end: str = "") -> Text:
    return Text(f"{label}={record.to_dict()['x']}{end}")


def test_deliver_result_writes_the_records_json_or_its_renderer(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    Output(as_json=True).deliver_result(_Record(), _render, "x")
    assert json.loads(capsys.readouterr().out) == {"x": 1.5}
    saved = tmp_path / "r.json"
    Output(save_json=saved).deliver_result(_Record(), _render, "x", end="!")
    assert capsys.readouterr().out == "x=1.5!\n"
    assert json.loads(saved.read_text()) == {"x": 1.5}


def test_output_page_and_chapter3_shared() -> None:
    from attncli.core.compare import Shared

    assert Output(save=Path("a.HTML")).page() and not Output(save=Path("a.term.html")).page()
    assert not Output().page()
    assert Chapter3(d_out=4, heads=2, dropout=0.1).shared() == Shared(d_out=4, heads=2,
                                                                     dropout=0.1)


def test_request_of_lives_in_requests_and_options_still_exports_it() -> None:
    from attncli.cli import options, requests

    assert options.request_of is requests.request_of
