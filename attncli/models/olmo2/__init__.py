"""olmo2 on the Llama block."""
