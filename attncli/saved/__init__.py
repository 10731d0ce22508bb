"""Saved JSON read back into the records that wrote it, for `attncli show`: one table of kinds
(kinds.py), one reader that walks a record's annotations (walk.py), every part checked and named
where it fails."""
