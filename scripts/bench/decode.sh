#!/usr/bin/env bash
# The decode comparison of docs/bench/decode.md: rlhost's generator against transformers
# `generate` on the same shapes, each peer run bracketed by Go runs right before and after it
# (the machine may be shared, and its memory bandwidth drifts between minutes), rounds repeated:
#
#   BenchmarkDecodeDtype (SmolLM2-135M shape, random weights, 32-token prompts + 64 new tokens,
#   greedy, batch 1 and 16; rollout dtypes float32, bfloat16, int8),
#   scripts/goldens/model/bench_torch.py --skip-train (transformers generate, float32),
#   the same with --decode-dtype bfloat16, and with --decode-dtype int8 (torch's dynamic int8
#   quantisation of every nn.Linear),
#   BenchmarkDecodeDtype again.
#
# Usage: scripts/bench/decode.sh [rounds]   (from the repository root; default 2 rounds)
set -euo pipefail
rounds=${1:-2}
. "$(dirname "$0")/peer_env.sh"
go test -c -o "$tmp/model.test" ./gpu/model/
go_decode() { (cd gpu/model && "$tmp/model.test" -test.run '^$' -test.bench 'DecodeDtype' -test.benchtime 2x | grep Benchmark); }
for r in $(seq 1 "$rounds"); do
	echo "## round $r"
	echo "load: $(uptime)"
	go_decode
	"$py" scripts/goldens/model/bench_torch.py --skip-train
	"$py" scripts/goldens/model/bench_torch.py --skip-train --decode-dtype bfloat16
	"$py" scripts/goldens/model/bench_torch.py --skip-train --decode-dtype int8 2>&1 | grep -E "^(torch|int8|decode) "
	go_decode
	echo "load: $(uptime)"
done
