#!/usr/bin/env python3
"""Goldens for gpu/model's reward models: tiny random sequence-scoring checkpoints
written by transformers, and the scores transformers computes for a few sequences.

Usage: python3 scripts/goldens/model/make_reward_goldens.py gpu/model/testdata/reward

It writes, for each NAME below, NAME/ (config.json + model.safetensors, save_pretrained
in fp32) and one scores.json for all of them:

  tiny-llama-seq     LlamaForSequenceClassification, num_labels=1 (score.weight, no bias)
  tiny-qwen2-seq     Qwen2ForSequenceClassification, num_labels=1 (score.weight, no bias)
  tiny-qwen2-token   Qwen2ForTokenClassification, num_labels=1 (score.weight and score.bias)

scores.json: {"sequences": [[ids...], ...], "scores": {NAME: [one float per sequence]}}.
The score of a sequence is what veRL's reward-model worker reads: the head's output at
the last token of prompt+response. Each sequence is run alone (batch 1, no padding), so
the sequence classifiers pool at that token and the token classifier's logit is read
there: logits[0, -1, 0]. veRL loads every reward model with AutoModelForTokenClassification
(num_labels=1, classifier dropout 0); on a sequence-classification checkpoint that is the
same score.weight applied to the same final-normed hidden state, so both readings agree.
"""
import json
import os
import sys

import torch
import transformers
from transformers import (LlamaConfig, LlamaForSequenceClassification, Qwen2Config,
                          Qwen2ForSequenceClassification, Qwen2ForTokenClassification)

# Tiny on purpose: the three checkpoints together stay under 100 KB.
COMMON = dict(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
              hidden_act="silu", initializer_range=0.2, bos_token_id=1, eos_token_id=2,
              pad_token_id=0, num_labels=1)

SEQUENCES = [
    [1, 5, 9, 12, 33, 2],
    [1, 7, 7, 7, 40, 41, 42, 43, 44, 2],
    [1, 60, 3],
    [1, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 2, 9, 9],
]


def models():
    llama = LlamaConfig(**COMMON, rms_norm_eps=1e-5, rope_theta=10000.0, attention_bias=False)
    qwen2 = Qwen2Config(**COMMON, rms_norm_eps=1e-6, rope_theta=1000000.0)
    return [("tiny-llama-seq", LlamaForSequenceClassification, llama),
            ("tiny-qwen2-seq", Qwen2ForSequenceClassification, qwen2),
            ("tiny-qwen2-token", Qwen2ForTokenClassification, qwen2)]


def main(out):
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(2323)
    scores = {}
    for name, cls, cfg in models():
        cfg.classifier_dropout = 0.0
        model = cls(cfg).float().eval()
        with torch.no_grad():
            if getattr(model.score, "bias", None) is not None:
                model.score.bias.fill_(0.125)  # not 0, so a loader that drops it fails
        model.save_pretrained(os.path.join(out, name), safe_serialization=True)
        got = []
        with torch.no_grad():
            for seq in SEQUENCES:
                logits = model(input_ids=torch.tensor([seq])).logits
                got.append(float(logits[0, -1, 0] if logits.dim() == 3 else logits[0, 0]))
        scores[name] = got
        print(name, got)
    with open(os.path.join(out, "scores.json"), "w") as f:
        json.dump({"sequences": SEQUENCES, "scores": scores, "torch": torch.__version__,
                   "transformers": transformers.__version__}, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "gpu/model/testdata/reward")
