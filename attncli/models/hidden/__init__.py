"""The hidden-state cache: residual streams kept on disk, and passes that start from them."""
