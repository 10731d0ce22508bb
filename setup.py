"""The one part of the build pyproject.toml does not hold: two small C extensions.

attncli/long/_fused.c, the tiled pass's score passes, and attncli/models/sources/gguf/_dequant.c,
GGUF's block types to float32. Both optional: where one does not compile (no C compiler, no Python
headers, or a build it refuses, such as -ffast-math), the package installs without it, and
long/fused.py leaves the work to torch's operations, gguf/dequant.py to the gguf package's.
-ffp-contract=off: each product and sum rounded as numpy rounds it, never fused.
"""

from setuptools import Extension, setup

setup(ext_modules=[
    Extension("attncli.long._fused", sources=["attncli/long/_fused.c"],
              extra_compile_args=["-O3"], optional=True),
    Extension("attncli.models.sources.gguf._dequant",
              sources=["attncli/models/sources/gguf/_dequant.c"],
              extra_compile_args=["-O3", "-ffp-contract=off"], optional=True),
])
