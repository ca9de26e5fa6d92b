# Rollout tracing: host/tracing, the trace-backend plugins (plugins/*), `rlhost traces`.
# Go tests need only Go; the viewer test needs Debian chromium and playwright-core (npm), the
# MLflow tests a pip-installed mlflow, the weave tests weave 0.52.38; tracing-deps, tracing-mlflow
# and tracing-weave install them (idempotent).

TRACE_PLUGINS    := local mlflow weave
# weave 0.52.38: the last 0.52.x checked to ship weave.trace_server.sqlite_trace_server (0.52.43 does not).
WEAVE_VENV       := $(CACHE)/weave-venv
# opentelemetry-proto: imported by weave's sqlite trace server but not among weave's requirements.
# WEAVE_PINS holds every version the tests last passed with (pip constraints).
WEAVE_PINS       := plugins/weave/testdata/constraints.txt
WEAVE_PIP        := weave==0.52.38 opentelemetry-proto fastapi uvicorn ddtrace emoji sqlparse redis clickhouse-connect numpy
TRACE_BINS       := $(addprefix $(PLUGINS)/rlhost-trace-,$(TRACE_PLUGINS))
TRACING_PKGS     := ./host/tracing/... ./plugins/...
TRACING_NODE     := $(CACHE)/tracing-node
PLAYWRIGHT_CORE  := 1.65.1

.PHONY: tracing-deps tracing-mlflow tracing-weave plugins-tracing test-tracing test-tracing-conformance bench-tracing

SETUP_TARGETS += tracing-deps tracing-mlflow tracing-weave plugins-tracing
TEST_TARGETS  += test-tracing test-tracing-conformance
BENCH_TARGETS += bench-tracing

build: plugins-tracing

plugins-tracing: ## build the trace-backend plugins into bin/plugins
	@mkdir -p $(PLUGINS)
	for p in $(TRACE_PLUGINS); do $(GO_BUILD) -o $(PLUGINS)/rlhost-trace-$$p ./plugins/$$p/cmd/rlhost-trace-$$p || exit 1; done

$(PLUGINS)/rlhost-trace-local: FORCE
	$(GO_BUILD) -o $@ ./plugins/local/cmd/rlhost-trace-local

tracing-deps: ## Debian chromium and playwright-core (npm) for the viewer test (idempotent)
	@test -x /usr/bin/chromium || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium; }
	@test -d $(TRACING_NODE)/node_modules/playwright-core || \
		{ mkdir -p $(TRACING_NODE) && npm install --silent --no-audit --no-fund --prefix $(TRACING_NODE) playwright-core@$(PLAYWRIGHT_CORE); }

tracing-mlflow: setup-mlflow ## the mlflow server for the MLflow plugin's tests: the pinned one of mk/metrics.mk (idempotent)

tracing-weave: ## weave 0.52.38 and its trace server's imports (pip, in $(CACHE)/weave-venv) for the weave plugin's tests (idempotent)
	@$(WEAVE_VENV)/bin/python -c "import weave.scorers, fastapi, uvicorn; from weave.trace_server.sqlite_trace_server import SqliteTraceServer" 2>/dev/null || \
		{ python3 -m venv $(WEAVE_VENV) && $(WEAVE_VENV)/bin/pip install --quiet -c $(WEAVE_PINS) $(WEAVE_PIP); }

test-tracing: tracing-deps tracing-mlflow tracing-weave plugins-tracing tokenizers-lib model ## host/tracing, the trace plugins, `rlhost traces` (real plugins, a crash, the viewer in Chromium, MLflow after `rlhost train`)
	$(GO) vet $(TRACING_PKGS)
	RLHOST_MLFLOW_E2E=1 RLHOST_MLFLOW=$(MLFLOW_VENV)/bin/mlflow RLHOST_WEAVE_E2E=1 RLHOST_WEAVE_PYTHON=$(WEAVE_VENV)/bin/python \
		$(GO) test -p 1 -count=1 $(TRACING_PKGS)
	RLHOST_VIEWER_E2E=1 RLHOST_PLAYWRIGHT_NODE_PATH=$(TRACING_NODE)/node_modules \
		RLHOST_MLFLOW_E2E=1 RLHOST_MLFLOW=$(MLFLOW_VENV)/bin/mlflow \
		$(GO) test -p 1 -count=1 -timeout 30m -run 'Traces|TracePlugin' ./cmd/rlhost

test-tracing-conformance: plugins-tracing $(BIN)/rlhost ## `rlhost conformance` on the local plugin (mlflow and weave are checked against real servers by their tests)
	$(BIN)/rlhost conformance $(PLUGINS)/rlhost-trace-local

# BENCH_TRACING_PAIRS: pairs of real training runs (untraced, traced) for the step-time overhead.
BENCH_TRACING_PAIRS ?= 5

bench-tracing: tracing-mlflow plugins-tracing tokenizers-lib model ## tracing cost per span, per trajectory and per real training step, bytes per trajectory, vs MLflow's Python SDK -> docs/bench/tracing.md
	$(GO) test -p 1 -run '^$$' -bench Span -benchmem ./host/tracing/
	$(GO) test -p 1 -run '^$$' -bench TrajectoryLocal -benchtime 2000x -benchmem ./host/tracing/
	$(MLFLOW_VENV)/bin/python scripts/goldens/tracing/bench_mlflow_python.py 300
	uptime
	$(GO) test -p 1 -count=1 -timeout 120m -run '^$$' -bench TrainStepTracing -benchtime $(BENCH_TRACING_PAIRS)x ./cmd/rlhost
