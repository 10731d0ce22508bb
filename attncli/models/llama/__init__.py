"""The Llama family (llama, mistral, qwen2, qwen3): config, RoPE, blocks, decoding, Family."""
