#!/usr/bin/env bash
# One-command proof of the CUDA backend on a GPU machine (docs/gpu.md, "Proof on a GPU machine").
#
# Needs only what such a machine has (NVIDIA driver, Python with torch and transformers; no Go,
# no internet) and the folder `make gpu-proof-bundle` builds:
#   rlhost.gz              the CLI built with -tags cuda, stripped, gzipped
#   proof.sh, proof_torch.py
#   tokenizer/             SmolLM2's tokenizer files (for the GRPO run)
#   plugins/*.gz, arith-raw/  the arith task plugin (gzipped) and its raw prompts (for the GRPO run)
#
# Usage: ./proof.sh [OUT_DIR]    (default ./proof-out; the table is also written to OUT_DIR/table.md)
# Steps: rlhost selftest --device cuda; random Qwen2.5-0.5B- and SmolLM2-135M-shaped checkpoints
# written by transformers; a training step and a decode step of rlhost (for each precision of
# PROOF_DTYPES, default "bfloat16 float32") beside PyTorch eager,
# torch.compile (where it works) and HF generate, same GPU, shapes and batch; a 3-step GRPO
# `rlhost train` on the arith task (actor_rollout_ref.actor.dtype's default, bfloat16); the paths
# the products took (dtype, cublasGemmEx or cublasSgemm); one table of tokens/s, MFU, peak device memory, host<->device
# bytes per step and the ratio to PyTorch.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$(mkdir -p "${1:-proof-out}" && cd "${1:-proof-out}" && pwd)
py=${PYTHON:-python3}
# unpack the gzipped binaries of the bundle into the output directory
unpack() { "$py" -c 'import gzip, shutil, sys; shutil.copyfileobj(gzip.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$1" "$2" && chmod +x "$2"; }
mkdir -p "$out/bin/plugins"
[ -f "$here/rlhost.gz" ] && unpack "$here/rlhost.gz" "$out/bin/rlhost"
[ -f "$here/plugins/rlhost-task-arith.gz" ] && unpack "$here/plugins/rlhost-task-arith.gz" "$out/bin/plugins/rlhost-task-arith"
rlhost=${RLHOST:-$out/bin/rlhost}
B=${PROOF_BATCH:-4} T=${PROOF_SEQ:-256} NEW=${PROOF_NEW_TOKENS:-64}
# precisions of rlhost's products to time (actor_rollout_ref.actor.dtype; bfloat16 is the default)
DTYPES=${PROOF_DTYPES:-bfloat16 float32}
fail=0
step() { echo; echo "== $*"; }

step "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader || fail=1
"$py" -c 'import torch, transformers; print("torch", torch.__version__, "cuda", torch.version.cuda, "transformers", transformers.__version__)' || fail=1

step "rlhost selftest --device cuda (every kernel, cuBLAS, a training step and generation vs the CPU backend)"
"$rlhost" selftest --device cuda 2>&1 | tee "$out/selftest.txt"
[ "${PIPESTATUS[0]}" = 0 ] || fail=1

results=()
for shape in smollm2-135m qwen2.5-0.5b; do
	step "$shape: random checkpoint, rlhost vs PyTorch (B=$B T=$T, decode $NEW tokens after a $((T / 2))-token prompt)"
	ck="$out/ck-$shape"
	[ -s "$ck/model.safetensors" ] || "$py" "$here/proof_torch.py" make "$ck" "$shape" || { fail=1; continue; }
	res="$out/$shape.jsonl"
	: >"$res"
	for dt in $DTYPES; do
		"$rlhost" selftest --device cuda --bench "$ck" --dtype "$dt" --batch "$B" --seq "$T" --new-tokens "$NEW" | tee -a "$res"
		[ "${PIPESTATUS[0]}" = 0 ] || fail=1
	done
	"$py" "$here/proof_torch.py" bench "$ck" "$B" "$T" "$NEW" | tee -a "$res"
	[ "${PIPESTATUS[0]}" = 0 ] || fail=1
	results+=("$res")
done

step "3-step GRPO: rlhost train on the arith task, SmolLM2-135M shape (random weights), trainer.device=cuda"
if [ -x "$out/bin/plugins/rlhost-task-arith" ] && [ -s "$here/tokenizer/tokenizer.json" ] && [ -s "$out/ck-smollm2-135m/model.safetensors" ]; then
	cp "$here"/tokenizer/* "$out/ck-smollm2-135m/"
	export RLHOST_PLUGIN_PATH="$out/bin/plugins"
	(cd "$out" && rm -rf data/arith runs/proof-arith &&
		"$rlhost" preprocess --task arith --input "$here/arith-raw" --output-dir data/arith &&
		"$rlhost" train -c "$here/arith.yaml" \
			actor_rollout_ref.model.path="$out/ck-smollm2-135m" trainer.device=cuda \
			trainer.total_training_steps=3 trainer.val_before_train=false \
			trainer.run_dir=runs/proof-arith trainer.experiment_name=proof-arith) 2>&1 | tee "$out/train.txt"
	[ "${PIPESTATUS[0]}" = 0 ] || fail=1
else
	echo "skipped: the bundle has no arith plugin or tokenizer (make gpu-proof-bundle puts them there)"
	fail=1
fi

step "paths (how the products ran)"
grep -h '^products ' "$out/selftest.txt" 2>/dev/null
for r in "${results[@]}"; do
	"$py" -c 'import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r.get("products"):
        print(r["kind"], r["device"], "->", r["products"])' "$r"
done
grep -h '^products on ' "$out/train.txt" 2>/dev/null | sed 's/^/GRPO run: /'

step "table (also in $out/table.md)"
[ ${#results[@]} -gt 0 ] && "$py" "$here/proof_torch.py" table "$out/table.md" "${results[@]}"
echo
if [ "$fail" = 0 ]; then echo "proof: every step passed"; else echo "proof: some steps FAILED (see above)"; fi
exit "$fail"
