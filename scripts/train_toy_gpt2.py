"""Train the toy GPT-2 in samples/toy-gpt2 on CPU, from a generated corpus; nothing is downloaded.

    python scripts/train_toy_gpt2.py                  # train (~15 min, 1 thread), save, measure
    python scripts/train_toy_gpt2.py --measure TEXT   # only measure the saved model's heads

The corpus is simple English written by the generator below, tokenised with the bundled
GPT-2 vocabulary, so the token ids are GPT-2's own. Training needs transformers (a test
dependency); the saved model is a GPT2Model in half precision, read by attncli or transformers.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import Tensor

if TYPE_CHECKING:  # both are imported where they are used, to keep --measure quick
    import tiktoken
    from transformers import GPT2Model

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's attncli, even where another one is installed
OUT_DIR = ROOT / "samples" / "toy-gpt2"
VOCAB_FILE = ROOT / "attncli" / "data" / "gpt2.tiktoken"
EOT_ID = 50256
SEED = 1234
CONFIG = {"n_layer": 3, "n_head": 4, "n_embd": 64, "n_positions": 128, "vocab_size": 50257}
STEPS, BATCH, LR = 16000, 16, 8e-3

HEROES = ["Anna", "Ben", "Sara", "Tom", "Lena", "Omar", "Maya", "Leo", "Nora", "Hugo", "Iris",
          "Jonas"]
OTHERS = ["Kira", "Paul", "Rosa", "Sam"]
PETS = ["Momo", "Pip", "Bruno", "Luna", "Max", "Kiki", "Rex", "Bella"]
ANIMALS = ["cat", "dog", "bird", "fish", "horse", "rabbit", "mouse", "duck"]
COLORS = ["red", "blue", "green", "yellow", "black", "white", "brown", "grey"]
PLACES = ["park", "garden", "kitchen", "market", "forest", "library", "house", "field"]
THINGS = ["ball", "book", "apple", "key", "box", "hat", "cup", "letter"]
NOTES = ["do", "re", "mi", "fa", "so", "la", "ti"]
# The house style of every song: the note after (a, b) is MELODY[a, b], fixed by the seed.
MELODY = {(a, b): random.Random(f"{SEED}{a}{b}").choice(NOTES) for a in NOTES for b in NOTES}
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


def walk(rng: random.Random, hero: str, pet: str) -> list[str]:
    place, color, thing = rng.choice(PLACES), rng.choice(COLORS), rng.choice(THINGS)
    return [f"{hero} walks to the {place} with {pet} every morning.",
            f"{pet} likes the {color} {thing} in the {place}."]


def adding(rng: random.Random, hero: str, pet: str) -> list[str]:
    """Each number is the sum of the two before it, so the next one needs the previous token."""
    numbers = [rng.randrange(1, 10), rng.randrange(1, 10)]
    while len(numbers) < rng.randrange(6, 9):
        numbers.append(numbers[-2] + numbers[-1])
    return [f"{hero} adds up: {' '.join(map(str, numbers))}."]


def day_count(rng: random.Random, hero: str, pet: str) -> list[str]:
    """Numbers and weekdays in turn, each starting anywhere: every next word depends on the
    word before the current one."""
    number, day = rng.randrange(1, 30), rng.randrange(0, 7)
    pairs = [f"{number + i} {DAYS[(day + i) % 7]}" for i in range(rng.randrange(4, 8))]
    return [f"{hero} counts the days: {' '.join(pairs)}."]


def song(rng: random.Random, hero: str, pet: str) -> list[str]:
    """Notes where each one is set by the two before it: the previous token matters at
    every step, and nothing else does."""
    notes = melody(rng.choice(NOTES), rng.choice(NOTES), rng.randrange(12, 30), rng)
    return [f"{hero} sings: {' '.join(notes)}."]


def melody(first: str, second: str, length: int, rng: random.Random) -> list[str]:
    """A song that opens with first, second; one note in four is a free choice, which keeps
    songs from falling into short loops."""
    notes = [first, second]
    while len(notes) < length:
        free = rng.random() < 0.25
        notes.append(rng.choice(NOTES) if free else MELODY[notes[-2], notes[-1]])
    return notes


def repetition(rng: random.Random, hero: str, pet: str) -> list[str]:
    """A sentence said twice, so the second copy can be read off the first."""
    said = f"the {rng.choice(COLORS)} {rng.choice(THINGS)} is in the {rng.choice(PLACES)}"
    return [f"{hero} says that {said}.", f"{rng.choice(OTHERS)} says again that {said}."]


def word_list(rng: random.Random, hero: str, pet: str) -> list[str]:
    """Random words, then the list read again from a random word on: each word of the second
    reading is the one that followed the word before it in the first."""
    words = rng.sample(ANIMALS + COLORS + PLACES + THINGS, rng.randrange(6, 12))
    start = rng.randrange(0, len(words) - 2)
    return [f"{hero} writes a list: {' '.join(words)}.",
            f"{rng.choice(OTHERS)} reads from {words[start]} on: {' '.join(words[start:])}."]


def document(rng: random.Random) -> str:
    """A story about one hero, whose name is the first word and opens most sentences."""
    hero, pet = rng.choice(HEROES), rng.choice(PETS)
    sentences = [f"{hero} has a {rng.choice(COLORS)} {rng.choice(ANIMALS)} called {pet}."]
    for _ in range(rng.randrange(2, 5)):
        maker = rng.choice([walk, adding, day_count, song, song, repetition, word_list])
        sentences += maker(rng, hero, pet)
    sentences.append(f"{pet} loves {hero}.")
    return " ".join(sentences)


PROBE = ("<|endoftext|>Anna has a red cat called Momo. Anna counts the days: 12 Friday 13 "
         "Saturday 14 Sunday 15 Monday. Anna adds up: 2 5 7 12 19 31. Anna sings: {song}. Anna "
         "writes a list: duck hat garden blue cup key. Sam reads from hat on: hat garden blue cup "
         "key. Momo loves Anna.")
PROBE = PROBE.replace("{song}", " ".join(melody("mi", "do", 16, random.Random(SEED))))


def corpus(rng: random.Random, documents: int) -> str:
    """Documents between <|endoftext|> tokens, as GPT-2's training documents were."""
    return "".join("<|endoftext|>" + document(rng) for _ in range(documents)) + "<|endoftext|>"


