"""attncli's settings file (cli/settings.py): where it is, what it may hold, written whole and
renamed into place, bad content one line; and the default model it gives."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from attncli.cli import settings
from attncli.errors import AttnCliError


@pytest.fixture
def path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    file = tmp_path / "conf" / "config.toml"
    monkeypatch.setenv("ATTNCLI_CONFIG", str(file))
    return file


def test_the_file_is_attncli_config_then_xdg_then_home(monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path) -> None:
    monkeypatch.setenv("ATTNCLI_CONFIG", "~/own.toml")
    assert settings.config_path() == Path.home() / "own.toml"
    monkeypatch.delenv("ATTNCLI_CONFIG")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert settings.config_path() == tmp_path / "attncli" / "config.toml"
    monkeypatch.delenv("XDG_CONFIG_HOME")
    assert settings.config_path() == Path.home() / ".config" / "attncli" / "config.toml"
    monkeypatch.setenv("XDG_CONFIG_HOME", "relative/config")  # the XDG spec: ignored
    assert settings.config_path() == Path.home() / ".config" / "attncli" / "config.toml"


@pytest.mark.parametrize("value", ["smollm2", 'a "quoted" \\ path', "ollama:llama3.2:1b",
                                   "模型/名字", "tab\there", "del\x7fand\x1besc", "😀 emoji"])
def test_a_value_is_written_as_toml_and_read_back_the_same(path: Path, value: str) -> None:
    settings.write_setting("model", value)
    assert settings.read_settings() == {"model": value}
    # real TOML, as tomllib (tomli before 3.11) reads it
    assert settings._toml().loads(path.read_text(encoding="utf-8")) == {"model": value}
    assert [p.name for p in path.parent.iterdir()] == ["config.toml"]  # no temporary left


def test_unset_removes_the_key_and_keeps_the_file(path: Path) -> None:
    settings.write_setting("model", "smollm2")
    settings.write_setting("model", None)
    assert path.read_text(encoding="utf-8") == "" and settings.read_settings() == {}
    assert settings.read_settings(path.parent / "absent.toml") == {}


def test_a_failed_write_leaves_the_old_file_whole(path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    settings.write_setting("model", "first")

    def no_rename(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", no_rename)
    with pytest.raises(AttnCliError, match="cannot write attncli's settings .*No space left"):
        settings.write_setting("model", "second")
    assert settings.read_settings() == {"model": "first"}
    assert [p.name for p in path.parent.iterdir()] == ["config.toml"]


@pytest.mark.parametrize(("content", "message"), [
    (b"model = [", "is not TOML: "),
    (b"modle = 'x'", "unknown setting 'modle' (known: model); `attncli config unset modle` "
                     "removes it"),
    (b"model = 3", "model must be a non-empty string (got 3)"),
    (b"model = ''", "model must be a non-empty string"),
    (b"model = '\xff'", "is not UTF-8 text"),
    (b"x" * (settings.LIMIT + 1), "is over 64 KB: not a settings file"),
    # tomllib parses arrays and inline tables by recursion: a few hundred levels overflow it
    (b"x = " + b"[" * 5000 + b"]" * 5000, "is not TOML: nested too deeply"),
    (b"x = " + b"{a=" * 900 + b"1" + b"}" * 900, "is not TOML: nested too deeply"),
])  # fmt: skip
def test_bad_content_is_one_line_naming_the_file(path: Path, content: bytes,
                                                 message: str) -> None:
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    with pytest.raises(AttnCliError) as err:
        settings.read_settings()
    assert str(err.value).startswith(f"attncli's settings {path}") and message in str(err.value)
    assert "\n" not in str(err.value)


def test_a_fifo_or_a_folder_is_refused_without_waiting(path: Path) -> None:
    path.parent.mkdir(parents=True)
    os.mkfifo(path)
    with pytest.raises(AttnCliError, match="is not a regular file"):
        settings.read_settings()
    path.unlink()
    path.mkdir()
    with pytest.raises(AttnCliError, match="is not a regular file"):
        settings.read_settings()


def test_unset_takes_away_a_key_attncli_does_not_know(path: Path) -> None:
    path.parent.mkdir(parents=True)
    path.write_text('modle = "x"\nmodel = "m"\n', encoding="utf-8")
    settings.write_setting("modle", None)
    assert settings.read_settings() == {"model": "m"}
    path.unlink()  # an unknown key is refused before any file is read
    with pytest.raises(AttnCliError, match="unknown setting 'colour' \\(known: model\\)"):
        settings.write_setting("colour", "red")
    assert not path.exists()


def test_the_default_model_comes_from_the_environment_then_the_file(
        path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert settings.default_model() is None and settings.default_note() is None
    settings.write_setting("model", "smollm2")
    assert settings.default_model() == ("smollm2", str(path))
    monkeypatch.setenv("ATTNCLI_MODEL", "ollama:llama3.2:1b")
    assert settings.default_model() == ("ollama:llama3.2:1b", "ATTNCLI_MODEL")
    assert settings.default_note() == "ollama:llama3.2:1b (from ATTNCLI_MODEL)"
    assert settings.needed_model("given", "heads") == "given"
    assert settings.needed_model(None, "heads") == "ollama:llama3.2:1b"


def test_without_any_model_the_line_says_how_to_set_one(path: Path) -> None:
    with pytest.raises(AttnCliError) as err:
        settings.needed_model(None, "generate", " (the decoder that answers)")
    assert str(err.value) == (
        "generate needs --model (the decoder that answers), or a default model: "
        "ATTNCLI_MODEL=NAME, or `attncli config set model NAME` (`attncli pull smollm2` "
        "fetches a small one)")


def test_the_file_gets_a_plain_file_s_permissions_and_keeps_its_own(path: Path) -> None:
    """It was written through mkstemp and kept its private 0600, over a file's own mode too."""
    old = os.umask(0o022)
    try:
        settings.write_setting("model", "first")
        assert stat.S_IMODE(path.stat().st_mode) == 0o644
        path.chmod(0o640)
        settings.write_setting("model", "second")
        assert stat.S_IMODE(path.stat().st_mode) == 0o640
    finally:
        os.umask(old)


def test_a_value_too_long_for_the_file_is_refused_before_it_is_written(path: Path) -> None:
    """It was written, and every later read refused the file, config set and unset too."""
    settings.write_setting("model", "first")
    with pytest.raises(AttnCliError, match=r"model's value would make attncli's settings over "
                                           r"64 KB \(70,011 bytes\): not a setting"):
        settings.write_setting("model", "a" * 70_000)
    assert settings.read_settings() == {"model": "first"}



def test_a_byte_order_mark_is_read_past(path: Path) -> None:
    """Notepad and other Windows editors start a UTF-8 file with a BOM: it was 'not TOML:
    Invalid statement (at line 1, column 1)' for a file that reads right in the editor."""
    path.parent.mkdir(parents=True)
    path.write_bytes(b'\xef\xbb\xbfmodel = "smollm2"\r\n')
    assert settings.read_settings() == {"model": "smollm2"}
