#!/usr/bin/env bash
# docs/benchmarks.md, the current-state page, assembled from docs/bench/AREA.md: one section
# per area in the order given, then any area not given. Links into history/ are rewritten for
# the page's folder (docs/bench/AREA.md links history/X.md, the page bench/history/X.md).
#
#   scripts/bench/benchmarks_page.sh write AREA...   rewrite docs/benchmarks.md (make bench-docs)
#   scripts/bench/benchmarks_page.sh check AREA...   fail if docs/benchmarks.md is not what write makes
#
# Both fail when the page is over BENCH_DOCS_MAX lines (170): each docs/bench/AREA.md keeps only
# its latest figures, and earlier runs move to docs/bench/history/AREA.md. check also fails when
# README.md states a measured figure (a number with a unit of time, speed, size or a ratio, outside
# its code blocks): the figures live on this page alone, so the two cannot disagree and README
# cannot grow a timing log again.
set -euo pipefail
cd "$(dirname "$0")/../.."
mode=${1:-}
[ "$mode" = write ] || [ "$mode" = check ] || { echo "usage: $0 write|check AREA..." >&2; exit 2; }
shift
max=${BENCH_DOCS_MAX:-170}

page() {
	cat <<'HEAD'
# Benchmarks

The latest figure of each measured speed beside a peer run in the same command, with the machine, its load and the command; earlier runs and their analysis are in [bench/history/](bench/history/). `make bench-docs` builds this page from docs/bench/AREA.md. "Dev machine": the shared 2-vCPU development machine; at a high load its figures are upper bounds, and the ratios within one run are what counts.
HEAD
	local -A listed=()
	local a f areas=("$@")
	for a in "$@"; do listed[$a]=1; done
	for f in docs/bench/*.md; do
		a=$(basename "$f" .md)
		[ -n "${listed[$a]:-}" ] || areas+=("$a")
	done
	for a in "${areas[@]}"; do
		f=docs/bench/$a.md
		[ -f "$f" ] || continue
		echo
		sed 's#](history/#](bench/history/#g' "$f"
	done
}

tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
page "$@" > "$tmp"
if [ "$mode" = write ]; then
	cp "$tmp" docs/benchmarks.md
	echo "docs/benchmarks.md: $(ls docs/bench/*.md | wc -l) sections, $(wc -l < docs/benchmarks.md) lines"
elif ! diff -u docs/benchmarks.md "$tmp"; then
	echo "bench-docs-check: docs/benchmarks.md is not what docs/bench/*.md make of it: run make bench-docs and commit the page" >&2
	exit 1
fi
lines=$(wc -l < docs/benchmarks.md)
if [ "$lines" -gt "$max" ]; then
	echo "bench-docs: docs/benchmarks.md is $lines lines, over $max: keep each docs/bench/AREA.md to its latest figures (one table, the command, the machine and load) and move earlier runs to docs/bench/history/AREA.md" >&2
	exit 1
fi
if [ "$mode" = check ]; then
	# README.md outside its fenced blocks: no number followed by a unit of a measurement
	figures=$(awk '/^```/ {code = !code; next} !code' README.md |
		grep -nE '(^|[^[:alnum:].])[0-9]+([.,][0-9]+)?[[:space:]]*(x|×|s|ms|µs|min|h|tokens/s|GiB|GB|MiB|MB|KiB|kB|%|GFLOPS|TFLOP/s)([^[:alnum:]]|$)' || true)
	if [ -n "$figures" ]; then
		echo "bench-docs-check: README.md states measured figures (they belong in docs/bench/AREA.md, which docs/benchmarks.md shows):" >&2
		echo "$figures" >&2
		exit 1
	fi
fi
