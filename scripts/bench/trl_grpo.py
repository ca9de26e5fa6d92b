"""One GRPO configuration timed with rlhost and with TRL's GRPOTrainer, in the same run.

Both sides train the same model (the default GGUF, dequantised to fp32) on the same prompts
(the first --prompts rows of GSM8K train, single turn: the user question only), with the same
batch (--prompts prompts x --n responses, one optimiser step per step over all of them), the
same response budget, sampling (temperature 1, no top-p/top-k), optimiser (AdamW, constant lr,
weight decay 0.01, grad clip 1.0), loss (clipped PPO, token-mean = TRL's "dapo", GRPO advantages
scaled by the group std, no KL, no reference model, one PPO epoch so no old-log-prob pass) and
reward (veRL's strict GSM8K score: 1 when "#### <answer>" equals the ground truth, else 0).

rlhost's per-step breakdown comes from its metrics.jsonl (timing_s/*, perf/throughput);
TRL's from wrapping GRPOTrainer's methods (generation, reward, the rest is the update).
The first step of each side is a warm-up and is not counted in the mean.

    ~/.cache/rlhost/trl-venv/bin/python scripts/bench/trl_grpo.py --rlhost bin/rlhost

Needs torch, transformers, gguf, pyarrow and trl (make setup-trl).
"""

import argparse
import copy
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

import pyarrow as pa
import pyarrow.parquet as pq


def make_dataset(src, dst, prompts):
    """The first `prompts` rows of the GSM8K parquet, single turn, the user message only."""
    t = pq.read_table(src).slice(0, prompts)
    rows = t.to_pylist()
    for r in rows:
        r["agent_name"] = "single_turn_agent"
        r["prompt"] = [m for m in r["prompt"] if m["role"] == "user"]
    pq.write_table(pa.Table.from_pylist(rows, schema=t.schema), dst)
    return rows


# veRL's verl/utils/reward_score/gsm8k.py, method="strict", format_score=0, score=1
# (the same scoring tasks/gsm8k implements and tests against goldens from it).
_STRICT = re.compile(r"#### (\-?[0-9\.\,]+)")


def gsm8k_strict(solution, ground_truth):
    if len(solution) > 300:
        solution = solution[-300:]
    m = _STRICT.findall(solution)
    if not m:
        return 0.0
    answer = m[-1].replace(",", "").replace("$", "")
    return 1.0 if answer == ground_truth else 0.0


def run_rlhost(a, data, work):
    run_dir = os.path.join(work, "rlhost")
    shutil.rmtree(run_dir, ignore_errors=True)
    cmd = [a.rlhost, "train", "--task", "gsm8k",
           f"actor_rollout_ref.model.path={a.model}",
           f"data.train_files={data}", f"data.val_files={data}",
           f"data.train_batch_size={a.prompts}",
           f"data.max_response_length={a.response_length}",
           f"actor_rollout_ref.rollout.n={a.n}",
           f"actor_rollout_ref.rollout.max_num_seqs={a.prompts * a.n}",
           "actor_rollout_ref.rollout.temperature=1.0",
           f"actor_rollout_ref.actor.ppo_mini_batch_size={a.prompts}",
           f"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu={a.prompts * a.n}",
           f"actor_rollout_ref.actor.optim.lr={a.lr}",
           f"trainer.total_training_steps={a.steps}",
           "trainer.val_before_train=false", "trainer.test_freq=-1", "trainer.save_freq=-1",
           "trainer.resume_mode=disable", "trainer.logger=[console,jsonl]",
           f"trainer.run_dir={run_dir}"] + a.rlhost_set
    print("rlhost:", " ".join(cmd), flush=True)
    t0 = time.time()
    subprocess.run(cmd, check=True)
    wall = time.time() - t0
    steps = []
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        for line in f:
            d = json.loads(line)
            if "timing_s/step" in d["data"]:
                steps.append(d["data"])
    return steps, wall


class Phases:
    """Wall time of wrapped GRPOTrainer methods, per training step."""

    def __init__(self):
        self.cur = {}
        self.steps = []

    def wrap(self, obj, name, key):
        fn = getattr(obj, name)

        def timed(*args, **kw):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kw)
            finally:
                self.cur[key] = self.cur.get(key, 0.0) + time.perf_counter() - t0

        setattr(obj, name, timed)


