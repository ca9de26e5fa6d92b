#!/usr/bin/env python3
"""The logit error of llama.cpp's Q8_0 inference on SmolLM2-135M-Instruct: the bound gpu/model's
TestLowpSmolLM2 holds the int8 generator to.

llama.cpp quantises an F32 copy of the default GGUF (f32_gguf.py: the dequantised Q4_1 weights) to
Q8_0 itself (llama_model_quantize: every matrix, the tied embedding / lm_head too, in blocks of 32
int8 with an fp16 scale; norms stay F32). Its CPU products then quantise the activations to Q8_0
blocks as well (q8_0 x q8_0 dot products), which is what rlhost's int8 rollouts do on CPUs with
AVX-512 VNNI. Both files run the golden's prompt + its 32 greedy tokens (testdata/smollm2-golden.json)
teacher-forced; the largest |logit difference| over the 32 scored positions, relative to the largest
|logit| of the F32 run, is written out.

Usage (make llamacpp-goldens):
  python3 scripts/goldens/llamacpp/f32_gguf.py models/SmolLM2-135M-Instruct.Q4_1.gguf /tmp/f32.gguf
  python scripts/goldens/llamacpp/q8_error.py --model-f32 /tmp/f32.gguf --out gpu/model/testdata
Writes smollm2-q8.json.
"""
import argparse
import ctypes
import json
import os
import tempfile

import llama_cpp
import numpy as np

LLAMA_FTYPE_MOSTLY_Q8_0 = 7


def logits(path, ids, rows):
    llm = llama_cpp.Llama(model_path=path, n_ctx=512, n_batch=512, logits_all=True, n_threads=2, seed=0,
                          verbose=False)
    llm.reset()
    llm.eval(ids)
    out = np.array(llm.scores[rows], dtype=np.float64)
    llm.close()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-f32", required=True)
    ap.add_argument("--out", default="gpu/model/testdata")
    args = ap.parse_args()
    meta = json.load(open(os.path.join(args.out, "smollm2-golden.json")))
    prompt, gen = meta["prompt"], meta["generate"]["tokens"]
    ids = prompt + gen[:-1]
    rows = slice(len(prompt) - 1, len(ids))
    with tempfile.TemporaryDirectory() as tmp:
        q8 = os.path.join(tmp, "q8_0.gguf")
        params = llama_cpp.llama_model_quantize_default_params()
        params.ftype = LLAMA_FTYPE_MOSTLY_Q8_0
        params.nthread = 2
        rc = llama_cpp.llama_model_quantize(args.model_f32.encode(), q8.encode(), ctypes.byref(params))
        if rc != 0:
            raise SystemExit(f"llama_model_quantize: {rc}")
        ref = logits(args.model_f32, ids, rows)
        got = logits(q8, ids, rows)
    err = float(np.abs(got - ref).max())
    big = float(np.abs(ref).max())
    res = {"positions": len(gen), "max_logit_err": err, "max_logit": big, "rel_logit_err": err / big,
           "greedy_equal": int(sum(1 for a, b in zip(got.argmax(1), ref.argmax(1)) if a == b)),
           "llama_cpp_python": llama_cpp.__version__}
    with open(os.path.join(args.out, "smollm2-q8.json"), "w") as fh:
        json.dump(res, fh, indent=1)
        fh.write("\n")
    print(res)


if __name__ == "__main__":
    main()
