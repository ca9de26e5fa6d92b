#!/usr/bin/env python3
"""Golden for gpu/model's end-of-sequence rule: where transformers' greedy generate stops
on the tiny-llama checkpoint (gpu/model/testdata/tiny-llama, made by make_goldens.py) for
several eos_token_id settings of config.json and generation_config.json.

Usage: python3 scripts/goldens/model/make_eos_goldens.py gpu/model/testdata
(needs torch and transformers)

It writes eos-golden.json:
  {"transformers": version, "max_new_tokens": N, "cases": [
     {"name", "config_eos": config.json's eos_token_id (JSON text),
      "generation_config_eos": generation_config.json's eos_token_id (JSON text), or null when
        the checkpoint has no generation_config.json,
      "results": [{"prompt": [...], "tokens": [new tokens, the eos included], "stopped": bool}]}]}

Each case is a copy of tiny-llama with those two files rewritten, loaded with
AutoModelForCausalLM.from_pretrained, so transformers itself decides which ids end a
sequence: generation_config.json's eos_token_id when the file exists, else config.json's.
The prompts are tiny-llama-golden.json's; tiny-llama's plain greedy tokens never reach id 2
or 127, so the ids below pick where (and whether) a sequence stops.
"""
import json
import os
import shutil
import sys
import tempfile

import torch
import transformers
from transformers import AutoModelForCausalLM

N = 32
# name, config.json eos_token_id, generation_config.json eos_token_id (None: no file)
CASES = [
    ("config list, third id", "[2, 127, 63]", None),
    ("config list, second id", "[127, 98, 2]", None),
    ("generation_config list, second id", "2", "[2, 98]"),
    ("generation_config superset of the config list", "[2, 127]", "[2, 127, 63]"),
    ("generation_config without config's ids", "[2, 98]", "[2, 63]"),
    ("generation_config with eos_token_id null", "[2, 98]", "null"),
    ("ids never generated", "[2, 127]", "2"),
    ("no eos id", "null", None),
]


def main(out):
    src = os.path.join(out, "tiny-llama")
    with open(os.path.join(out, "tiny-llama-golden.json")) as f:
        prompts = [g["prompt"] for g in json.load(f)["generate"]]
    cases = []
    for name, config_eos, gen_eos in CASES:
        with tempfile.TemporaryDirectory() as d:
            for fn in ("config.json", "model.safetensors"):
                shutil.copy(os.path.join(src, fn), d)
            with open(os.path.join(d, "config.json")) as f:
                cfg = json.load(f)
            cfg["eos_token_id"] = json.loads(config_eos)
            with open(os.path.join(d, "config.json"), "w") as f:
                json.dump(cfg, f, indent=2)
            if gen_eos is not None:
                # as released checkpoints have it: no _from_model_config
                with open(os.path.join(d, "generation_config.json"), "w") as f:
                    json.dump({"bos_token_id": 1, "eos_token_id": json.loads(gen_eos)}, f, indent=2)
            torch.manual_seed(0)
            model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32)
            model.eval()
            results = []
            with torch.no_grad():
                for p in prompts:
                    o = model.generate(torch.tensor([p]), max_new_tokens=N, do_sample=False, pad_token_id=0,
                                       attention_mask=torch.ones(1, len(p), dtype=torch.long))
                    toks = o[0, len(p):].tolist()
                    results.append({"prompt": p, "tokens": toks, "stopped": len(toks) < N})
        cases.append({"name": name, "config_eos": config_eos, "generation_config_eos": gen_eos, "results": results})
    with open(os.path.join(out, "eos-golden.json"), "w") as f:
        json.dump({"transformers": transformers.__version__, "max_new_tokens": N, "cases": cases}, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "gpu/model/testdata")
