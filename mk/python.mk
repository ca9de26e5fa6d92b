# The Python SDK for task plugins (sdk/python) and its example (examples/python-math).
# setup-python makes a virtualenv under $(CACHE) with the SDK installed in editable mode, its
# pinned dependencies and the example's (math-verify), so the system Python is left alone.
# Python plugins find it through their launcher (RLHOST_PYTHON, else this venv, else python3).
PY_VENV      := $(CACHE)/python-venv
PY           := $(PY_VENV)/bin/python
PY_PINS      := grpcio==1.85.1 grpcio-tools==1.85.1 grpcio-health-checking==1.85.1 protobuf==7.36.2 \
                cryptography==50.0.2 math-verify==0.9.0 pytest==9.2.0
PY_GEN       := sdk/python/src/rlhost/_gen/task/v1
PY_MATH      := examples/python-math/rlhost-task-python-math

.PHONY: setup-python proto-python proto-python-check test-python bench-python

SETUP_TARGETS += setup-python
TEST_TARGETS  += proto-python-check test-python
BENCH_TARGETS += bench-python

setup-python: ## virtualenv $(CACHE)/python-venv with the Python SDK (editable) and pinned deps (idempotent)
	@$(PY) -c 'import importlib.metadata as m, sys; import rlhost; pins = "$(PY_PINS)".split(); \
		sys.exit(any(m.version(p.split("==")[0]) != p.split("==")[1] for p in pins))' 2>/dev/null || { \
		{ python3 -m venv $(PY_VENV) || \
		  { { apt-get install -y -qq python3-venv || sudo apt-get install -y -qq python3-venv; } && python3 -m venv --clear $(PY_VENV); } || \
		  { python3 -m pip install --quiet virtualenv && python3 -m virtualenv $(PY_VENV); }; } && \
		$(PY) -m pip install --quiet $(PY_PINS) && \
		$(PY) -m pip install --quiet --no-deps -e sdk/python && \
		$(PY) -c 'import rlhost; print("setup-python: rlhost SDK", rlhost.__version__, "in $(PY_VENV)")'; }

# The stubs are generated from the same .proto as sdk/gen, mapped under rlhost/_gen so that
# their imports stay inside the package.
define py_protoc
	$(PY) -m grpc_tools.protoc -Irlhost/_gen=sdk/proto --python_out=$(1) --pyi_out=$(1) --grpc_python_out=$(1) \
		rlhost/_gen/task/v1/task.proto
endef

# `make proto` regenerates the Python stubs too.
proto: proto-python

proto-python: setup-python ## regenerate the Python stubs in sdk/python/src/rlhost/_gen from sdk/proto
	@tmp=$$(mktemp -d) && trap 'rm -rf $$tmp' EXIT && $(call py_protoc,$$tmp) && \
	cp $$tmp/rlhost/_gen/task/v1/task_pb2.py $$tmp/rlhost/_gen/task/v1/task_pb2.pyi $$tmp/rlhost/_gen/task/v1/task_pb2_grpc.py $(PY_GEN)/

proto-python-check: setup-python ## fail if the Python stubs differ from what `make proto-python` generates
	@tmp=$$(mktemp -d) && trap 'rm -rf $$tmp' EXIT && $(call py_protoc,$$tmp) && \
	for f in task_pb2.py task_pb2.pyi task_pb2_grpc.py; do \
		diff -u $(PY_GEN)/$$f $$tmp/rlhost/_gen/task/v1/$$f || { echo "proto-python-check: $(PY_GEN)/$$f is stale: run make proto-python"; exit 1; }; \
	done && echo "proto-python-check: the Python stubs are up to date"

test-python: setup-python build model ## Python SDK unit tests, conformance of the Python example, host fault tests, a stock-grpcio plugin, `rlhost new task --lang python`, a one-step training run
	cd sdk/python && $(PY) -m pytest -q
	cd examples/python-math && $(PY) -m pytest -q
	RLHOST_PYTHON=$(PY) $(BIN)/rlhost conformance $(PY_MATH) examples/python-math/testdata/fault/rlhost-task-pyfault
	RLHOST_PYTHON=$(PY) $(GO) test -count=1 ./examples/python-math/
	RLHOST_PYTHON=$(PY) $(GO) test -count=1 -run 'TestStockGRPCIOPlugin|TestHostCerts' ./host/plugin/
	RLHOST_PYTHON=$(PY) $(GO) test -count=1 -run 'TestNewTaskEndToEnd/python' ./cmd/rlhost/

bench-python: setup-python build ## Obs and Score round trips, Python plugin vs Go gsm8k plugin -> docs/bench/python.md (gRPC's own TLS, no relay)
	RLHOST_PYTHON=$(PY) $(GO) test -run '^$$' -bench . -benchtime 2s ./examples/python-math/
