"""Where a checkpoint's weights come from: one interface, one module per file format."""
