"""python -m attncli: the same entry point as the console script."""

import attncli.cli

entry = attncli.cli.main  # the function: attncli.cli.main names the submodule once it is loaded
entry()
