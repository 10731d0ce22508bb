"""Red team, --model files: a FIFO, a character device or a socket given as a model, or in the
model's folder as a file a reader opens by name, is refused at once with one line naming it, by
every command that takes --model and by the Python API; nothing waits on it and nothing reads it.

An open() of a FIFO with no writer waits forever, so every case runs under an alarm whose
handler raises: a regression fails here instead of hanging the suite. The character device is
a link to /dev/zero (which never ends) and the FIFOs have no writer."""

from __future__ import annotations

import os
import shutil
import signal
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType

import gguf
import pytest

from attncli.errors import AttnCliError
from tests.conftest import ROOT
from tests.gguf_fixtures import write_model

TOY = ROOT / "samples" / "toy-gpt2"
ALARM_S = 60  # a hang guard only: a refusal takes a fraction of a second
KINDS = {"fifo": "a FIFO (named pipe)", "device": "a character device", "socket": "a socket"}
SUFFIXES = ["x.gguf", "x.safetensors", "x.bin", "x.pt", "x", "x.json"]
COMMANDS = {"run": ["run", "hi"], "heads": ["heads", "hi"], "explain": ["explain", "hi"],
            "tokens": ["tokens", "hi"], "kvcache": ["kvcache", "hi"],
            "permute": ["permute", "hi", "ho"], "browse": ["browse", "hi"]}


def _raise_timeout(signum: int, frame: FrameType | None) -> None:
    raise TimeoutError("attncli waited on a special file")


@pytest.fixture(autouse=True)
def no_hang() -> Iterator[None]:
    """A blocking open() is interrupted and fails the test (PEP 475 retries unless the handler
    raises)."""
    previous = signal.signal(signal.SIGALRM, _raise_timeout)
    signal.alarm(ALARM_S)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def sockets() -> Iterator[list[socket.socket]]:
    held: list[socket.socket] = []
    yield held
    for sock in held:
        sock.close()


def make_special(path: Path, kind: str, sockets: list[socket.socket]) -> None:
    """A FIFO without a writer, a link to /dev/zero, or a bound Unix socket at path."""
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        path.symlink_to("/dev/zero")
    else:
        sock = socket.socket(socket.AF_UNIX)
        sockets.append(sock)
        # bind() takes at most 107 bytes of path, and a test worker's tmp_path can be longer:
        # bound from inside the folder, by the file's own name.
        here = os.getcwd()
        os.chdir(path.parent)
        try:
            sock.bind(path.name)
        finally:
            os.chdir(here)


@pytest.fixture
def terminal_ok(monkeypatch: pytest.MonkeyPatch) -> None:
    """browse refuses without a terminal before it looks at --model: let it look."""
    from attncli.cli.commands import browse

    monkeypatch.setattr(browse, "check_terminal", lambda: None)


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("name", SUFFIXES)
def test_a_special_file_as_the_model_is_refused_by_every_command(
        cli, tmp_path: Path, sockets: list[socket.socket], terminal_ok: None,  # noqa: ANN001
        kind: str, name: str) -> None:
    path = tmp_path / name
    make_special(path, kind, sockets)
    for command in COMMANDS.values():
        got = cli(*command, "--model", str(path))
        got.assert_usage_error(f"attncli: error: {path} is {KINDS[kind]}, not a regular file or "
                               "folder, so attncli does not open it")


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("name", ["model.safetensors", "config.json", "tokenizer.json",
                                  "model.safetensors.index.json"])
def test_a_special_file_in_the_model_folder_is_refused_naming_it(
        cli, tmp_path: Path, sockets: list[socket.socket], terminal_ok: None,  # noqa: ANN001
        kind: str, name: str) -> None:
    folder = tmp_path / "model"
    shutil.copytree(TOY, folder)
    (folder / name).unlink(missing_ok=True)
    make_special(folder / name, kind, sockets)
    for command in COMMANDS.values():
        got = cli(*command, "--model", str(folder))
        got.assert_usage_error(f"attncli: error: {folder / name} is {KINDS[kind]}, not a "
                               "regular file or folder")


@pytest.mark.parametrize("name", ["config.json", "tokenizer.json"])
def test_a_fifo_beside_a_safetensors_file_is_refused(cli, tmp_path: Path,  # noqa: ANN001
                                                     name: str) -> None:
    folder = tmp_path / "model"
    shutil.copytree(TOY, folder)
    (folder / name).unlink(missing_ok=True)
    os.mkfifo(folder / name)
    if name == "config.json":  # read by every safetensors run
        got = cli("run", "hi", "--model", str(folder / "model.safetensors"))
        got.assert_usage_error(f"{folder / name} is a FIFO (named pipe)")
    from attncli.models.sources.safetensors import SafetensorsSource

    reader = SafetensorsSource(folder / "model.safetensors")
    read = reader.config if name == "config.json" else reader.tokenizer_json
    with pytest.raises(AttnCliError, match="is a FIFO"):  # GPT-2's is read only by some runs
        read()


def test_another_safetensors_file_that_is_a_fifo_is_refused(cli, tmp_path: Path) -> None:  # noqa: ANN001
    """The folder's only *.safetensors entry, under another name, is looked at before opened."""
    os.mkfifo(tmp_path / "weights.safetensors")
    got = cli("run", "hi", "--model", str(tmp_path))
    got.assert_usage_error(f"{tmp_path / 'weights.safetensors'} is a FIFO (named pipe)")


def test_a_gguf_file_runs_beside_a_fifo_it_never_reads(cli, tmp_path: Path) -> None:  # noqa: ANN001
    """The control: a GGUF holds its own config, so a FIFO config.json beside it is no concern."""
    write_model(tmp_path / "m.gguf", "llama", gguf.GGMLQuantizationType.F32)
    os.mkfifo(tmp_path / "config.json")
    got = cli("run", "hi", "--model", str(tmp_path / "m.gguf"), "--json")
    assert got.code == 0, got.err
    assert got.json()["model"]["layers"] == 2


def _api_calls() -> dict[str, Callable[[str], object]]:
    import attncli

    return {"run": lambda m: attncli.run("hi", model=m),
            "explain": lambda m: attncli.explain("hi", model=m),
            "heads": lambda m: attncli.heads("hi", model=m)}


@pytest.mark.parametrize("call", ["run", "explain", "heads"])
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_api_refuses_a_special_model_file(tmp_path: Path, sockets: list[socket.socket],
                                              call: str, kind: str) -> None:
    path = tmp_path / "m.gguf"
    make_special(path, kind, sockets)
    with pytest.raises(AttnCliError, match=f"is {KINDS[kind][:5]}.*not a regular file"):
        _api_calls()[call](str(path))


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_format_sniffs_never_open_a_special_file(tmp_path: Path, sockets: list[socket.socket],
                                                     kind: str) -> None:
    """The pickle sniff and the GGUF sniff look at what a path is before they read its bytes."""
    from attncli.models.sources.formats import is_gguf
    from attncli.models.sources.gguf.header import read_header
    from attncli.models.stores.locate import is_pickle

    for name in ("x", "x.bin", "x.gguf"):
        make_special(tmp_path / name, kind, sockets)
        assert is_pickle(tmp_path / name) is False
    assert is_gguf(tmp_path / "x") is False and is_gguf(tmp_path / "x.bin") is False
    with pytest.raises(AttnCliError, match="is not a regular file, so not a GGUF file"):
        read_header(tmp_path / "x.gguf")
