#!/usr/bin/env bash
# Time per GRPO step of the two arith examples, back to back in one command: SmolLM2-135M-Instruct
# (examples/configs/arith.yaml: 4 prompts x n=4, 32 response tokens, full fine-tuning) and
# Gemma 3 270M (examples/configs/arith-gemma3.yaml: 4 prompts x n=8, 5 response tokens, LoRA),
# each for STEPS steps without validation or checkpoints; prints timing_s/step, timing_s/gen and
# timing_s/update_actor of every step after the first (the warm-up) and their means.
#
# Usage: scripts/bench/arith_families.sh [steps]   (from the repository root, after make build,
# model, model-gemma3 and both examples' data; make bench-arith-families does all of it)
set -euo pipefail
steps=${1:-4}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for c in arith arith-gemma3; do
	echo "## $c ($steps steps): load $(uptime | sed 's/.*load average: //')"
	bin/rlhost train -c "examples/configs/$c.yaml" trainer.total_training_steps="$steps" \
		trainer.val_before_train=false trainer.test_freq=-1 trainer.save_freq=-1 \
		trainer.run_dir="$tmp/$c" trainer.logger='[jsonl]' >"$tmp/$c.log" 2>&1 ||
		{ tail -20 "$tmp/$c.log"; exit 1; }
	python3 - "$tmp/$c/metrics.jsonl" <<'PY'
import json, sys
rows = [json.loads(l)["data"] for l in open(sys.argv[1])]
rows = [r for r in rows if "timing_s/step" in r][1:]
keys = ["timing_s/step", "timing_s/gen", "timing_s/update_actor"]
for i, r in enumerate(rows):
    print("step %d: " % (i + 2) + "  ".join("%s %.2f" % (k, r.get(k, float("nan"))) for k in keys))
print("mean of %d steps: " % len(rows) + "  ".join("%s %.2f" % (k, sum(r.get(k, 0) for r in rows) / max(len(rows), 1)) for k in keys))
PY
done
echo "load after: $(uptime | sed 's/.*load average: //')"
