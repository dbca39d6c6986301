# Set-up from nothing, tests and a first run. `make help` lists the targets.
PYTHON ?= python3
VENV ?= .venv
# Which torch to install when none is importable; e.g. TORCH_SPEC='torch==2.13.0 --index-url ...' for CUDA.
TORCH_SPEC ?= torch==2.13.0
PY := $(VENV)/bin/python
STAMP := $(VENV)/.tandem-installed
PYTEST_ARGS ?=

.PHONY: help setup test lint run docs clean

help:
	@echo "make setup   create $(VENV) and install tandem with its test dependencies"
	@echo "make test    set up when needed, lint (ruff), then run the whole test suite"
	@echo "make lint    ruff check and ruff format --check (the settings are in pyproject.toml)"
	@echo "make run     set up when needed, then train examples/cartpole.toml"
	@echo "make docs    set up (and the docs extra) when needed, then build the documentation site into site/"
	@echo "variables:   TORCH_SPEC='$(TORCH_SPEC)'  PYTHON=$(PYTHON)  PYTEST_ARGS=..."

$(STAMP): pyproject.toml setup.py Makefile
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@# torch first, by an exact spec: a bare `torch` requirement would pull a multi-GB CUDA build.
	@$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q $(TORCH_SPEC)
	$(PY) -m pip install -q -e ".[test]"
	@touch $(STAMP)

setup: $(STAMP)

test: setup lint
	$(PY) -m pytest $(PYTEST_ARGS)

lint: setup
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

run: setup
	$(VENV)/bin/tandem up examples/cartpole.toml

# The site from docs/ and mkdocs.yml; strict, so a broken link or page fails the build.
docs: setup
	@$(PY) -c "import mkdocs, material, mkdocs_click" 2>/dev/null || $(PY) -m pip install -q -e ".[docs]"
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis *.egg-info site
