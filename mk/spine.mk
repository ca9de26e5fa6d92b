# The plugin spine: protocol (sdk/proto -> sdk/gen), the SDK, the host plugin runtime, the CLI,
# the built-in task plugins and the conformance kit.
TOOLS_BIN   := $(BIN)/tools
SPINE_PKGS  := ./host/plugin/... ./host/ckpt/... ./host/judge/... ./host/progress/... ./host/rollout/... ./host/trainer/... ./host/dist/... ./cmd/... ./tasks/gsm8k/cmd/... ./tasks/gsm8k/gsm8kplugin/...
# Built-in plugins: binary name -> package (in the host module).
PLUGIN_BINS := $(PLUGINS)/rlhost-task-gsm8k $(PLUGINS)/rlhost-task-arith $(PLUGINS)/rlhost-task-genchat

# host/dist under real torchrun and gpu/cuda/nccl on pip's NCCL (torch and its NVIDIA wheels from
# setup-trl, which make test does not install: CI runs the other tests of both, and these skip there).
.PHONY: test-dist
test-dist: setup-trl ## ranks from torchrun's variables and rank 0's value through torchrun's own rendezvous store (real torchrun --no-python, 3 ranks); pip's NCCL loaded, its version and unique ids; rlhost train as 2 ranks under real torchrun
	RLHOST_TORCH_PYTHON=$(TRL_PY) $(GO) test -count=1 -v ./host/dist/ ./gpu/cuda/nccl/
	RLHOST_TORCH_PYTHON=$(TRL_PY) $(GO) test -count=1 -v -run TestTrainTwoProcesses ./cmd/rlhost/

.PHONY: build plugins proto proto-check proto-tools test-spine test-conformance bench-spine demo demo-setup demo-compile demo-build bench-docs bench-docs-check metrics-docs

TEST_TARGETS  += proto-check bench-docs-check test-spine test-conformance
BENCH_TARGETS += bench-spine

build: $(BIN)/rlhost plugins ## build bin/rlhost and the built-in plugins into bin/plugins (and what bin/rlhost links: OpenBLAS, the tokenizers library)

# bin/rlhost links OpenBLAS and the Rust tokenizers library (cgo): both come first, so that
# `make build` works on a fresh clone (the plugins link neither).
$(BIN)/rlhost: FORCE setup-blas tokenizers-lib
	$(GO_BUILD) -o $@ ./cmd/rlhost

$(PLUGINS)/rlhost-task-gsm8k: FORCE
	$(GO_BUILD) -o $@ ./tasks/gsm8k/cmd/rlhost-task-gsm8k

metrics-docs: tokenizers-lib setup-blas ## regenerate docs/metrics.md's list of the metrics of rlhost train (host/trainer/metricnames.go); test-spine fails while it is stale
	$(GO) test -count=1 -run '^TestMetricsDoc$$' ./host/trainer -update

plugins: $(PLUGINS)/rlhost-task-gsm8k ## build the built-in plugins into bin/plugins
	$(GO_BUILD) -o $(PLUGINS)/rlhost-task-genchat ./tasks/genchat/cmd/rlhost-task-genchat
	cd examples/arith && $(GO_BUILD) -o $(PLUGINS)/rlhost-task-arith .

.PHONY: FORCE
FORCE:

proto-tools: ## build buf, protoc-gen-go and protoc-gen-go-grpc at their pinned versions (tools/)
	@mkdir -p $(TOOLS_BIN)
	cd tools/buf && $(GO) build -o $(TOOLS_BIN)/ github.com/bufbuild/buf/cmd/buf
	cd tools/protoc-gen && $(GO) build -o $(TOOLS_BIN)/ google.golang.org/protobuf/cmd/protoc-gen-go google.golang.org/grpc/cmd/protoc-gen-go-grpc

proto: proto-tools ## regenerate sdk/gen from sdk/proto (lint first)
	cd sdk && PATH=$(TOOLS_BIN):$$PATH buf lint && PATH=$(TOOLS_BIN):$$PATH buf generate