def document_starts(token_ids: Tensor, ctx: int) -> Tensor:
    """Each <|endoftext|> that leaves a full window behind it: windows open with it, as a
    beginning-of-text token, followed by a document."""
    starts = (token_ids == EOT_ID).nonzero().flatten()  # (documents,)
    return starts[starts + ctx + 1 <= len(token_ids)]


def gpt2_encoding() -> tiktoken.Encoding:
    """tiktoken's GPT-2 (r50k) encoding from the bundled vocabulary file."""
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe
    from tiktoken_ext.openai_public import r50k_pat_str

    ranks = load_tiktoken_bpe(str(VOCAB_FILE))
    return tiktoken.Encoding(name="gpt2", pat_str=r50k_pat_str, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": EOT_ID}, explicit_n_vocab=50257)


def sinusoidal_positions(num_positions: int, dim: int, norm: float = 0.16) -> Tensor:
    """The original transformer's position code, scaled to the row norm of GPT-2's wte init."""
    position = torch.arange(num_positions, dtype=torch.float32)[:, None]  # (P, 1)
    freq = 10000.0 ** (-torch.arange(0, dim, 2, dtype=torch.float32) / dim)  # (dim/2,)
    table = torch.zeros(num_positions, dim)  # (P, dim)
    table[:, 0::2] = torch.sin(position * freq)
    table[:, 1::2] = torch.cos(position * freq)
    return table * norm / table.norm(dim=1, keepdim=True)  # (P, dim)


def train(local_ids: Tensor, doc_starts: Tensor, vocab: int, steps: int,
          log_every: int = 500) -> GPT2Model:
    """Next-token training on windows that open with <|endoftext|>, over a compact vocabulary."""
    from transformers import GPT2Config, GPT2Model

    torch.manual_seed(SEED)
    config = GPT2Config(**{**CONFIG, "vocab_size": vocab}, bos_token_id=vocab - 1,
                        eos_token_id=vocab - 1, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    model = GPT2Model(config).train()
    with torch.no_grad():  # a sinusoidal start makes "the token before" easy to learn
        model.wpe.weight.copy_(sinusoidal_positions(CONFIG["n_positions"], CONFIG["n_embd"]))
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=LR, total_steps=steps,
                                                   pct_start=0.1)
    gen = torch.Generator().manual_seed(SEED)
    ctx = CONFIG["n_positions"]
    for step in range(1, steps + 1):
        pick = torch.randint(0, len(doc_starts), (BATCH,), generator=gen)  # (B,)
        window = torch.stack([local_ids[s : s + ctx + 1] for s in doc_starts[pick]])  # (B, ctx+1)
        hidden = model(window[:, :-1]).last_hidden_state  # (B, ctx, d), after ln_f
        logits = hidden @ model.wte.weight.T  # (B, ctx, vocab): the tied output head
        loss = F.cross_entropy(logits.flatten(0, 1), window[:, 1:].flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        if step % log_every == 0 or step == 1:
            print(f"step {step:5d}  loss {loss.item():.3f}", flush=True)
    return model.eval()


def save_full_vocab(model: GPT2Model, used: Tensor, out: Path) -> None:
    """Save as a GPT-2 of the full 50257-token vocabulary, in half precision; the rows of
    tokens the corpus never uses are zero."""
    from transformers import GPT2Config, GPT2Model

    state = model.state_dict()
    wte = torch.zeros(CONFIG["vocab_size"], CONFIG["n_embd"])  # (50257, d)
    wte[used] = state["wte.weight"]  # compact row k is GPT-2 token used[k]
    full = GPT2Model(GPT2Config(**CONFIG))
    full.load_state_dict({**state, "wte.weight": wte})
    full.half().save_pretrained(out, safe_serialization=True)


def measure(model_dir: Path, text: str) -> None:
    """Print attncli's head measures of the saved model on text, strongest structure first."""
    from attncli.models.gpt2.family import resolve_checkpoint
    from attncli.models.gpt2.model import gpt2_all_layers
    from attncli.models.measures import MEASURES, head_measures

    token_ids = gpt2_encoding().encode(text, allowed_special="all")
    rows = head_measures(gpt2_all_layers(resolve_checkpoint(str(model_dir)), token_ids))
    print(f"{len(token_ids)} tokens: {text}")
    print("layer head  " + "  ".join(f"{m:>8}" for m in MEASURES))
    for row in rows:
        cells = "  ".join(f"{row[m]:8.3f}" for m in MEASURES)  # type: ignore[literal-required]
        print(f"{row['layer']:5d} {row['head']:4d}  {cells}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--measure", metavar="TEXT", help="only measure the saved model")
    parser.add_argument("--out", type=Path, default=OUT_DIR, help="model directory")
    parser.add_argument("--steps", type=int, default=STEPS, help="training steps")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.measure is None:
        text = corpus(random.Random(SEED), documents=6000)
        token_ids = torch.tensor(gpt2_encoding().encode(text, allowed_special="all"))
        # Training over the ~150 ids the corpus uses, not all 50257, makes it fast on a CPU.
        used, local_ids = torch.unique(token_ids, return_inverse=True)  # (U,), (N,)
        print(f"corpus: {len(token_ids)} tokens, {len(used)} distinct ids")
        began = time.perf_counter()
        starts = document_starts(token_ids, CONFIG["n_positions"])  # (documents,)
        model = train(local_ids, starts, len(used), args.steps)
        print(f"trained in {time.perf_counter() - began:.0f} s")
        save_full_vocab(model, used, args.out)
        size = (args.out / "model.safetensors").stat().st_size
        print(f"saved {args.out / 'model.safetensors'} ({size / 1e6:.2f} MB)")
    measure(args.out, args.measure or PROBE)


if __name__ == "__main__":
    main()
