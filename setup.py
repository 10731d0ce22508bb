"""The parts of the build pyproject.toml does not hold: four small C extensions, and samples/.

attncli/long/_fused.c, the tiled pass's score passes; attncli/models/sources/gguf/_dequant.c,
GGUF's block types to float32; gguf/_qmatmul.c, x @ Wᵀ on the quantized blocks themselves;
and models/llama/_rows.c, a decode step's RMSNorm and RoPE on float32 rows, one call each.
All optional: where one does not compile (no C compiler, no Python headers, or a build it
refuses, such as -ffast-math), the package installs without it, and long/fused.py leaves the
work to torch's operations, gguf/dequant.py to the gguf package's, gguf/qmatmul.py to
dequantize-then-matmul, llama/block.py and rope.py to torch's (`attncli doctor` says which are
built). Each extension has a .pyi stub
beside its source, which mypy reads and the package ships, and by which `attncli doctor` finds it
in an installed copy. -ffp-contract=off: each product and sum rounded as numpy rounds it, never
fused (the matmul's kernels fuse their dot products' multiply-adds explicitly).

The repository's samples/ folder (the README's files) is installed as the package
attncli.samples, so that `attncli pull samples` can copy it out of a wheel.
"""

from setuptools import Extension, find_namespace_packages, setup

setup(
    ext_modules=[
        Extension("attncli.long._fused", sources=["attncli/long/_fused.c"],
                  extra_compile_args=["-O3"], optional=True),
        Extension("attncli.models.sources.gguf._dequant",
                  sources=["attncli/models/sources/gguf/_dequant.c"],
                  depends=["attncli/models/sources/gguf/_half.h"],
                  extra_compile_args=["-O3", "-ffp-contract=off"], optional=True),
        Extension("attncli.models.llama._rows", sources=["attncli/models/llama/_rows.c"],
                  extra_compile_args=["-O3", "-ffp-contract=off"], optional=True),
        Extension("attncli.models.sources.gguf._qmatmul",
                  sources=["attncli/models/sources/gguf/_qmatmul.c"],
                  depends=["attncli/models/sources/gguf/_half.h",
                           "attncli/models/sources/gguf/_qmatmul_body.h",
                           "attncli/models/sources/gguf/_qmatmul_avx2.h",
                           "attncli/models/sources/gguf/_qmatmul_q8.h",
                           "attncli/models/sources/gguf/_qmatmul_q8_legacy.h",
                           "attncli/models/sources/gguf/_qmatmul_fixed.h",
                           "attncli/models/sources/gguf/_qmatmul_fixed_avx512.h"],
                  extra_compile_args=["-O3", "-ffp-contract=off", "-fno-math-errno", "-pthread"],
                  extra_link_args=["-pthread"], optional=True),
    ],
    packages=[*find_namespace_packages(include=["attncli*"]), "attncli.samples"],
    package_dir={"attncli.samples": "samples"},
)
