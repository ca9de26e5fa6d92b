#!/usr/bin/env python3
"""Load a checkpoint that rlhost wrote (weights.Save: config.json + model.safetensors) in
transformers, unchanged, and write its logits on the given tokens.

Usage: python3 scripts/goldens/model/load_saved.py DIR IN.json OUT.json
  IN.json:  {"tokens": [[...], ...]}  (B rows of T token ids)
  OUT.json: {"class": the model class transformers chose, "model_type": ...,
             "logits": [B*T*V floats, row-major]}

gpu/model's TestSavedLoadsInTransformers runs it (RLHOST_TORCH_PYTHON; make test-save-transformers).
Any warning transformers prints about unused or newly initialised weights is an error here: the
checkpoint must load as written.
"""
import json
import sys
import warnings

import torch
import transformers
from transformers import AutoModelForCausalLM
from transformers.utils import logging as hf_logging


def main():
    d, inp, out = sys.argv[1:4]
    tokens = torch.tensor(json.load(open(inp))["tokens"], dtype=torch.long)
    hf_logging.set_verbosity_warning()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model, info = AutoModelForCausalLM.from_pretrained(
            d, dtype=torch.float32, attn_implementation="eager", output_loading_info=True)
    bad = {k: v for k, v in info.items() if v}
    if bad:
        sys.exit(f"{d}: transformers {transformers.__version__} did not load every weight as written: {bad}")
    model.eval()
    with torch.no_grad():
        logits = model(tokens).logits.float()
    json.dump({"class": type(model).__name__, "model_type": model.config.model_type,
               "logits": logits.reshape(-1).tolist()}, open(out, "w"))


if __name__ == "__main__":
    main()
