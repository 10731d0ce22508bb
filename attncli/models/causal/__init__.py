"""Causal checks on heads: ablation and activation patching (TransformerLens's hook_z edits)."""
