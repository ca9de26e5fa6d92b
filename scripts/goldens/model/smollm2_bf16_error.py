#!/usr/bin/env python3
"""The logit error of bfloat16 inference in PyTorch on SmolLM2-135M-Instruct: the bound
gpu/model's TestLowpSmolLM2 holds the bfloat16 generator to (weights and activations in
bfloat16 there too).

transformers loads the default GGUF in fp32 (as smollm2_goldens.py does), runs the golden's
prompt + its 32 greedy tokens teacher-forced, then the same model cast to bfloat16; the
largest |logit difference| over the 32 scored positions, relative to the largest |logit|.

Usage: python3 scripts/goldens/model/smollm2_bf16_error.py models/SmolLM2-135M-Instruct.Q4_1.gguf gpu/model/testdata
Writes smollm2-bf16.json.
"""
import json
import os
import sys

import torch
import transformers
from transformers import AutoModelForCausalLM


def main(gguf, out):
    d, f = os.path.dirname(os.path.abspath(gguf)), os.path.basename(gguf)
    meta = json.load(open(os.path.join(out, "smollm2-golden.json")))
    prompt, gen = meta["prompt"], meta["generate"]["tokens"]
    ids = prompt + gen[:-1]
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32)
    model.eval()
    x = torch.tensor([ids])
    rows = slice(len(prompt) - 1, len(ids))
    with torch.no_grad():
        ref = model(x).logits[0, rows]
        got = model.to(torch.bfloat16)(x).logits[0, rows].float()
    err = (got - ref).abs().max().item()
    big = ref.abs().max().item()
    res = {"positions": len(gen), "max_logit_err": err, "max_logit": big, "rel_logit_err": err / big,
           "torch": torch.__version__, "transformers": transformers.__version__}
    with open(os.path.join(out, "smollm2-bf16.json"), "w") as fh:
        json.dump(res, fh, indent=1)
    print(res)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "gpu/model/testdata")
