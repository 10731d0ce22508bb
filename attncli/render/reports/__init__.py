"""Reports beside the attention views: `check`'s verdict on a reader's own class, `generate`'s
steps, `scan`'s summary of a corpus."""
