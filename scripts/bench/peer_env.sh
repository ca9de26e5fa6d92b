# Sourced by the bracketed peer benchmarks (train_step.sh, decode.sh), from the repository root:
# sets py (PyTorch and transformers: the reference virtualenv of `make setup-trl`, or $PYTHON) and
# tmp (a directory removed on exit), and prints the machine line.
py=${PYTHON:-$HOME/.cache/rlhost/trl-venv/bin/python}
"$py" -c 'import torch, transformers' || { echo "$(basename "$0"): $py has no torch/transformers: run make setup-trl" >&2; exit 1; }
export CGO_ENABLED=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "# $(date -u +%FT%TZ) $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
