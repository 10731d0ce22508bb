"""gemma on the Llama block."""
