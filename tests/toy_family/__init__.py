"""A third model family for tests: one folder, one registry line (tests/test_family.py)."""
