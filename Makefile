# Two commands set everything up on a fresh machine:
#   make demo   - create .venv, install varlens, run the main job
#   make test   - create .venv, install with test extras (PyTorch 2.13.0 CPU as oracle), run pytest
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test

.PHONY: demo test bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	touch $@

# torch is pinned to the CPU wheel on disk; installing it first (by exact version)
# keeps pip from ever resolving a newer build.
$(TEST_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q "torch==2.13.0"
	$(BIN)/python -m pip install -q -e ".[test]"
	touch $@

demo: $(STAMP)
	$(BIN)/python -m varlens.examples.two_layer

test: $(TEST_STAMP)
	$(BIN)/python -m pytest

bench: $(TEST_STAMP)
	$(BIN)/python benchmarks/bench_autograd.py

clean:
	rm -rf $(VENV) runs
