# The Python SDK for task plugins (sdk/python) and its example (examples/python-math).
# python-wheel builds the SDK's wheel into bin/python from a copy of sdk/python made in a
# temporary folder (a build in place would write build/ and *.egg-info into the checkout);
# setup-python makes a virtualenv under $(CACHE) with that wheel installed (a copy in the
# virtualenv's site-packages: installing writes nothing into the checkout), its pinned
# dependencies and the example's (math-verify), so the system Python is left alone.
# Python plugins find it through their launcher (RLHOST_PYTHON, else this venv, else python3).
PY_VENV      := $(CACHE)/python-venv
PY           := $(PY_VENV)/bin/python
PY_PINS      := grpcio==1.85.1 grpcio-tools==1.85.1 grpcio-health-checking==1.85.1 protobuf==7.36.2 \
                cryptography==50.0.2 math-verify==0.9.0 pytest==9.2.0
PY_GEN       := sdk/python/src/rlhost/_gen/task/v1
PY_MATH      := examples/python-math/rlhost-task-python-math
PY_SDK_VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' sdk/python/pyproject.toml)
PY_WHEEL     := $(BIN)/python/rlhost-$(PY_SDK_VERSION)-py3-none-any.whl
# The wheel's inputs: the SDK's files (git's list; without git, the files on disk).
PY_SDK_FILES := $(shell git ls-files sdk/python 2>/dev/null | grep . || find sdk/python -type f -not -path '*/__pycache__/*' -not -path '*/.*')

.PHONY: setup-python python-wheel proto-python proto-python-check test-python test-python-wheel bench-python

SETUP_TARGETS += setup-python
TEST_TARGETS  += proto-python-check test-python test-python-wheel
BENCH_TARGETS += bench-python

python-wheel: $(PY_WHEEL) ## build the Python SDK's wheel into bin/python (from a copy of sdk/python: nothing is written into it)

$(PY_WHEEL): $(PY_SDK_FILES)
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; mkdir -p $(dir $@); \
	cp -r sdk/python $$tmp/src; rm -rf $$tmp/src/build $$tmp/src/src/*.egg-info; \
	python3 -m pip wheel --quiet --no-deps --wheel-dir $$tmp/out $$tmp/src; \
	mv $$tmp/out/rlhost-$(PY_SDK_VERSION)-py3-none-any.whl $@; \
	echo "python-wheel: $@"

# The virtualenv is made again when a pin moves, and the wheel installed again when it changes
# (its SHA-256 is kept in the virtualenv).
setup-python: $(PY_WHEEL) ## virtualenv $(CACHE)/python-venv with the Python SDK (its wheel) and pinned deps (idempotent)
	@$(PY) -c 'import importlib.metadata as m, sys; pins = "$(PY_PINS)".split(); \
		sys.exit(any(m.version(p.split("==")[0]) != p.split("==")[1] for p in pins))' 2>/dev/null || { \
		{ python3 -m venv $(PY_VENV) || \
		  { { apt-get install -y -qq python3-venv || sudo apt-get install -y -qq python3-venv; } && python3 -m venv --clear $(PY_VENV); } || \
		  { python3 -m pip install --quiet virtualenv && python3 -m virtualenv $(PY_VENV); }; } && \
		$(PY) -m pip install --quiet $(PY_PINS); }
	@[ "$$(cat $(PY_VENV)/rlhost-sdk.sha256 2>/dev/null)" = "$$(sha256sum < $(PY_WHEEL))" ] && $(PY) -c 'import rlhost' 2>/dev/null || { \
		$(PY) -m pip install --quiet --no-deps --force-reinstall $(PY_WHEEL) && sha256sum < $(PY_WHEEL) > $(PY_VENV)/rlhost-sdk.sha256 && \
		$(PY) -c 'import rlhost; print("setup-python: rlhost SDK", rlhost.__version__, "from $(PY_WHEEL) in $(PY_VENV)")'; }

# Installing the wheel into a fresh virtualenv puts the SDK there and writes nothing into the
# checkout (git sees the same files, ignored ones included, before and after).
test-python-wheel: $(PY_WHEEL) ## the SDK's wheel installs into a fresh virtualenv, from there, writing nothing into the checkout
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; \
	git status --porcelain --ignored --untracked-files=all > $$tmp/before; \
	python3 -m venv $$tmp/venv; $$tmp/venv/bin/pip install --quiet --no-deps $(PY_WHEEL); \
	where=$$($$tmp/venv/bin/python -c 'import importlib.util as u; print(u.find_spec("rlhost").origin)'); \
	case "$$where" in $$tmp/venv/*) ;; *) echo "test-python-wheel: rlhost is imported from $$where, not from the virtualenv" >&2; exit 1;; esac; \
	git status --porcelain --ignored --untracked-files=all > $$tmp/after; \
	diff $$tmp/before $$tmp/after || { echo "test-python-wheel: installing the wheel changed the checkout (above)" >&2; exit 1; }; \
	echo "test-python-wheel: rlhost $(PY_SDK_VERSION) from $(PY_WHEEL) is imported from $$where; the checkout is unchanged"

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
