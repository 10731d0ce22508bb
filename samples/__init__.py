"""The README's sample files, installed with the package as attncli.samples (see setup.py), so
that `attncli pull samples` can copy them out of an installed wheel."""
