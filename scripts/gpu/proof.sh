#!/usr/bin/env bash
# One-command proof of the CUDA backend on a GPU machine (docs/gpu.md, "Proof on a GPU machine").
#
# Needs only what such a machine has (NVIDIA driver, Python with torch and transformers; no Go,
# no internet) and the folder `make gpu-proof-bundle` builds:
#   rlhost.gz              the CLI built with -tags cuda, stripped, gzipped
#   proof.sh, proof_torch.py, COMMIT (the commit it was built from)
#   tokenizer/             SmolLM2's tokenizer files (for the GRPO run, on any shape)
#   plugins/*.gz, arith-raw/  the arith task plugin (gzipped) and its raw prompts (for the GRPO run)
#
# Usage: ./proof.sh [OUT_DIR]    (default ./proof-out; the table is also written to OUT_DIR/table.md,
# the paths and the device-time profile to OUT_DIR/paths.txt, the machine to OUT_DIR/machine.txt:
# `make bench-cuda-record FROM=OUT_DIR` records them in docs/bench/cuda.md and its history)
# Steps: rlhost selftest --device cuda; a random checkpoint of PROOF_MODEL's shape (default the
# goal's Qwen2.5-0.5B; qwen3-0.6b, llama3.2-1b and gemma3-1b are the families of issue 38 at their
# released sizes, smollm2-135m the small one; PROOF_SHAPES lists several) written by transformers; `rlhost selftest --bench` (for each precision of
# PROOF_DTYPES, default bfloat16): a training step of PROOF_BATCH x PROOF_SEQ (8 x 1024, packed:
# fused attention), greedy decodes of PROOF_NEW_TOKENS (512) after PROOF_PROMPT (128) tokens at
# batch PROOF_DECODE_BATCH (64) and at batch 1, a GRPO-like decode (groups of 8 samples of a
# prompt, sampled on the device, prefix shared); beside them PyTorch eager (bf16 autocast, SDPA),
# torch.compile (PROOF_COMPILE=0 skips it) and HF generate (bf16), same GPU, shapes and batch;
# a 3-step GRPO `rlhost train` on the arith task (PROOF_GRPO_SHAPE, default qwen2.5-0.5b;
# PROOF_GRPO_SIZE="PROMPTS N TOKENS", default "32 8 256", per step; with
# SmolLM2's tokenizer, the bundle's: the model's vocabulary covers its ids, as Qwen2.5's own
# checkpoints pad theirs; bfloat16 products, packed micro-batches); the paths every step took; one table of
# tokens/s, latency, MFU, peak device memory, host<->device bytes and syncs per step, the host's
# share of the wall time, the ratio to PyTorch, and the goals of issue 20, met or not (on the default
# kernels); PROOF_DEV (default 1; 0 skips it) builds dev/cuda's benchmarks with the machine's
# nvcc and runs each: a kernel variant waiting for a proof against its default kernel, the same
# inputs, outputs compared, both timed with CUDA events (dev-cuda.txt; docs/gpu.md).
# PROOF_TORCH=0 skips the PyTorch peers.
# PROOF_GRPO_AB=1 (the default; 0 skips it) runs the GRPO run three times more: with
# RLHOST_CUDA_PINNED=0 (uploads from pageable memory, as before the page-locked buffer), with
# RLHOST_CUDA_QUEUE_DEPTH=0 (no bound on the ops queued ahead of the stream, as before it) and with
# RLHOST_CUDA_OVERLAP=0 (each decode step's samples read before the next step is queued, as before
# overlap scheduling).
# PROOF_STEP_TIMEOUT=S stops any heavy step after S seconds (reported as failed; the others run).
# PROOF_PROFILE=1 (the default; 0 turns it off) adds --profile to the rlhost bench: after its timed
# lines, one more training step and decodes run with the device's profiling on, and the "paths"
# step prints where their device time went (top 10 ops per phase).
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
# the goals' shapes (issue 20): training B x T, decode batch DB of NEW tokens after P
B=${PROOF_BATCH:-8} T=${PROOF_SEQ:-1024} DB=${PROOF_DECODE_BATCH:-64} P=${PROOF_PROMPT:-128} NEW=${PROOF_NEW_TOKENS:-512}
# the shape of the training-step and decode comparisons, random weights on both sides
# (proof_torch.py's SHAPES): PROOF_MODEL, one of MODELS: the goal's Qwen2.5-0.5B, SmolLM2-135M, or
# a family of issue 38 at its released size, Qwen3-0.6B (QK-norm, heads of 128), Llama-3.2-1B
# (llama3 RoPE) or Gemma-3-1B (sliding-window layers of 512 positions, heads of 256, GeGLU);
# PROOF_SHAPES, several of them space-separated, overrides it
MODELS="qwen2.5-0.5b smollm2-135m qwen3-0.6b llama3.2-1b gemma3-1b"
SHAPES=${PROOF_SHAPES:-${PROOF_MODEL:-qwen2.5-0.5b}}
# the GRPO run's checkpoint shape (default the goal's; smollm2-135m is the small one)
GRPO_SHAPE=${PROOF_GRPO_SHAPE:-qwen2.5-0.5b}
for s in $SHAPES $GRPO_SHAPE; do
	case " $MODELS " in
	*" $s "*) ;;
	*) echo "proof: unknown shape \"$s\" (PROOF_MODEL, PROOF_SHAPES, PROOF_GRPO_SHAPE): want one of $MODELS" >&2; exit 2 ;;
	esac
