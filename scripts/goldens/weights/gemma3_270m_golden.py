#!/usr/bin/env python3
"""Reference values of Gemma 3 270M's GGUF (make model-gemma3) as transformers loads it
(`from_pretrained(..., gguf_file=)`: the gguf package's dequantisation, its own tensor-name map
and its undoing of llama.cpp's +1 on Gemma's norms), for gpu/weights' TestGemma3GGUF270M:

  gpu/weights/testdata/gemma3-270m.json   the config transformers builds (the keys weights.Config
                                          has) and, per tensor, shape, sum, a position-weighted
                                          sum and the first values (figures() of weights_golden.py)

Usage: python scripts/goldens/weights/gemma3_270m_golden.py models/gemma-3-270m-q4_k_m.gguf
Needs torch, transformers, gguf (the trl-venv).
"""
import json
import os
import sys

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM

sys.path.insert(0, os.path.dirname(__file__))
from weights_golden import figures  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
KEYS = ["model_type", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
        "num_key_value_heads", "head_dim", "vocab_size", "max_position_embeddings", "rms_norm_eps",
        "tie_word_embeddings", "sliding_window", "layer_types", "query_pre_attn_scalar",
        "final_logit_softcapping", "attn_logit_softcapping", "hidden_activation", "bos_token_id",
        "eos_token_id", "rope_parameters"]


def main(path):
    d, f = os.path.dirname(os.path.abspath(path)), os.path.basename(path)
    cfg = AutoConfig.from_pretrained(d, gguf_file=f)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32)
    sd = model.state_dict()
    names = ["model.embed_tokens.weight", "model.norm.weight", "model.layers.0.self_attn.q_proj.weight",
             "model.layers.0.self_attn.q_norm.weight", "model.layers.0.pre_feedforward_layernorm.weight",
             "model.layers.17.post_feedforward_layernorm.weight", "model.layers.5.mlp.down_proj.weight"]
    ref = {n: figures(sd[n], head=8 if n in names else 2) for n in sd if n != "lm_head.weight"}
    c = cfg.to_dict()
    out = {"file": f, "transformers": transformers.__version__, "config": {k: c.get(k) for k in KEYS},
           "tensors": ref}
    dst = os.path.join(ROOT, "gpu", "weights", "testdata", "gemma3-270m.json")
    with open(dst, "w") as fh:
        json.dump(out, fh, indent=0)
    print(f"wrote {dst}: {len(ref)} tensors; config {out['config']}")


if __name__ == "__main__":
    main(sys.argv[1])
