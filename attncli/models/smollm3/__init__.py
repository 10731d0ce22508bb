"""smollm3 on the Llama block."""