done
# the GRPO run's size: prompts per step, samples per prompt (rollout.n), most new tokens per
# response. A random model rarely stops early, so each step decodes about PROMPTS x N x TOKENS
# tokens: sized so that the device, not the host, should hold most of a step (the host-share goal
# means little on tiny steps); "4 4 32" is the small run of earlier proofs
read -r GRPO_PROMPTS GRPO_N GRPO_TOKENS <<<"${PROOF_GRPO_SIZE:-32 8 256}"
# precisions of rlhost's products to time (actor_rollout_ref.actor.dtype; bfloat16 is the
# default; "bfloat16 float32" adds rlhost's and PyTorch's fp32 steps)
DTYPES=${PROOF_DTYPES:-bfloat16}
# seconds each heavy step may run (0: no limit); a step that runs over is stopped, reported as
# failed (exit 124), and the later steps still run, so one hung step costs one step's time
STEP_LIMIT=${PROOF_STEP_TIMEOUT:-0}
# dev/cuda's benchmarks (the bundle's dev-cuda/, built with nvcc): 1 runs them, 0 skips them
DEV=${PROOF_DEV:-1}
# PROOF_TORCH=0 skips the PyTorch peers (eager, torch.compile, HF generate) where the device
# time is scarce; the goals that compare with PyTorch then read "not measured"
TORCH=${PROOF_TORCH:-1}
# --profile: per-op device time of one more (untimed) step of each phase
profile=()
[ "${PROOF_PROFILE:-1}" = 1 ] && profile=(--profile)
lim() { timeout --kill-after=10 "$STEP_LIMIT" "$@"; }
fail=0
step() { echo; echo "== $*"; }

step "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader || fail=1
sw=$("$py" -c 'import torch, transformers; print("torch", torch.__version__, "cuda", torch.version.cuda, "transformers", transformers.__version__)') || fail=1
echo "$sw"
# what make bench-cuda-record puts above the table
{
	echo "date $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "gpu $(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)"
	echo "driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -n 1)"
	echo "commit $(cat "$here/COMMIT" 2>/dev/null || echo unknown)"
	echo "software $sw"
	echo "shapes $SHAPES: train B=$B T=$T; decode batch $DB and 1, prompt $P, $NEW new tokens; products $DTYPES; GRPO run $GRPO_SHAPE ($GRPO_PROMPTS prompts x $GRPO_N samples, up to $GRPO_TOKENS new tokens); dev/cuda benchmarks $([ "$DEV" = 1 ] && echo on || echo off)$([ "$TORCH" = 1 ] || echo "; PyTorch peers skipped (PROOF_TORCH=0)")"
} >"$out/machine.txt"