proto-check: proto-tools ## fail if sdk/gen differs from what `make proto` generates
	@tmp=$$(mktemp -d) && trap 'rm -rf $$tmp' EXIT && cp -r sdk $$tmp/ && \
	cd $$tmp/sdk && rm -rf gen && PATH=$(TOOLS_BIN):$$PATH buf lint && PATH=$(TOOLS_BIN):$$PATH buf generate && \
	diff -r gen $(CURDIR)/sdk/gen && echo "proto-check: sdk/gen is up to date"

test-spine: setup-blas tokenizers-lib model ## SDK, plugin runtime, checkpoints, CLI, gsm8k plugin and example tests (real plugin processes, the bad-plugin runs of cmd/rlhost/badplugin_test.go)
	cd sdk && $(GO) vet ./... && $(GO) test -count=1 ./...
	cd examples/arith && $(GO) vet ./... && $(GO) test -count=1 ./...
	$(GO) vet $(SPINE_PKGS)
	$(GO) test -count=1 -timeout 45m -skip 'Traces|TracePlugin' $(SPINE_PKGS) # those run in test-tracing

test-conformance: build ## `rlhost conformance` on every shipped plugin
	$(BIN)/rlhost conformance $(PLUGIN_BINS)

bench-spine: build ## plugin round trip (Obs, Score) vs in-process, preprocess and parquet load -> docs/bench/spine.md
	$(GO) test -run '^$$' -bench . -benchtime 2s ./host/plugin/

DEMO_CONFIG ?= examples/configs/gsm8k-demo.yaml
# GSM8K's raw files (train.jsonl, test.jsonl); `make demo GSM8K_RAW=DIR` reads them from DIR.
GSM8K_RAW   ?= $(firstword $(wildcard ../shared/data/gsm8k /work/shared/data/gsm8k) ../shared/data/gsm8k)
# What the demo runs, and nothing else: the CLI, the gsm8k task and the local trace store.
DEMO_BINS   := $(BIN)/rlhost $(PLUGINS)/rlhost-task-gsm8k $(PLUGINS)/rlhost-trace-local
DEMO_PKGS   := ./cmd/rlhost ./tasks/gsm8k/cmd/rlhost-task-gsm8k ./plugins/local/cmd/rlhost-trace-local

# The demo's set-up is OpenBLAS, the tokenizers library, the default model and the GSM8K
# parquet files; `make setup` (run by `make test`) installs what every area's tests need.
# On a fresh machine the set-up is mostly compiling: the Rust build of the tokenizers
# library, the model download and the compilation of the Go packages (demo-compile, which
# needs no library) run side by side; then the three binaries link from the build cache.
demo: demo-setup ## a short real GRPO run on GSM8K with the default model (set-up included: see README.md)
	@if [ -d runs/demo ]; then echo "== removing the previous demo run in runs/demo =="; rm -rf runs/demo; fi
	bin/rlhost train --task gsm8k -c $(DEMO_CONFIG) $(DEMO_ARGS)

demo-setup: setup-blas ## install and build what `make demo` runs, and nothing else
	$(MAKE) --no-print-directory -j3 tokenizers-lib model demo-compile
	$(MAKE) --no-print-directory demo-build data/gsm8k/train.parquet

demo-compile: ## compile (not link) the Go packages of the demo's binaries into the build cache
	$(GO) list $(GO_BUILD_FLAGS) -export -deps -f '{{.Export}}' $(DEMO_PKGS) > /dev/null

demo-build: $(DEMO_BINS) ## build only what `make demo` runs

data/gsm8k/train.parquet: | $(BIN)/rlhost $(PLUGINS)/rlhost-task-gsm8k ## preprocess GSM8K ($(GSM8K_RAW)) into data/gsm8k
	$(BIN)/rlhost preprocess --task gsm8k --input $(GSM8K_RAW) --output-dir data/gsm8k

# The page's sections in reading order; an area not listed comes after them.
BENCH_ORDER := setup compute training decode spine python tracing algo lora tokenizer model-files data metrics genchat dr swedev cuda

bench-docs: ## rebuild docs/benchmarks.md (the current figures, at most 170 lines) from docs/bench/AREA.md; earlier runs are in docs/bench/history/
	scripts/bench/benchmarks_page.sh write $(BENCH_ORDER)

bench-docs-check: ## fail if docs/benchmarks.md is over 170 lines or not what `make bench-docs` assembles, or if README.md states a measured figure
	scripts/bench/benchmarks_page.sh check $(BENCH_ORDER)
