# Set-up from nothing, tests and a first run. `make help` lists the targets.
PYTHON ?= python3
VENV ?= .venv
# Which torch to install when none is importable; e.g. TORCH_SPEC='torch==2.13.0 --index-url ...' for CUDA.
TORCH_SPEC ?= torch==2.13.0
PY := $(VENV)/bin/python
STAMP := $(VENV)/.tandem-installed
TEST_STAMP := $(VENV)/.tandem-test-installed
PYTEST_ARGS ?=

.PHONY: help setup test-setup test lint run docs clean entity-gym

help:
	@echo "make setup   create $(VENV) and install tandem (what training needs)"
	@echo "make test    set up with every test dependency when needed, lint (ruff), then run the whole test suite"
	@echo "make lint    ruff check and ruff format --check (the settings are in pyproject.toml)"
	@echo "make run     set up when needed, then train examples/cartpole.toml"
	@echo "make docs    set up (and the docs extra) when needed, then build the documentation site into site/"
	@echo "make entity-gym  install EntityGym's environments (env.id = \"entitygym/NAME\", docs/guides/entities.md)"
	@echo "variables:   TORCH_SPEC='$(TORCH_SPEC)'  PYTHON=$(PYTHON)  PYTEST_ARGS=..."

# The base install: what `make run` and a user's training need.
$(STAMP): pyproject.toml setup.py Makefile
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@# torch first, by an exact spec: a bare `torch` requirement would pull a multi-GB CUDA build.
	@$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q $(TORCH_SPEC)
	$(PY) -m pip install -q -e .
	@# An editable install's finder runs after Python's path search, so a folder named `tandem` in the working
	@# directory (the clone itself, seen from the folder that holds it) would shadow it (tandem/editable_first.py).
	@site="$$($(PY) -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" && \
		cp tandem/editable_first.py "$$site/_tandem_editable_first.py" && \
		echo "import _tandem_editable_first" > "$$site/tandem_editable_first.pth"
	@touch $(STAMP)

# Everything any test needs: the `test` extra pulls in every optional extra (MiniGrid, MuJoCo, envpool, ...),
# so a fresh machine's `make test` runs the same Python tests as CI. System packages are .ci/prepare.sh's.
$(TEST_STAMP): $(STAMP)
	$(PY) -m pip install -q -e ".[test]"
	@$(MAKE) --no-print-directory entity-gym
	@touch $(TEST_STAMP)

# EntityGym 0.1.10 (the last release) declares Python < 3.11 and pins ragged-buffer to NumPy 1, yet both run on
# this Python and NumPy (tandem.daemons.envs.entity_gym_env restores the one alias it needs): so they are
# installed without their metadata's checks, and what they import beside them is installed as usual.
entity-gym: $(STAMP)
	$(PY) -m pip install -q "msgpack-numpy>=0.4.7" "tqdm>=4.60" "cloudpickle>=2"
	$(PY) -m pip install -q --no-deps --ignore-requires-python entity-gym==0.1.10 ragged-buffer==0.4.8

setup: $(STAMP)

test-setup: $(TEST_STAMP)

test: test-setup lint
	$(PY) -m pytest $(PYTEST_ARGS)

lint: test-setup
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
