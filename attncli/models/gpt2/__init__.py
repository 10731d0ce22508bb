"""GPT-2: its config, its blocks, its token-by-token decoding, and its Family."""
