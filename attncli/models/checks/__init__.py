"""Checks on config.json values: each a number of the right kind, finite, and in range."""
