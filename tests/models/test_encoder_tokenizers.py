"""Encoder folders whose tokenizer.json is written as the Hub and sentence-transformers write it:
padding to a fixed length, truncation and a template post-processor. attncli shows the text's
own tokens (no [PAD] rows, no cut at the file's truncation length), refuses a text past the
model's positions, and reads special-token text as --allow-special says; against the tokenizers
library's own encode and transformers' eager encoders."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.encoder_fixtures import (
    encoder_reference,
    hub_written_tokenizer,
    own_tokens,
    save_encoder,
)
from tests.tolerance import assert_near

TEXT = "The cat sat on the mat because it was tired, and the dog lay by the door all day long"
CUT = 16  # the files' truncation and padding length: TEXT has more tokens than this
SPECIALS = {"bert": ("[CLS]", "[SEP]", "[MASK]", "[PAD]"),
            "roberta": ("<s>", "</s>", "<mask>", "<pad>")}


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Any]]:
    """bert and roberta folders whose tokenizer.json pads and truncates to CUT."""
    root = tmp_path_factory.mktemp("hub-encoders")
    out = {}
    for name, seed in (("bert", 31), ("roberta", 32)):
        model = save_encoder(root / name, name, seed=seed)
        hub_written_tokenizer(root / name, name, CUT)
        out[name] = (root / name, model)
    return out


@pytest.mark.parametrize("name", ["bert", "roberta"])
def test_the_files_pad_and_truncate_as_the_hubs_do(hub, name: str) -> None:
    """The fixture is what it claims: the file pads every text to CUT and cuts it there."""
    from tokenizers import Tokenizer

    folder, _ = hub[name]
    spec = json.loads((folder / "tokenizer.json").read_text())
    assert spec["padding"]["strategy"] == {"Fixed": CUT}
    assert spec["truncation"]["max_length"] == CUT
    assert spec["post_processor"]["type"] in ("TemplateProcessing", "RobertaProcessing")
    as_filed = Tokenizer.from_file(str(folder / "tokenizer.json"))
    assert len(as_filed.encode("the cat").ids) == CUT  # padded
    assert len(as_filed.encode(TEXT).ids) == CUT  # cut
    assert len(own_tokens(folder, TEXT).ids) > CUT


@pytest.mark.parametrize("name", ["bert", "roberta"])
@pytest.mark.parametrize("text", ["the cat", TEXT])
def test_tokens_are_the_texts_own(cli, hub, name: str, text: str) -> None:
    """No pad token, nothing cut: the ids the tokenizers library gives with padding and
    truncation off, from the first special token to the last."""
    folder, _ = hub[name]
    first, last, _, pad = SPECIALS[name]
    expected = own_tokens(folder, text)
    for command in ("tokens", "run"):
        doc = cli(command, text, "--model", str(folder), "--json").json()
        assert [t["id"] for t in doc["tokens"]] == expected.ids
        texts = [t["text"] for t in doc["tokens"]]
        assert (texts[0], texts[-1]) == (first, last) and pad not in texts
    shown = cli("tokens", text, "--model", str(folder)).out
    assert pad not in shown and shown.startswith(f"{len(expected.ids)} tokens")


@pytest.mark.parametrize("name", ["bert", "roberta"])
def test_every_layer_past_the_files_truncation_matches_transformers(cli, hub, name: str) -> None:
    folder, model = hub[name]
    ids = own_tokens(folder, TEXT).ids
    ref = encoder_reference(model, ids)
    for layer in range(3):
        doc = cli("run", TEXT, "--model", str(folder), "--layer", str(layer), "--json").json()
        weights = torch.tensor(doc["weights"])  # (heads, T, T)
        assert weights.shape[-1] == len(ids) > CUT
        assert_near(weights, ref["attentions"][layer])


@pytest.mark.parametrize(("name", "positions"), [("bert", 64), ("roberta", 64)])
def test_a_text_past_the_positions_is_refused_not_cut(cli, hub, name: str,
                                                      positions: int) -> None:
    folder, _ = hub[name]
    text = "the cat sat " * 30
    count = len(own_tokens(folder, text).ids)
    assert count > positions
    cli("run", text, "--model", str(folder)).assert_usage_error(
        f"{count} tokens is more than this encoder's {positions} positions")
    cli("explain", text, "--model", str(folder)).assert_usage_error(
        f"{count} tokens is more than this encoder's {positions} positions")


@pytest.mark.parametrize("name", ["bert", "roberta"])
@pytest.mark.parametrize("which", [0, 1, 2])
def test_special_token_text_follows_allow_special(cli, hub, name: str, which: int) -> None:
    """By default a special token's spelling in the text is plain text, as tiktoken reads
    <|endoftext|>; with --allow-special it is the special token, as transformers reads it."""
    folder, _ = hub[name]
    special = SPECIALS[name][which]
    text = f"the cat {special} sat"
    plain = own_tokens(folder, text, allow_special=False)
    allowed = own_tokens(folder, text, allow_special=True)
    special_id = allowed.ids[allowed.tokens.index(special, 1 if which == 0 else 0)]
    assert plain.ids != allowed.ids
    default = cli("tokens", text, "--model", str(folder), "--json").json()["tokens"]
    assert [t["id"] for t in default] == plain.ids
    # The special id only where the post-processor put it, never in the text's own tokens.
    assert special_id not in [t["id"] for t in default[1:-1]]
    chosen = cli("tokens", text, "--model", str(folder), "--json", "--allow-special").json()
    assert [t["id"] for t in chosen["tokens"]] == allowed.ids
    assert special_id in [t["id"] for t in chosen["tokens"][1:-1]]
    run = cli("run", text, "--model", str(folder), "--json", "--allow-special").json()
    assert [t["id"] for t in run["tokens"]] == allowed.ids


def test_transformers_reads_special_text_as_allow_special_does(hub) -> None:
    """What the README says of transformers' default: its tokenizer takes "[SEP]" in the text
    as the special token, and ignores the file's padding and truncation when not asked."""
    from transformers import AutoTokenizer

    folder, _ = hub["bert"]
    fast = AutoTokenizer.from_pretrained(str(folder))
    text = f"{TEXT} [SEP] more"
    assert fast(text)["input_ids"] == own_tokens(folder, text, allow_special=True).ids
    assert len(fast(text)["input_ids"]) > CUT


def test_a_padding_only_file_changes_nothing(cli, hub, tmp_path: Path) -> None:
    """Left padding to a multiple of 8 (another setting the Hub's files hold) is ignored too."""
    folder = tmp_path / "left"
    shutil.copytree(hub["bert"][0], folder)
    spec = json.loads((folder / "tokenizer.json").read_text())
    spec["truncation"] = None
    spec["padding"] |= {"strategy": "BatchLongest", "direction": "Left", "pad_to_multiple_of": 8}
    (folder / "tokenizer.json").write_text(json.dumps(spec))
    doc = cli("run", "the cat", "--model", str(folder), "--json").json()
    assert [t["id"] for t in doc["tokens"]] == own_tokens(folder, "the cat").ids
    assert doc["tokens"][0]["text"] == "[CLS]"
