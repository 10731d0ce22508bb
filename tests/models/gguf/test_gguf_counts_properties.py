"""Property tests: any value, of any GGUF type, for a count or size key of any architecture the
GGUF config builder knows, either loads and runs (strict JSON, exit 0) or is exactly one line and
exit 2; never a traceback, never a per-layer table larger than the file's layers, never growth
past an address-space limit (this process's soft RLIMIT_AS, 1 GiB past what it holds, for each
run: tests.redteam.test_redteam.memory_headroom).

Each architecture's file is a tiny model written as llama.cpp's converter writes it
(tests.gguf_fixtures); each example copies it with one metadata value replaced
(tests.gguf_rewrite), through gguf's own reader rather than attncli's."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import gguf
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from attncli.errors import AttnCliError
from attncli.models.sources.gguf import describe_gguf, names, open_gguf, source
from attncli.models.sources.gguf.config import ARCHITECTURES
from attncli.models.sources.gguf.counts import COUNTS
from tests.gguf_fixtures import write_family, write_model
from tests.gguf_rewrite import T, rewrite
from tests.redteam.test_redteam import memory_headroom

WRITTEN = ("llama", "qwen2", "qwen3", "gpt2")  # by write_model; the rest from transformers models
FLOATS = ("rope.freq_base", "attention.layer_norm_rms_epsilon", "attention.layer_norm_epsilon",
          "rope.scaling.factor", "attn_logit_softcapping", "final_logit_softcapping")
KEYS = sorted(COUNTS) + list(FLOATS) + ["attention.sliding_window_pattern"]
SETTINGS = settings(max_examples=120, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])
EDGE_INTS = [0, 1, 2, 3, 4, 7, 16, 64, 96, 128, 10**7, 2**31, 2**32 - 1]
INTS = (st.tuples(st.just(T.UINT32), st.sampled_from(EDGE_INTS) | st.integers(0, 2**32 - 1))
        | st.tuples(st.just(T.UINT64), st.sampled_from([2**31, 2**63, 2**64 - 1])
                    | st.integers(0, 2**64 - 1))
        | st.tuples(st.just(T.INT32), st.integers(-(2**31), 2**31 - 1))
        | st.tuples(st.just(T.INT64), st.sampled_from([-1, -(2**63), 2**63 - 1])))
FLOAT_VALUES = (st.tuples(st.just(T.FLOAT32), st.floats(width=32))
                | st.tuples(st.just(T.FLOAT64), st.floats()
                            | st.sampled_from([math.nan, math.inf, -math.inf, 2.5, -1.0, 64.0])))
OTHERS = (st.tuples(st.just(T.BOOL), st.booleans())
          | st.tuples(st.just(T.STRING), st.text(max_size=8))
          | st.tuples(st.just(T.ARRAY), st.tuples(st.just(T.UINT32),
                                                  st.lists(st.integers(0, 2**32 - 1), max_size=8)))
          | st.tuples(st.just(T.ARRAY), st.tuples(st.just(T.STRING),
                                                  st.lists(st.text(max_size=3), max_size=3))))
VALUES = INTS | FLOAT_VALUES | OTHERS


def _family(arch: str, path: Path) -> None:
    from tests.models.gguf.test_gguf_families import FAMILIES, _model

    write_family(path, arch, _model(arch), FAMILIES[arch][2])


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One tiny valid file per architecture."""
    folder = tmp_path_factory.mktemp("archs")
    made = {}
    for arch in sorted(ARCHITECTURES):
        made[arch] = folder / f"{arch}.gguf"
        if arch in WRITTEN:
            write_model(made[arch], arch, gguf.GGMLQuantizationType.F32)
        else:
            _family(arch, made[arch])
    return made


@pytest.fixture
def layer_table(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """(layers asked for, layers the file holds) each time the per-layer name table is built."""
    asked: list[tuple[int, int]] = []
    real = names.hf_to_gguf
    real_init = source.GgufSource.__init__

    def init(self: source.GgufSource, header: Any, *descriptor: Any) -> None:
        held = {n.split(".")[1] for n in header.tensors if n.startswith("blk.")}

        def watched(layout: names.Layout, layers: int) -> dict[str, str]:
            asked.append((layers, len(held)))
            return real(layout, layers)

        monkeypatch.setattr(source, "hf_to_gguf", watched)
        real_init(self, header, *descriptor)

    monkeypatch.setattr(source.GgufSource, "__init__", init)
    return asked


def test_every_architecture_runs_unchanged(cli, files: dict[str, Path]) -> None:  # noqa: ANN001
    """The control: each base file, copied with nothing replaced, runs."""
    for arch, path in files.items():
        copy = path.with_name(f"copy-{arch}.gguf")
        rewrite(path, copy, {})
        got = cli("run", "hi there", "--model", str(copy), "--json")
        assert got.code == 0, (arch, got.err)
        assert got.json()["model"]["layers"] >= 2


BAD_COUNTS = [(T.FLOAT32, math.nan), (T.FLOAT64, -math.inf), (T.FLOAT64, 2.5), (T.INT32, -1),
              (T.STRING, "4"), (T.BOOL, True), (T.ARRAY, (T.UINT32, [2, 2]))]


@pytest.mark.slow
@pytest.mark.parametrize("arch", sorted(ARCHITECTURES))
def test_a_count_that_is_not_a_whole_number_names_its_key(files: dict[str, Path], tmp_path: Path,
                                                          arch: str) -> None:
    """Every count key, on every architecture: refused by name before anything is built."""
    path = tmp_path / "m.gguf"
    for suffix in COUNTS:
        for typed in BAD_COUNTS:
            rewrite(files[arch], path, {f"{arch}.{suffix}": typed})
            with memory_headroom(2**30), pytest.raises(AttnCliError) as caught:
                open_gguf(path)
            assert str(caught.value).startswith(f"{path}: metadata {arch}.{suffix} is "), \
                (suffix, typed, str(caught.value))


@pytest.mark.slow
@SETTINGS
@given(arch=st.sampled_from(sorted(ARCHITECTURES)), key=st.sampled_from(KEYS), typed=VALUES)
def test_any_metadata_value_loads_or_is_one_line(cli, files: dict[str, Path],  # noqa: ANN001
                                                 tmp_path: Path,
                                                 layer_table: list[tuple[int, int]], arch: str,
                                                 key: str, typed: tuple[Any, Any]) -> None:
    path = tmp_path / "m.gguf"
    rewrite(files[arch], path, {f"{arch}.{key}": typed})
    with memory_headroom(2**30):
        got = cli("run", "hi there", "--model", str(path), "--json")
        described = describe_gguf(path)
    assert got.code in (0, 2), got.err
    event(f"exit {got.code}")  # both outcomes: --hypothesis-show-statistics counts them
    if got.code == 0:
        assert got.json()["model"]["layers"] >= 1 and described["readable"], described
    else:
        assert got.out == ""
        assert got.err.startswith("attncli: error: ") and got.err.count("\n") == 1, got.err
    assert all(asked <= held for asked, held in layer_table), layer_table
