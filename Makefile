# sparkafka developer entry points.
#   make test       venv + install (only when pyproject.toml changed) + ruff + mypy + pytest
#   make run        venv + install + `python -m sparkafka pipeline`
#   make lint       ruff check src tests
#   make typecheck  mypy (strict, config in pyproject.toml)
#   make broker     run the embedded Tansu broker in the foreground (Ctrl-C stops it)
#   make clean      remove the venv and caches
# The venv is .venv (override with VENV=...); PYTHON picks the interpreter that creates it.

PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
EXTRAS ?= spark,broker
PYTEST_ARGS ?=
PIP := $(PY) -m pip --disable-pip-version-check

.PHONY: install test lint typecheck pytest run broker clean

install: $(STAMP)

# pip's output goes to $(VENV)/pip.log and is shown only when it fails.
QUIET_PIP = $(PIP) install --progress-bar off $(1) > $(VENV)/pip.log 2>&1 || { tail -n 60 $(VENV)/pip.log; exit 1; }

$(PY):
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 10), "sparkafka needs Python >= 3.10, got " + sys.version'
	@echo "creating $(VENV) with $(PYTHON) ($$($(PYTHON) --version))"
	@$(PYTHON) -m venv $(VENV)
	@$(call QUIET_PIP,--upgrade pip)

# Re-install only when pyproject.toml is newer than the stamp (`--group` needs pip >= 25.1).
$(STAMP): pyproject.toml setup.py src/sparkafka/_accel.c | $(PY)
	@echo "installing sparkafka[$(EXTRAS)] and the dev group into $(VENV) (log: $(VENV)/pip.log)"
	@$(call QUIET_PIP,-e '.[$(EXTRAS)]' --group dev)
	@touch $(STAMP)

lint: install
	$(PY) -m ruff check src tests

typecheck: install
	$(PY) -m mypy

pytest: install
	$(PY) -m pytest -q -p no:cacheprovider $(PYTEST_ARGS)
	@echo "pure-Python path (SPARKAFKA_NO_ACCEL=1): the hot loops without the C accelerator"
	SPARKAFKA_NO_ACCEL=1 $(PY) -m pytest -q -p no:cacheprovider tests/producer tests/record tests/test_perf_cli.py \
		tests/integration/test_content.py tests/integration/test_partitioning.py tests/integration/test_ordering.py \
		tests/integration/test_send_arrow.py

test: lint typecheck pytest

run: install
	$(PY) -m sparkafka pipeline

broker: install
	$(PY) -m sparkafka broker

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis build dist
