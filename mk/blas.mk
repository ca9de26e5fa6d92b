# gpu/cpu and gpu/model: OpenBLAS (cgo sgemm, Debian libopenblas-dev) and the
# compute/model tests and benchmarks.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: setup-blas test-compute test-save-transformers bench-compute compute-goldens

SETUP_TARGETS += setup-blas
TEST_TARGETS  += test-compute
BENCH_TARGETS += bench-compute

setup-blas: ## install libopenblas-dev (apt) for gpu/cpu
	@dpkg-query -W -f='$${Status}' libopenblas-dev 2>/dev/null | grep -q 'install ok installed' || { \
		$(SUDO) apt-get update -q && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q --no-install-recommends libopenblas-dev pkg-config; }

test-compute: setup-blas model model-gemma3 ## gpu op set, CPU backend and model tests (goldens from transformers, committed)
	$(GO) test -count=1 ./gpu/ ./gpu/cpu/... ./gpu/model/...

# A checkpoint rlhost writes, loaded by transformers itself (torch and transformers from setup-trl,
# which make test does not install: CI runs without torch, and the test skips there).
test-save-transformers: setup-blas setup-trl ## every family's checkpoint as rlhost saves it after a training step loads in transformers unchanged, same logits (TestSavedLoadsInTransformers)
	RLHOST_TORCH_PYTHON=$(TRL_PY) $(GO) test -count=1 -run 'TestSavedLoadsInTransformers' -v ./gpu/model/

# Go figures, then the PyTorch eager peer on the same shapes (torch and transformers from
# the reference virtualenv of setup-trl); the GRPO-sized step runs alone so that its peak
# memory is its own.
bench-compute: setup-blas setup-trl ## sgemm, training step, decode, GRPO step memory vs PyTorch -> docs/bench/compute.md
	$(GO) test -run '^$$' -bench 'Sgemm/(square|lmhead-N)' -benchtime 5x ./gpu/cpu/
	$(GO) test -run '^$$' -bench 'TrainStep|Decode' -benchtime 2x ./gpu/model/
	$(GO) test -run '^$$' -bench 'GRPOStep' -benchtime 1x -timeout 60m ./gpu/model/
	$(TRL_PY) scripts/goldens/model/bench_torch.py --steps 2

compute-goldens: setup-trl ## regenerate gpu/model/testdata with transformers and peft (not run by test)
	$(TRL_PY) -c 'import peft' 2>/dev/null || $(TRL_VENV)/bin/pip install --quiet peft
	$(TRL_PY) scripts/goldens/model/make_goldens.py gpu/model/testdata
	$(TRL_PY) scripts/goldens/model/make_family_goldens.py gpu/model/testdata
	$(TRL_PY) scripts/goldens/model/make_eos_goldens.py gpu/model/testdata
	$(TRL_PY) scripts/goldens/model/make_reward_goldens.py gpu/model/testdata/reward
