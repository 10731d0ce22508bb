"""`attncli models`."""

from __future__ import annotations

from attncli.cli.app import app
from attncli.cli.options import JsonOpt
from attncli.cli.output import console, emit, emit_json


@app.command()
def models(as_json: JsonOpt = False) -> None:
    """List the checkpoints in the local Hugging Face cache that --model can read.

    GPT-2 and the Llama family (llama, mistral, qwen2, qwen3), with safetensors weights.
    Nothing is downloaded; fetch a model once with the HF CLI, e.g.
    `hf download HuggingFaceTB/SmolLM2-135M`.

    Examples:

      attncli models

      attncli models --json | jq '.models[].name'
    """
    from attncli.models.stores.catalog import cached_models

    doc = cached_models()
    if as_json:
        emit_json(doc)
        return
    from attncli.render.models import render_models

    emit(console(), render_models(doc))
