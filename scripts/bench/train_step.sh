#!/usr/bin/env bash
# The training-step comparison of docs/bench/compute.md, both sides back to
# back in one command and the pair repeated (the machine may be shared, so
# each PyTorch figure has Go figures measured right before it):
#
#   sgemm 576^3 and 1536^3 before and after the Go step (the best is the peak the model FLOP
#   utilisation is measured against),
#   BenchmarkTrainStep (SmolLM2-135M shape, B=4 T=256, fwd+bwd+clip+AdamW),
#   scripts/goldens/model/bench_torch.py --skip-decode (PyTorch eager CPU, same batch),
#   then BenchmarkGRPOStep alone (16 x 512 tokens, peak RSS).
#
# Usage: scripts/bench/train_step.sh [rounds]   (from the repository root; default 2 rounds)
set -euo pipefail
rounds=${1:-2}
. "$(dirname "$0")/peer_env.sh"
go test -c -o "$tmp/cpu.test" ./gpu/cpu/
go test -c -o "$tmp/model.test" ./gpu/model/
for r in $(seq 1 "$rounds"); do
	echo "## round $r"
	echo "load: $(uptime)"
	# the sgemm peak right before and right after the step (the best of the four is the reference)
	(cd gpu/cpu && "$tmp/cpu.test" -test.run '^$' -test.bench 'Sgemm/square-(576|1536)$' -test.benchtime 2s | grep Benchmark)
	(cd gpu/model && "$tmp/model.test" -test.run '^$' -test.bench 'TrainStep$' -test.benchtime 2x | grep Benchmark)
	(cd gpu/cpu && "$tmp/cpu.test" -test.run '^$' -test.bench 'Sgemm/square-(576|1536)$' -test.benchtime 2s | grep Benchmark)
	echo "load: $(uptime)"
	"$py" scripts/goldens/model/bench_torch.py --steps 2 --skip-decode
done
echo "## GRPO-sized step (alone, for its peak memory)"
echo "load: $(uptime)"
(cd gpu/model && "$tmp/model.test" -test.run '^$' -test.bench 'GRPOStep' -test.benchtime 1x -test.timeout 60m | grep Benchmark)
echo "load: $(uptime)"
