# host/metrics: console summary, metrics.jsonl, MLflow (REST, internal/mlflowrest) and PNG curves.
# The MLflow tests start a real tracking server from the PyPI package mlflow, which
# setup-mlflow installs into a virtualenv of its own under $(CACHE): mlflow pins
# dependencies (pyarrow, numpy, ...) that must not move under the other areas' goldens.
# The tests find it through RLHOST_MLFLOW; without it they skip (fail when CI is set).
MLFLOW_VERSION ?= 3.17.2
MLFLOW_PYPI  ?= mlflow[auth]==$(MLFLOW_VERSION)
MLFLOW_VENV  := $(CACHE)/mlflow-venv
MLFLOW_BIN   := $(MLFLOW_VENV)/bin/mlflow
METRICS_PKGS := ./host/metrics/
MLFLOW_PKGS  := ./internal/mlflowrest/...

.PHONY: setup-mlflow test-metrics bench-metrics metrics-golden

SETUP_TARGETS += setup-mlflow
TEST_TARGETS  += test-metrics
BENCH_TARGETS += bench-metrics

setup-mlflow: ## install the MLflow tracking server (PyPI mlflow, with its basic-auth app) into $(CACHE)/mlflow-venv (idempotent)
	@{ $(MLFLOW_BIN) --version 2>/dev/null | grep -q '$(MLFLOW_VERSION)' && $(MLFLOW_VENV)/bin/python -c 'import flask_wtf' 2>/dev/null; } || { \
		{ python3 -m venv $(MLFLOW_VENV) || { python3 -m pip install --quiet virtualenv && python3 -m virtualenv $(MLFLOW_VENV); }; } && \
		$(MLFLOW_VENV)/bin/pip install --quiet '$(MLFLOW_PYPI)' && $(MLFLOW_BIN) --version; }

test-metrics: setup-mlflow ## host/metrics and internal/mlflowrest tests, the MLflow ones against a real server (started once, then restarted mid-run)
	$(GO) vet $(METRICS_PKGS) $(MLFLOW_PKGS)
	RLHOST_MLFLOW=$(MLFLOW_BIN) RLHOST_MLFLOW_E2E=1 $(GO) test -count=1 -timeout 20m $(METRICS_PKGS) $(MLFLOW_PKGS)

# One script runs the Go benchmarks and the Python peers against the same MLflow server.
bench-metrics: setup-mlflow ## JSONL, MLflow and plot benchmarks vs the Python peers (mlflow client, json, matplotlib) -> docs/bench/metrics.md
	RLHOST_MLFLOW=$(MLFLOW_BIN) $(MLFLOW_VENV)/bin/python scripts/goldens/metrics/bench_python.py

metrics-golden: ## rewrite host/metrics/testdata/curves.golden.png (look at it before committing)
	$(GO) test -count=1 -run TestPlotGolden $(METRICS_PKGS) -args -update
