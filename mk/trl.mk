# The GRPO step against TRL's GRPOTrainer (bench-grpo), and the learnable example's run
# (example-arith). TRL (PyPI trl, pinned) lives in a virtualenv of its own under $(CACHE)
# that sees the system site-packages, so the torch / transformers / gguf the goldens use are
# shared and not downloaded again; pip installs them into the venv only where missing.
# It is also the PyTorch reference of bench-compute, bench-algo and the golden generators.
TRL_PYPI  ?= trl==1.16.0
TRL_VENV  := $(CACHE)/trl-venv
TRL_PY    := $(TRL_VENV)/bin/python
GRPO_BENCH_ARGS ?=

ARITH_RAW  := data/arith-raw
ARITH_DATA := data/arith
ARITH_ARGS ?=

.PHONY: setup-trl bench-grpo example-arith

BENCH_TARGETS += bench-grpo

setup-trl: ## virtualenv $(CACHE)/trl-venv with $(TRL_PYPI) (+ torch, transformers, gguf, pyarrow if the system lacks them)
	@$(TRL_PY) -c 'import importlib.metadata as m, sys; sys.exit(m.version("trl") != "$(subst trl==,,$(TRL_PYPI))")' 2>/dev/null || { \
		{ python3 -m venv --system-site-packages $(TRL_VENV) || \
		  { python3 -m pip install --quiet virtualenv && python3 -m virtualenv --system-site-packages $(TRL_VENV); }; } && \
		$(TRL_VENV)/bin/pip install --quiet '$(TRL_PYPI)' gguf pyarrow && \
		$(TRL_PY) -c 'import trl, torch, transformers; print("setup-trl: trl", trl.__version__, "torch", torch.__version__, "transformers", transformers.__version__)'; }

# One GRPO configuration, rlhost then TRL in the same command: 4 GSM8K prompts x n=4,
# 128 response tokens, 3 steps per side (the first a warm-up). -> docs/bench/training.md
bench-grpo: setup-blas model build setup-trl data/gsm8k/train.parquet ## GRPO step breakdown, rlhost vs TRL GRPOTrainer (same model, batch, n, lengths) -> docs/bench/training.md
	uptime
	$(TRL_PY) scripts/bench/trl_grpo.py --rlhost $(BIN)/rlhost $(GRPO_BENCH_ARGS)
	uptime

# The arith example's rows (docs/training.md: the learnable example, several tasks in one run):
# its generator's records, preprocessed by its plugin.
$(ARITH_DATA)/train.parquet: | $(BIN)/rlhost plugins ## generate and preprocess the arith example's data into data/arith
	@test -s $(ARITH_RAW)/train.jsonl || (cd examples/arith && $(GO) run ./gendata -out ../../$(ARITH_RAW))
	$(BIN)/rlhost preprocess --task arith --input $(ARITH_RAW) --output-dir $(ARITH_DATA)

# The learnable example (docs/training.md, "A learnable example"): two-operand arithmetic
# through the examples/arith plugin, curves in runs/arith/curves.png.
example-arith: setup-blas model build $(ARITH_DATA)/train.parquet ## GRPO on the arith example (examples/configs/arith.yaml): mean reward rises in about 10 minutes
	@if [ -d runs/arith ]; then echo "== removing the previous run in runs/arith =="; rm -rf runs/arith; fi
	$(BIN)/rlhost train -c examples/configs/arith.yaml $(ARITH_ARGS)
	@echo "== the run is in runs/arith: curves.png, metrics.jsonl =="

# The same example with Gemma 3 270M (base, Q4_K_M GGUF; docs/models.md): the Gemma 3 family's
# GRPO run, examples/configs/arith-gemma3.yaml, on problems with operands below 10 (data/arith10),
# curves in runs/arith-gemma3/curves.png.
ARITH10_RAW  := data/arith10-raw
ARITH10_DATA := data/arith10
.PHONY: example-arith-gemma3 bench-arith-families
BENCH_TARGETS += bench-arith-families
$(ARITH10_DATA)/train.parquet: | $(BIN)/rlhost plugins ## the arith example's data with operands below 10, in data/arith10
	@test -s $(ARITH10_RAW)/train.jsonl || (cd examples/arith && $(GO) run ./gendata -max 10 -out ../../$(ARITH10_RAW))
	$(BIN)/rlhost preprocess --task arith --input $(ARITH10_RAW) --output-dir $(ARITH10_DATA)

example-arith-gemma3: setup-blas model-gemma3 build $(ARITH10_DATA)/train.parquet ## GRPO on the arith example with Gemma 3 270M (examples/configs/arith-gemma3.yaml)
	@if [ -d runs/arith-gemma3 ]; then echo "== removing the previous run in runs/arith-gemma3 =="; rm -rf runs/arith-gemma3; fi
	$(BIN)/rlhost train -c examples/configs/arith-gemma3.yaml $(ARITH_ARGS)
	@echo "== the run is in runs/arith-gemma3: curves.png, metrics.jsonl =="

# The two arith examples' time per step, SmolLM2 then Gemma 3, in one command -> docs/bench/training.md
bench-arith-families: setup-blas model model-gemma3 build $(ARITH_DATA)/train.parquet $(ARITH10_DATA)/train.parquet ## time per GRPO step of example-arith (SmolLM2) and example-arith-gemma3 (Gemma 3 270M), back to back -> docs/bench/training.md
	scripts/bench/arith_families.sh
