#!/usr/bin/env python3
"""Golden for gpu/model: llama.cpp (PyPI llama-cpp-python, CPU) on the default GGUF
(SmolLM2-135M-Instruct Q4_1, `make model`), greedy decoding of a few chat prompts.

Usage (make llamacpp-goldens):
  python3 scripts/goldens/llamacpp/f32_gguf.py models/SmolLM2-135M-Instruct.Q4_1.gguf /tmp/f32.gguf
  python scripts/goldens/llamacpp/greedy.py --model models/SmolLM2-135M-Instruct.Q4_1.gguf \
      --model-f32 /tmp/f32.gguf --out gpu/model/testdata/llamacpp_greedy.json

The F32 copy holds the same (dequantised) weights: llama.cpp computes it without quantising
activations, so gpu/model must match it closely; on the Q4_1 file llama.cpp multiplies the 4-bit
blocks with activations rounded to 8-bit blocks (q4_1 x q8_1), which moves logits by up to ~1.

For each prompt it records the prompt's token ids (llama.cpp's own tokenizer on the ChatML text),
then GEN_TOKENS greedy steps; at every step the chosen token and llama.cpp's TOPK largest logits
(ids and values), so that the Go test can teacher-force the same sequence through gpu/model and
compare logits position by position, not only the final text.
"""
import argparse
import hashlib
import json

import llama_cpp
import numpy as np

GEN_TOKENS = 32
TOPK = 8
PROMPTS = [
    "What is the capital of France? Answer in one sentence.",
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips to her "
    "friends in May. How many clips did Natalia sell altogether in April and May? Think step by step.",
    "Write a Python function that returns the sum of the squares of a list of numbers.",
    "Give three tips for staying healthy.",
]


def chatml(user):
    # SmolLM2-Instruct's template (the GGUF's tokenizer.chat_template) without a system message
    # renders the default one; the Go test checks that its own template gives the same ids.
    return ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
            f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--model-f32", help="an F32 copy of --model (f32_gguf.py): recorded as cases_f32")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    sha = hashlib.sha256(open(args.model, "rb").read()).hexdigest()
    out = {"llama_cpp_python": llama_cpp.__version__, "model_sha256": sha, "gen_tokens": GEN_TOKENS, "topk": TOPK,
           "cases": run(args.model)}
    if args.model_f32:
        out["cases_f32"] = run(args.model_f32)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(f"wrote {args.out}: {len(PROMPTS)} prompts x {GEN_TOKENS} greedy tokens (llama-cpp-python {llama_cpp.__version__})")


def run(path):
    llm = llama_cpp.Llama(model_path=path, n_ctx=512, n_batch=512, logits_all=True,
                          n_threads=2, seed=0, verbose=False)
    cases = []
    for text in PROMPTS:
        prompt = llm.tokenize(chatml(text).encode(), add_bos=False, special=True)
        llm.reset()
        llm.eval(prompt)
        steps = []
        for _ in range(GEN_TOKENS):
            row = np.asarray(llm.scores[llm.n_tokens - 1], dtype=np.float64)
            top = np.argsort(-row, kind="stable")[:TOPK]
            tok = int(top[0])
            steps.append({"token": tok, "top_ids": [int(i) for i in top],
                          "top_logits": [round(float(row[i]), 5) for i in top]})
            llm.eval([tok])  # no stop on EOS: a fixed number of positions to compare
        cases.append({"user": text, "prompt_ids": [int(t) for t in prompt], "steps": steps,
                      "text": llm.detokenize([s["token"] for s in steps]).decode("utf-8", "replace")})
    return cases


if __name__ == "__main__":
    main()
