# DMQ: `make run` starts DMQ locally; `make test` runs the whole suite.
# Both create the virtual environment first when it is missing or out of date.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 9324
PYTEST_ARGS ?=
MODE ?= sync

.PHONY: run test lint typecheck bench failover-demo venv clean

$(STAMP): requirements.txt requirements-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $(STAMP)

venv: $(STAMP)

run: $(STAMP)
	$(PY) -m chalicelib.local --host $(HOST) --port $(PORT)

test: $(STAMP)
	$(PY) -m pytest -q $(PYTEST_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check .

typecheck: $(STAMP)
	$(VENV)/bin/mypy

bench: $(STAMP)
	$(PY) -m bench.run

failover-demo: $(STAMP)
	$(PY) -m chalicelib.local.failover_demo --mode $(MODE)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
