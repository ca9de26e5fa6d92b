#!/usr/bin/env bash
# The families comparison of docs/bench/compute.md: Qwen3-0.6B's shape (random weights) in
# rlhost and in PyTorch eager / transformers generate on the same batch, back to back in one
# command, and the cost of QK-norm and of a sliding window on the same dimensions:
#
#   for each shape of qwen3-0.6b-noqknorm (a Llama/Qwen2-style decoder of Qwen3-0.6B's
#   dimensions), qwen3-0.6b (QK-norm), qwen3-0.6b-window64 (QK-norm and a 64-position window
#   on every layer): BenchmarkTrainStep (B=4 T=256, fwd+bwd+clip+AdamW) and BenchmarkDecode
#   (32-token prompts + 64 new tokens, greedy, batch 1 and 16, float32), then
#   bench_torch.py --shape with the same batch (train and float32 generate).
#
# Usage: scripts/bench/families.sh [rounds] [shapes...]   (from the repository root; default 1 round)
set -euo pipefail
rounds=${1:-1}
shift || true
shapes=${*:-qwen3-0.6b-noqknorm qwen3-0.6b qwen3-0.6b-window64}
. "$(dirname "$0")/peer_env.sh"
go test -c -o "$tmp/model.test" ./gpu/model/
for r in $(seq 1 "$rounds"); do
	for s in $shapes; do
		echo "## round $r shape $s"
		echo "load: $(uptime)"
		(cd gpu/model && RLHOST_BENCH_SHAPE=$s "$tmp/model.test" -test.run '^$' -test.bench 'TrainStep$/-B4-T256$' -test.benchtime 2x -test.timeout 60m | grep Benchmark)
		(cd gpu/model && RLHOST_BENCH_SHAPE=$s "$tmp/model.test" -test.run '^$' -test.bench 'Decode$' -test.benchtime 1x -test.timeout 60m | grep Benchmark)
		echo "load: $(uptime)"
		"$py" scripts/goldens/model/bench_torch.py --shape "$s" --steps 2
		echo "load: $(uptime)"
	done
done
