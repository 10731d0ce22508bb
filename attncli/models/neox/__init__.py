"""neox on the Llama block."""
