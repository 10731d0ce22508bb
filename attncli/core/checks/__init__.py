"""Every part of a saved attncli document checked before `attncli show` draws it."""
