#!/usr/bin/env python3
"""Decode speed at batch 1 on the default GGUF for each rlhost generation dtype (float32,
bfloat16, int8: `rlhost generate --dtype`) against llama.cpp (PyPI llama-cpp-python, computing on
the file's Q4_1 blocks), in the same run: each round runs every rlhost dtype and llama.cpp once,
so all of them see the same machine load. Prints a markdown table (median tokens/s over the
rounds, ratio to llama.cpp, leading greedy tokens equal to llama.cpp's) and `uptime` before and
after.

Usage (the llama-cpp-python virtualenv of mk/llamacpp.mk):
  ~/.cache/rlhost/llamacpp-venv/bin/python scripts/bench/lowp_decode.py \
      --model models/SmolLM2-135M-Instruct.Q4_1.gguf --rlhost bin/rlhost

Both sides: the same ChatML prompt, greedy, exactly --tokens new tokens (EOS ignored), 2 threads,
model load excluded; the figure is new tokens / wall time of prefill + decode.
"""
import argparse
import json
import statistics
import subprocess
import time

import llama_cpp

USER = ("Natalia sold clips to 48 of her friends in April, and then she sold half as many clips to "
        "her friends in May. How many clips did Natalia sell altogether in April and May?")
CHATML = ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
          f"<|im_start|>user\n{USER}<|im_end|>\n<|im_start|>assistant\n")
DTYPES = ["float32", "bfloat16", "int8"]


def llama_run(llm, prompt, n):
    llm.reset()
    t0 = time.perf_counter()
    toks = []
    for tok in llm.generate(prompt, temp=0.0, top_k=1, reset=True):
        toks.append(tok)
        if len(toks) == n:
            break
    return n / (time.perf_counter() - t0), toks


def rlhost_run(binary, model, n, dtype):
    out = subprocess.run([binary, "generate", "--model", model, "--chat", "--prompt", USER, "--max-tokens", str(n),
                          "--ignore-eos", "--timing", "--dtype", dtype], check=True, capture_output=True, text=True).stdout
    r = json.loads(out)
    return r["timing"]["tokens_per_s"], r["token_ids"]


def same_prefix(a, b):
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--rlhost", required=True)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--llama-threads", default="1",
                    help="comma-separated llama.cpp thread counts (1: see the note on spinning below)")
    a = ap.parse_args()
    up0 = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    # ggml's threads spin at every barrier, which collapses when the machine runs more threads than
    # it has cores (2 threads on a loaded 2-core machine: < 1 token/s), so 1 thread is the default.
    threads = [int(x) for x in a.llama_threads.split(",")]
    llms = {th: llama_cpp.Llama(model_path=a.model, n_ctx=1024, n_threads=th, n_threads_batch=th, seed=0,
                                verbose=False) for th in threads}
    prompt = llms[threads[0]].tokenize(CHATML.encode(), add_bos=False, special=True)
    engines = DTYPES + [f"llama.cpp-{th}" for th in threads]
    tps = {d: [] for d in engines}
    toks = {}
    for _ in range(a.rounds):
        for d in DTYPES:
            t, ids = rlhost_run(a.rlhost, a.model, a.tokens, d)
            tps[d].append(t)
            toks[d] = ids
        for th in threads:
            t, ltoks = llama_run(llms[th], prompt, a.tokens)
            tps[f"llama.cpp-{th}"].append(t)
            toks[f"llama.cpp-{th}"] = ltoks
    up1 = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    ref = max(statistics.median(tps[f"llama.cpp-{th}"]) for th in threads)
    lref = f"llama.cpp-{threads[0]}"
    print(f"uptime before: {up0}\nuptime after:  {up1}\n")
    print(f"batch 1, {a.tokens} new tokens, {a.rounds} rounds, median tokens/s (all rounds)\n")
    print("| engine | tokens/s | rounds | vs llama.cpp (fastest thread count) | leading tokens equal to llama.cpp's |")
    print("|---|---|---|---|---|")
    for d in engines:
        name = f"llama.cpp Q4_1, {d.split('-')[1]} thread(s)" if d.startswith("llama") else f"rlhost {d}"
        m = statistics.median(tps[d])
        rounds = " / ".join(f"{x:.1f}" for x in tps[d])
        print(f"| {name} | {m:.1f} | {rounds} | {m / ref:.2f}x | {same_prefix(toks[d], toks[lref])}/{a.tokens} |")
    for d in DTYPES[1:]:
        print(f"\nrlhost {d} vs float32: leading greedy tokens equal {same_prefix(toks[d], toks['float32'])}/{a.tokens}")


if __name__ == "__main__":
    main()
