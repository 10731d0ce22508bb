"""phi3 on the Llama block."""