def run_trl(a, rows, work):
    import torch
    import transformers
    import trl
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback

    torch.manual_seed(1)
    # transformers dequantises the GGUF to fp32 but marks the model quantized, which the
    # Trainer refuses to fine-tune; so the fp32 weights are saved once and loaded from there.
    fp32 = os.path.join(work, "model-fp32")
    if not os.path.exists(os.path.join(fp32, "config.json")):
        d, name = os.path.split(os.path.abspath(a.model))
        tok = AutoTokenizer.from_pretrained(d, gguf_file=name)
        q = AutoModelForCausalLM.from_pretrained(d, gguf_file=name, dtype=torch.float32)
        # save_pretrained refuses a model marked as gguf-quantized: copy the dequantised
        # weights into a plain model of the same config.
        c = copy.deepcopy(q.config)
        if hasattr(c, "quantization_config"):
            del c.quantization_config
        m = AutoModelForCausalLM.from_config(c, dtype=torch.float32)
        m.load_state_dict(q.state_dict())
        del q
        m.save_pretrained(fp32 + ".tmp")
        tok.save_pretrained(fp32 + ".tmp")
        cfg_path = os.path.join(fp32 + ".tmp", "config.json")
        with open(cfg_path) as f:
            c = json.load(f)
        c.pop("quantization_config", None)  # the weights written are plain fp32
        with open(cfg_path, "w") as f:
            json.dump(c, f, indent=2)
        os.rename(fp32 + ".tmp", fp32)
        del m
    tok = AutoTokenizer.from_pretrained(fp32)
    model = AutoModelForCausalLM.from_pretrained(fp32, dtype=torch.float32)
    truth = {r["prompt"][0]["content"]: r["reward_model"]["ground_truth"] for r in rows}
    ds = Dataset.from_list([{"prompt": r["prompt"], "ground_truth": r["reward_model"]["ground_truth"]}
                            for r in rows])

    def reward(completions, ground_truth, **_):
        return [gsm8k_strict(c[0]["content"] if isinstance(c, list) else c, g)
                for c, g in zip(completions, ground_truth)]

    cfg = trl.GRPOConfig(
        output_dir=os.path.join(work, "trl"), use_cpu=True, bf16=False, fp16=False,
        per_device_train_batch_size=a.prompts * a.n, gradient_accumulation_steps=1,
        num_generations=a.n, max_completion_length=a.response_length,
        temperature=1.0, top_p=1.0, top_k=0,
        learning_rate=a.lr, lr_scheduler_type="constant", warmup_steps=0, weight_decay=0.01,
        adam_beta1=0.9, adam_beta2=0.999, max_grad_norm=1.0,
        beta=0.0, num_iterations=1, epsilon=0.2, loss_type="dapo", scale_rewards="group",
        max_steps=a.steps, logging_steps=1, save_strategy="no", report_to=[], seed=1,
        dataloader_num_workers=0, disable_tqdm=True)
    ph = Phases()
    tr = trl.GRPOTrainer(model=model, processing_class=tok, reward_funcs=reward, args=cfg,
                         train_dataset=ds)
    ph.wrap(tr, "_generate", "gen")
    ph.wrap(tr, "_calculate_rewards", "reward")
    ph.wrap(tr, "_generate_and_score_completions", "gen_and_score")

    class Clock(TrainerCallback):
        def on_step_begin(self, *args, **kw):
            ph.cur = {"t0": time.perf_counter()}

        def on_step_end(self, *args, **kw):
            ph.cur["step"] = time.perf_counter() - ph.cur.pop("t0")
            ph.steps.append(ph.cur)

    logs = []

    class Log(TrainerCallback):
        def on_log(self, args, state, control, logs_=None, **kw):
            if kw.get("logs"):
                logs.append(kw["logs"])

    tr.add_callback(Clock())
    tr.add_callback(Log())
    print(f"trl {trl.__version__}, transformers {transformers.__version__}, torch {torch.__version__}, "
          f"threads {torch.get_num_threads()}", flush=True)
    t0 = time.time()
    tr.train()
    wall = time.time() - t0
    for s, lg in zip(ph.steps, [l for l in logs if "reward" in l]):
        s["completion_len"] = lg.get("completions/mean_length", float("nan"))
        s["reward_mean"] = lg.get("reward", float("nan"))
    return ph.steps, wall


