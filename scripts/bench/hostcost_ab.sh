#!/usr/bin/env bash
# Before/after figures of the CUDA backend's host cost per queued op (BenchmarkHostCost, gpu/cuda;
# docs/gpu.md, "The host's own cost per op"), in one command: gpu/cuda's test binary built at each
# revision given (git archive of the revision; "." is the working tree), then ROUNDS rounds running
# each binary in turn, in a quiet window (the heavy lock held, /tmp/rlhost-quiet while it runs,
# waiting up to 2 minutes for the load to settle first), and the medians (min-max) per workload.
# A revision must have the benchmark (d76f9e7 or later).
#
# Usage: scripts/bench/hostcost_ab.sh REV... (from the repository root)
#   ROUNDS (5), BENCHTIME (300x), BENCH (HostCost: a -bench pattern) in the environment.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 REV... (e.g. main .)" >&2; exit 2; }
rounds=${ROUNDS:-5}
benchtime=${BENCHTIME:-300x}
bench=${BENCH:-HostCost}
root=$(pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"; rm -f /tmp/rlhost-quiet' EXIT
export CGO_LDFLAGS="${CGO_LDFLAGS:--L$(ls -d ~/.cache/rlhost/tokenizers/*/ | head -1)}"
export OPENBLAS_NUM_THREADS=1 # gpu/cpu is linked in; its idle threads stay out of the timing
names=()
for rev in "$@"; do
	n=${#names[@]}
	if [ "$rev" = . ]; then
		label="working tree ($(git rev-parse --short HEAD)$(git diff --quiet HEAD -- gpu || echo +changes))"
		(go test -c -o "$tmp/$n.test" ./gpu/cuda/)
	else
		label=$(git rev-parse --short "$rev")
		mkdir "$tmp/$n"
		git archive "$rev" | tar -x -C "$tmp/$n"
		(cd "$tmp/$n" && go test -c -o "$tmp/$n.test" ./gpu/cuda/)
	fi
	names+=("$label")
done
exec 9>/tmp/rlhost-heavy.lock
flock 9
touch /tmp/rlhost-quiet
for _ in $(seq 1 24); do awk '{exit !($1 < 1.2)}' /proc/loadavg && break; sleep 5; done
echo "# $(date -u +%FT%TZ), $(nproc) CPUs, load before: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$tmp/out"
for r in $(seq 1 "$rounds"); do
	for n in "${!names[@]}"; do
		(cd "$root/gpu/cuda" && "$tmp/$n.test" -test.run '^$' -test.bench "$bench" -test.benchtime "$benchtime") |
			grep '^Benchmark' | sed "s/^/$n /" >> "$tmp/out"
	done
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$tmp/out"
rm -f /tmp/rlhost-quiet
python3 - "$tmp/out" "${names[@]}" <<'EOF'
import collections, statistics, sys
names = sys.argv[2:]
runs = collections.defaultdict(list)  # (workload, unit, binary) -> values
order = []
for line in open(sys.argv[1]):
    if line.startswith("#"):
        continue
    f = line.split()
    n, w = int(f[0]), f[1].removeprefix("BenchmarkHostCost/").rsplit("-", 1)[0]
    if w not in order:
        order.append(w)
    for v, unit in zip(f[3::2], f[4::2]):
        runs[(w, unit, n)].append(float(v))
def cell(w, unit, n, fmt):
    v = runs[(w, unit, n)]
    return f"{statistics.median(v):{fmt}} ({min(v):{fmt}}-{max(v):{fmt}})" if v else "-"
print("| workload | ops a forward (each binary) | " + " | ".join(f"ns per op, {x}" for x in names) + " | "
      + " | ".join(f"allocations per op, {x}" for x in names) + " |")
print("|---|---:|" + "---:|" * (2 * len(names)))
for w in order:
    ops = " / ".join(dict.fromkeys(f"{statistics.median(runs[(w, 'ops/forward', n)]):.0f}" for n in range(len(names))))
    print(f"| {w} | {ops} | " + " | ".join(cell(w, "ns/queued-op", n, ".0f") for n in range(len(names))) + " | "
          + " | ".join(f"{statistics.median(runs[(w, 'allocs/queued-op', n)]):.3g}" for n in range(len(names))) + " |")
EOF
