# tasks/dr: the deep-research task. WordNet (Debian wordnet-base) is the knowledge source;
# rlhost-dr-data turns it into corpus.jsonl + train/test QA JSONL, rlhost-retriever serves
# BM25 search over the corpus (bleve), rlhost-task-dr is the task plugin. See docs/dr.md.
# Tests need only Go and the small samples under tasks/dr/testdata; dr-data needs wordnet-base.
DR_SUDO  := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
DR_DATA  ?= $(CACHE)/dr
DR_PKGS  := ./tasks/dr/... ./cmd/retriever/...
DR_PORT  ?= 8765

.PHONY: setup-dr dr-data dr-build test-dr test-dr-conformance bench-dr dr-goldens dr-index dr-retriever

SETUP_TARGETS += setup-dr
TEST_TARGETS  += test-dr test-dr-conformance
BENCH_TARGETS += bench-dr

setup-dr: ## install WordNet (apt wordnet-base) for the dr knowledge source
	@test -f /usr/share/wordnet/data.noun || { \
		$(DR_SUDO) apt-get update -q && \
		DEBIAN_FRONTEND=noninteractive $(DR_SUDO) apt-get install -y -q --no-install-recommends wordnet-base; }

dr-data: setup-dr ## build the dr corpus and QA set from WordNet into $(DR_DATA) (idempotent)
	@test -s $(DR_DATA)/corpus.jsonl -a -s $(DR_DATA)/train.jsonl -a -s $(DR_DATA)/test.jsonl || \
		$(GO) run ./tasks/dr/cmd/rlhost-dr-data -wordnet /usr/share/wordnet -out $(DR_DATA)

# `make build` also builds the dr plugin and the retriever.
build: dr-build
dr-build: ## build bin/plugins/rlhost-task-dr and bin/rlhost-retriever
	@mkdir -p $(PLUGINS)
	$(GO_BUILD) -o $(PLUGINS)/rlhost-task-dr ./tasks/dr/cmd/rlhost-task-dr
	$(GO_BUILD) -o $(BIN)/rlhost-retriever ./cmd/retriever

test-dr: setup-dr ## dr tests (WordNet parser fuzz seeds, retriever over real HTTP, plugin, conformance)
	$(GO) vet $(DR_PKGS)
	$(GO) test -count=1 -p 1 $(DR_PKGS)

test-dr-conformance: $(BIN)/rlhost dr-build ## `rlhost conformance` on rlhost-task-dr
	$(BIN)/rlhost conformance $(PLUGINS)/rlhost-task-dr

DR_VENV := $(CACHE)/dr-venv
# Go figures (index build, latency over HTTP and in process), then the Python peer bm25s over
# the same corpus and queries, in its own virtualenv (scipy must not move under other areas).
bench-dr: dr-data dr-index ## retriever index build and p50/p99 latency at topk=5 vs bm25s -> docs/bench/dr.md
	RLHOST_DR_DATA=$(DR_DATA) $(GO) test -run '^$$' -bench 'WordNetIndexBuild' -benchtime 1x ./tasks/dr/retriever
	RLHOST_DR_DATA=$(DR_DATA) $(GO) test -run '^$$' -bench 'WordNetRetrieve' -benchtime 800x ./tasks/dr/retriever
	@$(DR_VENV)/bin/python -c 'import bm25s, Stemmer' 2>/dev/null || { python3 -m venv $(DR_VENV) && \
		$(DR_VENV)/bin/pip install --quiet bm25s==0.3.16 scipy PyStemmer; }
	$(DR_VENV)/bin/python scripts/dr/bench_bm25s.py $(DR_DATA)

dr-goldens: ## regenerate tasks/dr/testdata and the WordNet sample from /usr/share/wordnet
	scripts/dr/make_wordnet_sample.sh /usr/share/wordnet tasks/dr/wordnet/testdata/wn
	$(GO) test -count=1 -run TestGenerateGolden ./tasks/dr/wordnet -update
	python3 scripts/dr/make_score_goldens.py > tasks/dr/testdata/score_cases.json

dr-index: dr-data dr-build ## build the retriever's index of $(DR_DATA) once (reused while the corpus is unchanged)
	$(BIN)/rlhost-retriever -corpus $(DR_DATA)/corpus.jsonl -index $(DR_DATA)/index -build-only

dr-retriever: dr-data dr-build ## run the retriever over $(DR_DATA) on 127.0.0.1:$(DR_PORT) (builds the index once)
	$(BIN)/rlhost-retriever -corpus $(DR_DATA)/corpus.jsonl -index $(DR_DATA)/index -addr 127.0.0.1:$(DR_PORT)
