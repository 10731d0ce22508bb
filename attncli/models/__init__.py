"""Trained checkpoints: locating and reading them (safetensors only), GPT-2, head measures."""