def mean(xs):
    xs = [x for x in xs if x == x]
    return statistics.fmean(xs) if xs else float("nan")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rlhost", default="bin/rlhost")
    p.add_argument("--model", default="models/SmolLM2-135M-Instruct.Q4_1.gguf")
    p.add_argument("--gsm8k", default="data/gsm8k/train.parquet", help="rlhost preprocess --task gsm8k output")
    p.add_argument("--work", default=os.path.expanduser("~/.cache/rlhost/trl-bench"))
    p.add_argument("--prompts", type=int, default=4)
    p.add_argument("--n", type=int, default=4)
    p.add_argument("--response-length", type=int, default=128)
    p.add_argument("--lr", type=float, default=1e-6)
    p.add_argument("--steps", type=int, default=3, help="training steps per side; the first is a warm-up")
    p.add_argument("--skip", choices=["rlhost", "trl"], help="run one side only")
    p.add_argument("--rlhost-set", action="append", default=[], metavar="KEY=VALUE",
                   help="an extra rlhost config override (repeatable), e.g. actor_rollout_ref.rollout.dtype=bfloat16")
    a = p.parse_args()
    os.makedirs(a.work, exist_ok=True)
    data = os.path.join(a.work, "gsm8k-bench.parquet")
    rows = make_dataset(a.gsm8k, data, a.prompts)
    print(f"GRPO step: {a.prompts} prompts x n={a.n}, <= {a.response_length} response tokens, "
          f"{a.steps} steps per side (step 1 = warm-up)", flush=True)

    rl, tl = [], []
    if a.skip != "rlhost":
        rl, rl_wall = run_rlhost(a, data, a.work)
        print(f"\n== rlhost ({rl_wall:.1f} s wall, load, model and plugin start included)")
        print("step  gen_s  reward_s  old_logp_s  ref_s  update_s  step_s  resp_len  tok/s  trace_exported")
        for i, s in enumerate(rl, 1):
            print(f"{i:4d} {s.get('timing_s/gen', 0):6.2f} {s.get('timing_s/reward', 0):9.3f} "
                  f"{s.get('timing_s/old_log_prob', 0):11.2f} {s.get('timing_s/ref', 0):6.2f} "
                  f"{s.get('timing_s/update_actor', 0):9.2f} {s['timing_s/step']:7.2f} "
                  f"{s.get('response_length/mean', 0):9.1f} {s.get('perf/throughput', 0):6.1f} "
                  f"{s.get('tracing/exported', float('nan')):15.0f}")
    if a.skip != "trl":
        tl, tl_wall = run_trl(a, rows, a.work)
        print(f"\n== TRL GRPOTrainer ({tl_wall:.1f} s wall in train())")
        print("step  gen_s  reward_s  gen+score_s  update_s  step_s  resp_len  tok/s")
        for i, s in enumerate(tl, 1):
            upd = s["step"] - s.get("gen_and_score", 0)
            print(f"{i:4d} {s.get('gen', 0):6.2f} {s.get('reward', 0):9.3f} {s.get('gen_and_score', 0):12.2f} "
                  f"{upd:9.2f} {s['step']:7.2f} {s.get('completion_len', float('nan')):9.1f}")
    if rl and tl:
        r = [s["timing_s/step"] for s in rl[1:]] or [rl[0]["timing_s/step"]]
        t = [s["step"] for s in tl[1:]] or [tl[0]["step"]]
        rg = mean([s.get("timing_s/gen", float("nan")) for s in rl[1:]])
        tg = mean([s.get("gen", float("nan")) for s in tl[1:]])
        ru = mean([s.get("timing_s/update_actor", float("nan")) for s in rl[1:]])
        tu = mean([s["step"] - s.get("gen_and_score", 0) for s in tl[1:]])
        rlen = mean([s.get("response_length/mean", float("nan")) for s in rl[1:]])
        tlen = mean([s.get("completion_len", float("nan")) for s in tl[1:]])
        print(f"\n== mean over steps 2..{a.steps}")
        print(f"step time: rlhost {mean(r):.2f} s, TRL {mean(t):.2f} s, ratio rlhost/TRL {mean(r) / mean(t):.2f}")
        print(f"generation: rlhost {rg:.2f} s, TRL {tg:.2f} s, ratio {rg / tg:.2f}")
        print(f"update: rlhost {ru:.2f} s, TRL {tu:.2f} s, ratio {ru / tu:.2f}")
        print(f"mean response length: rlhost {rlen:.1f}, TRL {tlen:.1f} tokens")
    return 0


if __name__ == "__main__":
    sys.exit(main())