step "rlhost selftest --device cuda (every kernel, cuBLAS, a training step and generation vs the CPU backend)"
lim "$rlhost" selftest --device cuda 2>&1 | tee "$out/selftest.txt"
[ "${PIPESTATUS[0]}" = 0 ] || fail=1
if [ "$DEV" = 1 ]; then
	step "dev/cuda: each kernel variant waiting for a proof against its default (nvcc, CUDA events)"
	if ! command -v nvcc >/dev/null; then
		echo "no nvcc on PATH: dev/cuda's benchmarks not built"
		fail=1
	else
		arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d .)
		: >"$out/dev-cuda.txt"
		# built side by side (each takes about half a minute on one core), then run one at a time
		for src in "$here"/dev-cuda/dev/cuda/*.cu; do
			[ -e "$src" ] || continue
			name=$(basename "$src" .cu)
			{ lim nvcc -O3 -std=c++17 -arch="sm_$arch" -o "$out/dev-$name" "$src" >"$out/dev-$name.nvcc" 2>&1 ||
				rm -f "$out/dev-$name"; } &
		done
		wait
		for src in "$here"/dev-cuda/dev/cuda/*.cu; do
			[ -e "$src" ] || continue
			name=$(basename "$src" .cu)
			if [ -x "$out/dev-$name" ]; then
				lim "$out/dev-$name" 2>&1 | tee -a "$out/dev-cuda.txt"
				[ "${PIPESTATUS[0]}" = 0 ] || fail=1
			else
				cat "$out/dev-$name.nvcc"
				echo "dev/cuda/$name.cu: nvcc failed" | tee -a "$out/dev-cuda.txt"
				fail=1
			fi
		done
	fi
fi

results=()
for shape in $SHAPES; do
	step "$shape: random checkpoint, rlhost vs PyTorch (train B=$B T=$T; decode $NEW tokens after $P at batch $DB and 1)"
	ck="$out/ck-$shape"
	[ -s "$ck/model.safetensors" ] || "$py" "$here/proof_torch.py" make "$ck" "$shape" || { fail=1; continue; }
	res="$out/$shape.jsonl"
	: >"$res"
	for dt in $DTYPES; do
		lim "$rlhost" selftest --device cuda --bench "$ck" --dtype "$dt" --batch "$B" --seq "$T" \
			--decode-batch "$DB" --prompt "$P" --new-tokens "$NEW" "${profile[@]}" | tee -a "$res"
		[ "${PIPESTATUS[0]}" = 0 ] || fail=1
	done
	if [ "$TORCH" = 1 ]; then
		lim "$py" "$here/proof_torch.py" bench "$ck" "$B" "$T" "$DB" "$P" "$NEW" $DTYPES | tee -a "$res"
		[ "${PIPESTATUS[0]}" = 0 ] || fail=1
	else
		echo "PyTorch and HF generate skipped (PROOF_TORCH=0): the goals measured against them read \"not measured\""
	fi
	results+=("$res")
done

step "3-step GRPO: rlhost train on the arith task, $GRPO_SHAPE shape, $GRPO_PROMPTS prompts x $GRPO_N samples, up to $GRPO_TOKENS new tokens (random weights; SmolLM2's tokenizer, whose ids the model's vocabulary covers), trainer.device=cuda, packed micro-batches"
grpo_metrics="$out/runs/proof-arith/metrics.jsonl"
gck="$out/ck-grpo-$GRPO_SHAPE"
if [ -x "$out/bin/plugins/rlhost-task-arith" ] && [ -s "$here/tokenizer/tokenizer.json" ]; then
	# the checkpoint carries the tokenizer files and their bos/eos/pad ids (proof_torch.py make)
	{ [ -s "$gck/model.safetensors" ] && [ -s "$gck/tokenizer.json" ]; } ||
		"$py" "$here/proof_torch.py" make "$gck" "$GRPO_SHAPE" "$here/tokenizer" || fail=1
	export RLHOST_PLUGIN_PATH="$out/bin/plugins"
	grpo_run() { # name: runs/NAME
		lim "$rlhost" train -c "$here/arith.yaml" \
			actor_rollout_ref.model.path="$gck" trainer.device=cuda \
			actor_rollout_ref.actor.use_dynamic_bsz=true \
			data.train_batch_size="$GRPO_PROMPTS" actor_rollout_ref.actor.ppo_mini_batch_size="$GRPO_PROMPTS" \
			actor_rollout_ref.rollout.n="$GRPO_N" data.max_response_length="$GRPO_TOKENS" \
			actor_rollout_ref.rollout.max_num_seqs=$((GRPO_PROMPTS * GRPO_N)) \
			trainer.total_training_steps=3 trainer.val_before_train=false \
			trainer.run_dir="runs/$1" trainer.experiment_name="$1"
	}
	(cd "$out" && rm -rf data/arith runs/proof-arith runs/proof-arith-pageable runs/proof-arith-unbounded runs/proof-arith-serial &&
		"$rlhost" preprocess --task arith --input "$here/arith-raw" --output-dir data/arith &&
		grpo_run proof-arith) 2>&1 | tee "$out/train.txt"
	[ "${PIPESTATUS[0]}" = 0 ] || fail=1
	# the same run with its uploads from pageable memory, as before the page-locked buffer
	# (docs/gpu.md, "Uploads through page-locked memory"); PROOF_GRPO_AB=0 skips it
	if [ "${PROOF_GRPO_AB:-1}" = 1 ]; then
		(cd "$out" && export RLHOST_CUDA_PINNED=0 && grpo_run proof-arith-pageable) > "$out/train-pageable.txt" 2>&1 ||
			{ tail -5 "$out/train-pageable.txt"; fail=1; }
		# and without the bound on the queue (docs/gpu.md, "A bounded queue")
		(cd "$out" && export RLHOST_CUDA_QUEUE_DEPTH=0 && grpo_run proof-arith-unbounded) > "$out/train-unbounded.txt" 2>&1 ||
			{ tail -5 "$out/train-unbounded.txt"; fail=1; }
		# and without overlap scheduling (docs/gpu.md, "Overlapping the host's work with the device's")
		(cd "$out" && export RLHOST_CUDA_OVERLAP=0 && grpo_run proof-arith-serial) > "$out/train-serial.txt" 2>&1 ||
			{ tail -5 "$out/train-serial.txt"; fail=1; }
	fi
else
	echo "skipped: the bundle has no arith plugin or tokenizer (make gpu-proof-bundle puts them there)"
	fail=1
fi

step "paths (issue 20: products, fused attention, device sampling, prefix sharing, host time; where the device time goes)"
grep -h '^products ' "$out/selftest.txt" 2>/dev/null
grep -h '^products on ' "$out/train.txt" 2>/dev/null | sed 's/^/GRPO run: /'
grpo_arg=()
[ -s "$grpo_metrics" ] && grpo_arg=(--grpo "$grpo_metrics" --grpo-shape "$GRPO_SHAPE")
"$py" "$here/proof_torch.py" paths "${grpo_arg[@]}" "${results[@]}" | tee "$out/paths.txt"
[ "${PIPESTATUS[0]}" = 0 ] || fail=1
if [ -s "$out/runs/proof-arith-pageable/metrics.jsonl" ]; then
	echo "The same GRPO run with RLHOST_CUDA_PINNED=0 (uploads from pageable memory), same call:" | tee -a "$out/paths.txt"
	"$py" "$here/proof_torch.py" paths --grpo "$out/runs/proof-arith-pageable/metrics.jsonl" | sed 's/^GRPO /GRPO pageable /' | tee -a "$out/paths.txt"
fi
if [ -s "$out/runs/proof-arith-unbounded/metrics.jsonl" ]; then
	echo "The same GRPO run with RLHOST_CUDA_QUEUE_DEPTH=0 (no bound on the queue), same call:" | tee -a "$out/paths.txt"
	"$py" "$here/proof_torch.py" paths --grpo "$out/runs/proof-arith-unbounded/metrics.jsonl" | sed 's/^GRPO /GRPO unbounded /' | tee -a "$out/paths.txt"
fi
if [ -s "$out/runs/proof-arith-serial/metrics.jsonl" ]; then
	echo "The same GRPO run with RLHOST_CUDA_OVERLAP=0 (no overlap scheduling), same call:" | tee -a "$out/paths.txt"
	"$py" "$here/proof_torch.py" paths --grpo "$out/runs/proof-arith-serial/metrics.jsonl" | sed 's/^GRPO /GRPO serial /' | tee -a "$out/paths.txt"
fi

step "table (also in $out/table.md)"
[ ${#results[@]} -gt 0 ] && "$py" "$here/proof_torch.py" table "$out/table.md" "${grpo_arg[@]}" "${results[@]}"
echo
if [ "$fail" = 0 ]; then echo "proof: every step passed"; else echo "proof: some steps FAILED (see above)"; fi
exit "$fail"
