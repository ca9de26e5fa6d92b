# gen_chat: the policy as an OpenAI-compatible endpoint (host/chatserver), the external agent
# loop (host/rollout/external.go), the task plugin (tasks/genchat) and the example environment
# (examples/genchat-env, Python with the official openai client, in its own virtualenv).
GENCHAT_VENV := $(CACHE)/genchat-venv
GENCHAT_PY   := $(GENCHAT_VENV)/bin/python
GENCHAT_REQS := examples/genchat-env/requirements.txt
GENCHAT_PKGS := ./host/chatserver/... ./tasks/genchat/...

.PHONY: setup-genchat genchat-plugin test-genchat bench-genchat test-engine

SETUP_TARGETS += setup-genchat
TEST_TARGETS  += test-genchat test-engine
BENCH_TARGETS += bench-genchat

setup-genchat: ## virtualenv $(CACHE)/genchat-venv with the example environment's pinned openai client (idempotent)
	@$(GENCHAT_PY) -c 'import importlib.metadata as m, sys; \
		sys.exit(any(m.version(l.split("==")[0]) != l.split("==")[1].strip() for l in open("$(GENCHAT_REQS)") if "==" in l))' 2>/dev/null || { \
		{ python3 -m venv $(GENCHAT_VENV) || \
		  { { apt-get install -y -qq python3-venv || sudo apt-get install -y -qq python3-venv; } && python3 -m venv --clear $(GENCHAT_VENV); } || \
		  { python3 -m pip install --quiet virtualenv && python3 -m virtualenv $(GENCHAT_VENV); }; } && \
		$(GENCHAT_PY) -m pip install --quiet -r $(GENCHAT_REQS) && \
		$(GENCHAT_PY) -c 'import openai; print("setup-genchat: openai", openai.__version__, "in $(GENCHAT_VENV)")'; }

genchat-plugin: ## build bin/plugins/rlhost-task-genchat
	@mkdir -p $(PLUGINS)
	$(GO_BUILD) -o $(PLUGINS)/rlhost-task-genchat ./tasks/genchat/cmd/rlhost-task-genchat

test-genchat: setup-blas tokenizers-lib model setup-genchat ## chat server, external loop, gen_chat plugin, end to end with the Python environment and the default model
	$(GO) vet $(GENCHAT_PKGS) ./host/rollout/
	RLHOST_GENCHAT_PYTHON=$(GENCHAT_PY) $(GO) test -count=1 $(GENCHAT_PKGS)
	$(GO) test -count=1 -run 'External' ./host/rollout/

bench-genchat: setup-blas tokenizers-lib model ## chat endpoint overhead per call (p50) beside direct generation -> docs/bench/genchat.md
	$(GO) test -run '^$$' -bench Endpoint -benchtime 20x ./host/chatserver/

test-engine: setup-blas tokenizers-lib model setup-llamacpp ## external rollout engines: protocol and fault tests, exact ids and log-probs through llama-cpp-python's server on the default GGUF, the weight reload, a fleet of two servers losing one
	$(GO) vet ./host/rollout/ ./host/trainer/
	$(GO) test -count=1 -run 'Engine|PieceSplit|Fleet' ./host/rollout/
	RLHOST_LLAMACPP_PYTHON=$(LLAMACPP_PY) $(GO) test -count=1 -timeout 30m -run 'Engine' ./host/trainer/
