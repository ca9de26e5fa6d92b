#!/usr/bin/env python3
"""Golden for gpu/model: llama.cpp (PyPI llama-cpp-python, CPU) on Gemma 3 270M (the base model,
Q4_K_M GGUF, `make model-gemma3`), greedy decoding of plain-text prompts given as token ids.

Usage (make llamacpp-gemma3-goldens):
  python3 scripts/goldens/llamacpp/f32_gguf.py models/gemma-3-270m-q4_k_m.gguf /tmp/g3-f32.gguf
  python scripts/goldens/llamacpp/gemma3_greedy.py --model models/gemma-3-270m-q4_k_m.gguf \
      --model-f32 /tmp/g3-f32.gguf --out gpu/model/testdata/llamacpp_gemma3.json

For each prompt: its token ids (llama.cpp's tokenizer, BOS first), then GEN_TOKENS greedy steps
(no stop at EOS); at every step the chosen token, its log-probability under llama.cpp's logits
(log-softmax over the whole vocabulary, in float64) and the TOPK largest logits (ids and values),
so that the Go test can teacher-force the same sequence and compare position by position. The
last prompt is longer than Gemma 3's sliding window (512), so the local layers' window and the
global layers' full attention both shape its steps.

The F32 copy (f32_gguf.py: every tensor dequantised by the gguf package) is recorded as cases_f32:
llama.cpp computes it in fp32, without the 8-bit activation blocks its quantised kernels use, so it
isolates the model's math from quantisation.
"""
import argparse
import hashlib
import json

import llama_cpp
import numpy as np

GEN_TOKENS = 40
TOPK = 8
N_CTX = 768
WINDOW_PROMPT_TOKENS = 560  # the long prompt has at least this many tokens (window: 512)
PROMPTS = [
    "The capital of France is",
    "Question: Natalia sold clips to 48 of her friends in April, and then she sold half as many clips "
    "in May. How many clips did Natalia sell altogether in April and May?\nAnswer:",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "Once upon a time, in a small village by the sea,",
]


def long_prompt(llm, gsm8k):
    """GSM8K test problems with their answers, until the prompt passes the sliding window, then
    one more question."""
    rows = [json.loads(l) for l in open(gsm8k, encoding="utf-8")]
    text, i = "", 0
    while len(llm.tokenize(text.encode(), add_bos=True, special=False)) < WINDOW_PROMPT_TOKENS:
        text += f"Question: {rows[i]['question']}\nAnswer: {rows[i]['answer']}\n\n"
        i += 1
    return text + f"Question: {rows[i]['question']}\nAnswer:"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--model-f32", help="an F32 copy of --model (f32_gguf.py): recorded as cases_f32")
    ap.add_argument("--gsm8k", required=True, help="GSM8K test.jsonl, for the prompt longer than the window")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    h = hashlib.sha256()
    with open(args.model, "rb") as f:
        while b := f.read(1 << 20):
            h.update(b)
    out = {"llama_cpp_python": llama_cpp.__version__, "model_sha256": h.hexdigest(), "gen_tokens": GEN_TOKENS,
           "topk": TOPK, "cases": run(args.model, args.gsm8k)}
    if args.model_f32:
        out["cases_f32"] = run(args.model_f32, args.gsm8k)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    n = len(out["cases"])
    print(f"wrote {args.out}: {n} prompts x {GEN_TOKENS} greedy tokens (llama-cpp-python {llama_cpp.__version__})")
    for c in out["cases"]:
        print(f"  {len(c['prompt_ids'])} prompt tokens -> {c['text'][:70]!r}")


def run(path, gsm8k):
    llm = llama_cpp.Llama(model_path=path, n_ctx=N_CTX, n_batch=N_CTX, logits_all=True,
                          n_threads=2, seed=0, verbose=False)
    cases = []
    for text in PROMPTS + [long_prompt(llm, gsm8k)]:
        prompt = llm.tokenize(text.encode(), add_bos=True, special=False)
        assert len(prompt) + GEN_TOKENS <= N_CTX, len(prompt)
        llm.reset()
        llm.eval(prompt)
        steps = []
        for _ in range(GEN_TOKENS):
            row = np.asarray(llm.scores[llm.n_tokens - 1], dtype=np.float64)
            top = np.argsort(-row, kind="stable")[:TOPK]
            tok = int(top[0])
            m = row.max()
            logprob = row[tok] - (m + np.log(np.exp(row - m).sum()))
            steps.append({"token": tok, "logprob": round(float(logprob), 6), "top_ids": [int(i) for i in top],
                          "top_logits": [round(float(row[i]), 5) for i in top]})
            llm.eval([tok])
        cases.append({"prompt": text, "prompt_ids": [int(t) for t in prompt], "steps": steps,
                      "text": llm.detokenize([s["token"] for s in steps]).decode("utf-8", "replace")})
    return cases


if __name__ == "__main__":
    main()
