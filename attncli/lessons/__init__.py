"""Guided demonstrations built on the pipeline: the chapter-3 tour."""
