# host/algo (RL algorithms: advantages, policy/value/KL losses, aggregation) and
# host/reward (reward managers). Tests need only Go: the goldens they read are
# committed under host/algo/testdata; regenerating them needs torch and numpy.

ALGO_PKGS := ./host/algo ./host/reward

.PHONY: test-algo bench-algo algo-goldens

TEST_TARGETS  += test-algo
BENCH_TARGETS += bench-algo

test-algo: ## host/algo (goldens from PyTorch, finite differences) + host/reward
	$(GO) test -count=1 -p 1 $(ALGO_PKGS)

bench-algo: setup-trl ## advantage, loss and reward-manager benchmarks vs PyTorch -> docs/bench/algo.md
	$(GO) test -p 1 -run '^$$' -bench . -benchmem -benchtime 50x $(ALGO_PKGS)
	$(TRL_PY) scripts/goldens/algo/bench_torch.py --iters 20

algo-goldens: setup-trl ## regenerate host/algo/testdata with PyTorch (not run by test)
	$(TRL_PY) scripts/goldens/algo/make_goldens.py host/algo/testdata
	$(GO) test -count=1 ./host/algo
