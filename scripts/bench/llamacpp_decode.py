#!/usr/bin/env python3
"""Decode speed at batch 1 on the default GGUF: rlhost (`rlhost generate`, which dequantises the
Q4_1 weights to fp32) against llama.cpp (PyPI llama-cpp-python, which computes on the Q4_1 blocks),
in the same run, alternating the two so that both see the same machine load.

Usage (make bench-llamacpp):
  python scripts/bench/llamacpp_decode.py --model models/SmolLM2-135M-Instruct.Q4_1.gguf --rlhost bin/rlhost

Both sides: the same ChatML prompt, greedy, exactly --tokens new tokens (EOS ignored), 2 threads,
model load excluded; the figure is new tokens / wall time of prefill + decode.
"""
import argparse
import json
import os
import statistics
import subprocess
import time

import llama_cpp

USER = "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips to her friends in May. How many clips did Natalia sell altogether in April and May?"
CHATML = ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
          f"<|im_start|>user\n{USER}<|im_end|>\n<|im_start|>assistant\n")


def llama_run(llm, prompt, n):
    llm.reset()
    t0 = time.perf_counter()
    toks = []
    for tok in llm.generate(prompt, temp=0.0, top_k=1, reset=True):
        toks.append(tok)
        if len(toks) == n:
            break
    return n / (time.perf_counter() - t0), toks


def rlhost_run(binary, model, n):
    out = subprocess.run([binary, "generate", "--model", model, "--chat", "--prompt", USER, "--max-tokens", str(n),
                          "--ignore-eos", "--timing"], check=True, capture_output=True, text=True).stdout
    r = json.loads(out)
    return r["timing"]["tokens_per_s"], r["token_ids"], r["prompt_ids"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--rlhost", required=True)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    llm = llama_cpp.Llama(model_path=a.model, n_ctx=1024, n_threads=2, n_threads_batch=2, seed=0, verbose=False)
    prompt = llm.tokenize(CHATML.encode(), add_bos=False, special=True)
    ours, theirs = [], []
    same = None
    for _ in range(a.rounds):
        tps, ids, pids = rlhost_run(a.rlhost, a.model, a.tokens)
        ours.append(tps)
        ltps, ltoks = llama_run(llm, prompt, a.tokens)
        theirs.append(ltps)
        same = next((i for i, (x, y) in enumerate(zip(ids, ltoks)) if x != y), len(ids))
        if pids != prompt:
            print("note: the prompt token ids differ between rlhost and llama.cpp")
    o, l = statistics.median(ours), statistics.median(theirs)
    load = os.getloadavg()[0]
    print(f"\ndecode, batch 1, {len(prompt)}-token prompt + {a.tokens} new tokens, greedy, 2 threads (load average {load:.1f})")
    print("| | tokens/s (median of %d) | runs |" % a.rounds)
    print("|---|---|---|")
    print(f"| rlhost (fp32 weights dequantised from Q4_1) | {o:.1f} | {', '.join(f'{x:.1f}' for x in ours)} |")
    print(f"| llama.cpp {llama_cpp.__version__} (Q4_1 x Q8_1 blocks) | {l:.1f} | {', '.join(f'{x:.1f}' for x in theirs)} |")
    print(f"| ratio rlhost / llama.cpp | **{o / l:.2f}x** | |")
    print(f"greedy tokens identical for the first {same} of {a.tokens}")


if __name__ == "__main__":
    main()
