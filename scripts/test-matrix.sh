#!/usr/bin/env bash
# make test-matrix: the tests that compare numbers, under each CPU level torch dispatches to
# (ATEN_CPU_CAPABILITY=default|avx2|avx512) and with 1 and 2 torch threads, one setting at a time.
# torch takes the level on trust, so a level the CPU lacks dies of an illegal instruction: each
# level is probed first, and one this CPU cannot run is skipped, saying so.
# Not part of make test (six runs of the numeric folders); LEVELS, THREADS, FOLDERS, WORKERS and
# MARK narrow or widen it, e.g. LEVELS=default THREADS=2 make test-matrix.
set -u
PY=${PY:-.venv/bin/python}
LEVELS=${LEVELS:-default avx2 avx512}
THREADS=${THREADS:-1 2}
FOLDERS=${FOLDERS:-tests/tools/test_tolerance.py tests/core tests/long tests/models tests/lessons \
tests/checker tests/api tests/render tests/scan tests/browse tests/cli/test_cli_model.py \
tests/cli/test_cli_llama.py tests/cli/test_cli_explain.py tests/cli/test_cli_long.py \
tests/cli/test_cli_generate.py tests/e2e/test_readme.py tests/e2e/test_readme_blocks.py}
WORKERS=${WORKERS:-2}
MARK=${MARK:-}
failed=""
skipped=""
PROBE="import torch; x = torch.randn(64, 64); torch.softmax(x @ x, -1).exp().sum().item()
print(torch.backends.cpu.get_cpu_capability())"
for level in $LEVELS; do
    if ! ran=$(ATEN_CPU_CAPABILITY=$level "$PY" -c "$PROBE" 2>/dev/null); then
        echo "== ATEN_CPU_CAPABILITY=$level: skipped, this CPU cannot run it" >&2
        skipped="$skipped $level"
        continue
    fi
    for threads in $THREADS; do
        echo "== ATEN_CPU_CAPABILITY=$level (torch runs $ran), OMP_NUM_THREADS=$threads" >&2
        # shellcheck disable=SC2086  # FOLDERS is a list of paths
        if ! ATEN_CPU_CAPABILITY=$level OMP_NUM_THREADS=$threads MKL_NUM_THREADS=$threads \
            nice "$PY" -m pytest -q -p no:randomly -n "$WORKERS" --dist loadfile \
            ${MARK:+-m "$MARK"} $FOLDERS; then
            failed="$failed $level/$threads"
        fi
    done
done
[ -z "$skipped" ] || echo "test-matrix: skipped (not on this CPU):$skipped" >&2
if [ -n "$failed" ]; then
    echo "test-matrix: failed under$failed" >&2
    exit 1
fi
echo "test-matrix: every setting run passed" >&2
