"""A third model family for tests: one folder, one registry line (tests/models/test_family.py)."""
