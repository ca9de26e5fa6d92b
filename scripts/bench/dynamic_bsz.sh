#!/bin/sh
# Padding in the actor update of the demo config (at 2 prompts x 8 rollouts per step, the
# demo's earlier batch: 16 trajectories per update), with fixed micro-batches and with
# use_dynamic_bsz, in one command: the same seed gives both runs the same rollouts, so their
# updates see the same trajectories. Prints, per run and step, the update's padding fraction
# (perf/update_padding_frac), its micro-batches and its time, then the means.
#
#   scripts/bench/dynamic_bsz.sh [STEPS] [BUDGET]      (defaults: 3 steps, budget 1536 tokens)
#
# BUDGET is actor_rollout_ref.actor.ppo_max_token_len_per_gpu; 1536 = the fixed run's
# ppo_micro_batch_size_per_gpu (2) x (max_prompt_length 512 + max_response_length 256), the
# most the fixed micro-batches can hold, so both bound the activation memory alike.
# Needs bin/rlhost, the default model and data/gsm8k (make build model; rlhost preprocess).
set -e
steps=${1:-3}
budget=${2:-1536}
out=${TMPDIR:-/tmp}/rlhost-dynbsz.$$
mkdir -p "$out"
trap 'rm -rf "$out"' EXIT
for mode in fixed dynamic; do
	extra=""
	[ $mode = dynamic ] && extra="actor_rollout_ref.actor.use_dynamic_bsz=true actor_rollout_ref.actor.ppo_max_token_len_per_gpu=$budget"
	bin/rlhost train --task gsm8k -c examples/configs/gsm8k-demo.yaml trainer.run_dir="$out/$mode" \
		data.train_batch_size=2 actor_rollout_ref.actor.ppo_mini_batch_size=2 \
		trainer.total_training_steps="$steps" trainer.val_before_train=false trainer.test_freq=-1 trainer.save_freq=-1 \
		trainer.logger=jsonl $extra 2>"$out/$mode.log" || { tail -20 "$out/$mode.log"; exit 1; }
done
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
rows = {}
for mode in ("fixed", "dynamic"):
    for line in open(f"{out}/{mode}/metrics.jsonl"):
        r = json.loads(line)
        d = r["data"]
        rows.setdefault(mode, []).append((r["step"], d.get("perf/update_padding_frac"), d.get("actor/micro_batches"),
                                          d.get("timing_s/update_actor"), d.get("response_length/mean")))
print("| run | step | padding fraction | micro-batches per mini-batch | update time (s) | mean response tokens |")
print("|---|---|---|---|---|---|")
for mode, rs in rows.items():
    for s, p, m, t, r in rs:
        print(f"| {mode} | {s} | {p:.3f} | {m:.1f} | {t:.2f} | {r:.1f} |")
for mode, rs in rows.items():
    n = len(rs)
    print(f"{mode}: mean padding fraction {sum(r[1] for r in rs)/n:.3f}, mean update time {sum(r[3] for r in rs)/n:.2f} s")
PY
