# tasks/swedev: software-engineering episodes in sandboxes. rlhost-sandbox (HTTP service),
# rlhost-task-swedev (task plugin, runs the sandbox in process unless sandbox_url is set) and
# the starter dataset under tasks/swedev/dataset. The sandbox uses bubblewrap when it works,
# else namespaces built with util-linux's mount, pivot_root and setpriv (root), or rlimits
# (weak: no file system view; rlhost train refuses it unless task.allow_weak_isolation=true);
# tests run real processes with python3 (Debian's, at /usr/bin/python3), git and go inside the
# instances, and TestNoLeak reads every file an instance can see (about 11 GB here, 3 minutes a
# mode). See docs/swedev.md and docs/security.md.
SWEDEV_SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
SWEDEV_PKGS := ./tasks/swedev/...

.PHONY: setup-swedev swedev-build test-swedev test-swedev-leak test-swedev-conformance bench-swedev swedev-dataset swedev-data

SETUP_TARGETS += setup-swedev
TEST_TARGETS  += test-swedev test-swedev-conformance
BENCH_TARGETS += bench-swedev

setup-swedev: ## install bubblewrap, git and python3 (apt) for the swedev sandbox
	@command -v bwrap >/dev/null && command -v git >/dev/null && test -x /usr/bin/python3 || { \
		$(SWEDEV_SUDO) apt-get update -q && \
		DEBIAN_FRONTEND=noninteractive $(SWEDEV_SUDO) apt-get install -y -q --no-install-recommends bubblewrap git python3; }

build: swedev-build
swedev-build: ## build bin/plugins/rlhost-task-swedev and bin/rlhost-sandbox
	@mkdir -p $(PLUGINS)
	$(GO_BUILD) -o $(PLUGINS)/rlhost-task-swedev ./tasks/swedev/cmd/rlhost-task-swedev
	$(GO_BUILD) -o $(BIN)/rlhost-sandbox ./tasks/swedev/cmd/rlhost-sandbox

test-swedev: setup-swedev ## sandbox faults and the leak test with real processes, planted cheats, plugin episodes, every dataset task verified
	$(GO) vet $(SWEDEV_PKGS)
	$(GO) test -count=1 -p 1 -timeout 30m $(SWEDEV_PKGS)

test-swedev-leak: setup-swedev ## only the leak test: from inside an instance, every path and readable file, in every isolation mode
	$(GO) test -count=1 -v -run TestNoLeak -timeout 30m ./tasks/swedev/sandbox

test-swedev-conformance: build ## `rlhost conformance` on rlhost-task-swedev
	$(BIN)/rlhost conformance $(PLUGINS)/rlhost-task-swedev

bench-swedev: setup-swedev ## instance create/exec/delete latency, 16 concurrent instances -> docs/bench/swedev.md
	$(GO) test -p 1 -run '^$$' -bench . -benchtime 20x ./tasks/swedev/sandbox

swedev-dataset: ## regenerate tasks/swedev/dataset from scripts/swedev/make_dataset.py (needs git)
	python3 scripts/swedev/make_dataset.py tasks/swedev/dataset
	$(GO) test -count=1 -run TestDatasetVerified ./tasks/swedev/swplugin

swedev-data: build ## preprocess the starter dataset into data/swedev/{train,test}.parquet
	$(BIN)/rlhost preprocess --task swedev --input tasks/swedev/dataset --output-dir data/swedev
