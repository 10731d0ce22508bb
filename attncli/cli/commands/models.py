"""`attncli models`."""

from __future__ import annotations

from typing import Annotated

from attncli.cli.groups import Fields, command
from attncli.cli.options import Output


@command()
def models(output: Annotated[Output, Fields("as_json")]) -> None:
    """List the models --model can read: the HF cache, Ollama's, LM Studio's and attncli's own.

    Each from its headers alone (no weights read): name, source, format and quantization,
    architecture, layers × heads (kv heads), size; then those attncli cannot read, and why.
    Safetensors checkpoints and GGUF files of every family --model reads (GPT-2, Llama, Mistral,
    Qwen 2 and 3, Gemma 2 and 3, Phi-3, GPT-NeoX, OLMo 2, SmolLM3; BERT and RoBERTa as
    safetensors), each checked as --model checks it. The stores are $HF_HUB_CACHE,
    $OLLAMA_MODELS (else ~/.ollama/models), $LMSTUDIO_MODELS (else ~/.lmstudio/models) and
    attncli's cache, where make demo fetches SmolLM2 ($ATTNCLI_MODEL_CACHE, else
    ~/.cache/attncli/models). Nothing is downloaded.

    Examples:

      attncli models

      attncli models --json | jq -r '.models[].model'
    """
    from attncli.catalog import cached_models
    from attncli.render.models import render_models

    doc = cached_models()
    output.deliver(doc, lambda out: render_models(doc))
