"""Trained checkpoints: families (family.py, one folder each), weight sources, stores, measures.

Here, the GGUF registry: which family's folder reads each GGUF architecture, one line per
architecture, handed to the GGUF reader (sources/gguf/recipe.py) when attncli.models is first
imported, before any file is read; the reader never imports a family.

A family is one folder for every format. Its config.json reading, layout and model live in
attncli/models/<family>/, and so do its GGUF names and fixes, in <family>/gguf.py. The reader in
sources/gguf/ knows the format only: the header, reading and dequantizing tensors, mapping
names by a Layout, undoing the stored-layout fixes a Layout names, and reading and checking
metadata keys.

Adding GGUF support to a family (the family itself already registered in family.py):

1. In attncli/models/<family>/gguf.py, declare one GgufRecipe per GGUF architecture (the
   file's general.architecture), with
   - model_type and hf_class: the config.json model_type (which picks the family that runs the
     model) and architectures[0] the file becomes;
   - keys: `{arch}.` metadata key suffix -> config.json key, e.g. "block_count" ->
     "num_hidden_layers" (every value is checked to be a finite number; counts are checked
     against the tensors by sources/gguf/counts.py before any of them is used);
   - layout: a sources.gguf.names.Layout: the HF prefix of layer i ("model.layers.{i}."), the
     HF -> GGUF names outside and inside the layers, and the fixes llama.cpp's converter applied
     (transposed, permuted, norm_shift, neox_qkv), which reading undoes;
   - fill(config, header): what config.json holds and the metadata does not (llama.cpp's
     per-architecture fixes in src/llama-model.cpp load_hparams), or a refusal in one line with
     sources.gguf.config.refuse. The helpers rotary and layer_types read the shared keys.
   A Llama-block family builds on attncli.models.llama.gguf (LLAMA_KEYS, LLAMA_TOP,
   LLAMA_LAYER, llama_fill), as gemma, phi3, olmo2 and smollm3 do.
2. Add one line to GGUF below (and, for an architecture refused until now, drop its REFUSED
   line): "architecture": ("attncli.models.<family>.gguf", "RECIPE").
3. Test it as tests/models/gguf/test_gguf_families.py does: write a tiny random transformers
   model the way llama.cpp's converter writes it (tests/gguf_fixtures.write_family) and compare
   config, every tensor and the tokenizer's ids with the model it came from.

A new fix to the stored layout (one llama.cpp's converter applies that no Layout names yet) is
format knowledge: a flag on Layout, and its inverse in sources/gguf/names.py and source.py.
"""

from __future__ import annotations

from attncli.models.sources.gguf.recipe import RECIPES

# GGUF general.architecture -> (module, attribute) of its GgufRecipe, imported on first use.
GGUF: dict[str, tuple[str, str]] = {
    "llama": ("attncli.models.llama.gguf", "LLAMA"),
    "qwen2": ("attncli.models.llama.gguf", "QWEN2"),
    "qwen3": ("attncli.models.llama.gguf", "QWEN3"),
    "gpt2": ("attncli.models.gpt2.gguf", "GPT2"),
    "smollm3": ("attncli.models.smollm3.gguf", "SMOLLM3"),
    "gemma2": ("attncli.models.gemma.gguf", "GEMMA2"),
    "gemma3": ("attncli.models.gemma.gguf", "GEMMA3"),
    "phi3": ("attncli.models.phi3.gguf", "PHI3"),
    "olmo2": ("attncli.models.olmo2.gguf", "OLMO2"),
    "gptneox": ("attncli.models.neox.gguf", "NEOX"),
}
# GGUF architectures attncli knows and does not read, with the reason
REFUSED: dict[str, str] = {
    "bert": "an encoder whose llama.cpp vocabulary ('bert', WPM) is split by llama.cpp's own "
            "rules, which attncli cannot rebuild exactly as a WordPiece tokenizer",
    "gemma": "Gemma 1, whose GGUF attncli does not map (it reads gemma2 and gemma3)",
    "gemma3n": "Gemma 3n, whose per-layer embeddings and AltUp are not attention attncli shows",
    "olmo": "OLMo 1, whose GGUF attncli does not map (it reads olmo2)",
}

RECIPES.hand(GGUF, REFUSED)
