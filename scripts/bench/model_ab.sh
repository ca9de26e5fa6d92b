#!/usr/bin/env bash
# Before/after figures of the CPU model (gpu/model) in one command: its test binary built at each
# revision given (git archive of the revision; "." is the working tree), then ROUNDS rounds
# running each binary in turn on BenchmarkTrainStep (SmolLM2-135M, B=4 T=256: fwd+bwd+clip+AdamW)
# and BenchmarkDecode (32-token prompts + 64 new tokens, batch 1 and 16), and the medians
# (min-max) per benchmark. The heavy lock is held while it runs. A change to shared model code
# (a new family's options) states these figures: nothing measured for Llama/Qwen2 got slower.
#
# Usage: scripts/bench/model_ab.sh REV... (from the repository root; e.g. 97a2ff7 .)
#   ROUNDS (3), BENCHES (space-separated -bench patterns; default the two above) in the environment.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 REV... (e.g. main .)" >&2; exit 2; }
rounds=${ROUNDS:-3}
benches=${BENCHES:-'TrainStep$/B4-T256$ Decode$'} # -bench splits a pattern at / into levels
root=$(pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export CGO_LDFLAGS="${CGO_LDFLAGS:--L$(ls -d ~/.cache/rlhost/tokenizers/*/ | head -1)}"
names=()
for rev in "$@"; do
	n=${#names[@]}
	if [ "$rev" = . ]; then
		label="working tree ($(git rev-parse --short HEAD)$(git diff --quiet HEAD -- gpu || echo +changes))"
		(go test -c -o "$tmp/$n.test" ./gpu/model/)
	else
		label=$(git rev-parse --short "$rev")
		mkdir "$tmp/$n"
		git archive "$rev" | tar -x -C "$tmp/$n"
		(cd "$tmp/$n" && go test -c -o "$tmp/$n.test" ./gpu/model/)
	fi
	names+=("$label")
done
exec 9>/tmp/rlhost-heavy.lock
flock 9
echo "# $(date -u +%FT%TZ), $(nproc) CPUs, load before: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$tmp/out"
for r in $(seq 1 "$rounds"); do
	for n in "${!names[@]}"; do
		for bench in $benches; do
			(cd "$root/gpu/model" && "$tmp/$n.test" -test.run '^$' -test.bench "$bench" -test.benchtime 1x -test.timeout 60m) |
				grep '^Benchmark' | sed "s/^/$n /" | tee -a "$tmp/out"
		done
	done
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$tmp/out"
python3 - "$tmp/out" "${names[@]}" <<'PY'
import collections, re, statistics, sys
names = sys.argv[2:]
runs = collections.defaultdict(list)  # (benchmark, binary) -> ns/op
order = []
for line in open(sys.argv[1]):
    if line.startswith("#"):
        continue
    f = line.split()
    n = int(f[0])
    w = re.sub(r"-\d+$", "", f[1])  # the GOMAXPROCS suffix
    if w not in order:
        order.append(w)
    runs[(w, n)].append(float(f[3]) / 1e9)
def cell(w, n):
    v = runs[(w, n)]
    return f"{statistics.median(v):.2f} ({min(v):.2f}-{max(v):.2f})" if v else "-"
print("| benchmark | " + " | ".join(f"s, {x}" for x in names) + (" | after / before |" if len(names) == 2 else " |"))
print("|---|" + "---:|" * len(names) + ("---:|" if len(names) == 2 else ""))
for w in order:
    ratio = ""
    if len(names) == 2 and runs[(w, 0)] and runs[(w, 1)]:
        ratio = f" {statistics.median(runs[(w, 1)]) / statistics.median(runs[(w, 0)]):.3f} |"
    print(f"| {w} | " + " | ".join(cell(w, n) for n in range(len(names))) + " |" + ratio)
PY
