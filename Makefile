# rlhost — build, test, demo.  `make help` lists the targets.
#
# Each area of the project keeps its own setup/build rules in mk/*.mk and appends
# to the variables below; this file only ties them together.
SHELL := /bin/bash
.DEFAULT_GOAL := help

GO      ?= go
export CGO_ENABLED := 1
CACHE   ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/rlhost
BIN     := $(CURDIR)/bin
PLUGINS := $(BIN)/plugins
# Release builds: no local paths, no symbol table or DWARF (`make build GO_BUILD_FLAGS=` keeps them).
GO_BUILD_FLAGS ?= -trimpath -ldflags '-s -w'
GO_BUILD := $(GO) build $(GO_BUILD_FLAGS)

# Filled in by mk/*.mk
SETUP_TARGETS :=
TEST_TARGETS  :=
BENCH_TARGETS :=

include $(sort $(wildcard mk/*.mk))

.PHONY: help setup build test demo bench

help: ## this list
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'

setup: $(SETUP_TARGETS) ## install what builds and tests need (idempotent)

test: setup $(TEST_TARGETS) ## everything CI runs

bench: setup $(BENCH_TARGETS) ## benchmarks; figures go to docs/benchmarks.md
