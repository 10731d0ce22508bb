"""The one part of the build pyproject.toml does not hold: the tiled pass's score passes in C.

Optional: where attncli/long/_fused.c does not compile (no C compiler, no Python headers, or a
build it refuses, such as -ffast-math), the package installs without it and long/fused.py leaves
the work to torch's operations.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("attncli.long._fused", sources=["attncli/long/_fused.c"],
                             extra_compile_args=["-O3"], optional=True)])
