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
LLAMACPP_WHEELS  := $(CACHE)/pip/llamacpp
# CPU only; no multimodal library, tools, tests or examples (they only add compile time);
# GGML_NATIVE tunes for the build machine, which is the machine the wheel is cached on.
LLAMACPP_CMAKE   := -DLLAVA_BUILD=OFF -DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
                    -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_CURL=OFF -DGGML_OPENMP=OFF

.PHONY: setup-llamacpp llamacpp-goldens bench-llamacpp

SETUP_TARGETS += setup-llamacpp
BENCH_TARGETS += bench-llamacpp

setup-llamacpp: ## virtualenv $(CACHE)/llamacpp-venv with llama-cpp-python[server] (compiled once, ~10 min on 2 cores)
	@$(LLAMACPP_PY) -c 'import importlib.metadata as m, sys, llama_cpp, llama_cpp.server.app; \
		sys.exit(m.version("llama_cpp_python") != "$(LLAMACPP_VERSION)")' 2>/dev/null || { set -e; \
		{ python3 -m venv $(LLAMACPP_VENV) || \
		  { { apt-get install -y -qq python3-venv || sudo apt-get install -y -qq python3-venv; } && python3 -m venv --clear $(LLAMACPP_VENV); }; }; \
		mkdir -p $(LLAMACPP_WHEELS); \
		if ! ls $(LLAMACPP_WHEELS)/llama_cpp_python-$(LLAMACPP_VERSION)-*.whl >/dev/null 2>&1; then \
			echo "setup-llamacpp: compiling llama-cpp-python $(LLAMACPP_VERSION) (CPU only; once, cached in $(LLAMACPP_WHEELS))"; \
			CMAKE_ARGS="$(LLAMACPP_CMAKE)" CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) \
				$(LLAMACPP_PY) -m pip wheel -q --no-deps -w $(LLAMACPP_WHEELS) 'llama-cpp-python==$(LLAMACPP_VERSION)'; \
		fi; \
		$(LLAMACPP_PY) -m pip install -q --find-links $(LLAMACPP_WHEELS) 'llama-cpp-python[server]==$(LLAMACPP_VERSION)'; \
		$(LLAMACPP_PY) -c 'import llama_cpp; print("setup-llamacpp: llama-cpp-python", llama_cpp.__version__, "in $(LLAMACPP_VENV)")'; }

llamacpp-goldens: setup-llamacpp model ## regenerate gpu/model/testdata/llamacpp_greedy.json (llama.cpp on the default GGUF and its F32 copy) and smollm2-q8.json (its Q8_0 logit error) (needs the gguf package)
	@tmp=$$(mktemp -d) && trap 'rm -rf $$tmp' EXIT && \
	python3 scripts/goldens/llamacpp/f32_gguf.py $(MODEL_GGUF) $$tmp/f32.gguf && \
	$(LLAMACPP_PY) scripts/goldens/llamacpp/greedy.py --model $(MODEL_GGUF) --model-f32 $$tmp/f32.gguf \
		--out gpu/model/testdata/llamacpp_greedy.json && \
	$(LLAMACPP_PY) scripts/goldens/llamacpp/q8_error.py --model-f32 $$tmp/f32.gguf --out gpu/model/testdata

bench-llamacpp: setup-blas setup-llamacpp tokenizers-lib model ## decode tokens/s at batch 1 per rollout dtype vs llama.cpp (1 and 2 threads), same run -> docs/bench/decode.md
	$(GO) build -o $(BIN)/rlhost ./cmd/rlhost
	$(LLAMACPP_PY) scripts/bench/lowp_decode.py --model $(MODEL_GGUF) --rlhost $(BIN)/rlhost --tokens 128 --rounds 3 --llama-threads 1,2
