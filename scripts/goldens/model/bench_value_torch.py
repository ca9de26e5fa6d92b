#!/usr/bin/env python3
"""PyTorch eager CPU peer of gpu/model's BenchmarkValueTrainStep: the critic of PPO with GAE,
SmolLM2-135M's shape with random weights (transformers' init), fp32, as veRL builds it
(the base model + Linear(hidden, 1) on the last hidden state, no dropout):
forward, weighted value loss, backward, clip_grad_norm_(1.0), AdamW step on a B x T batch.

Usage: python3 scripts/goldens/model/bench_value_torch.py [--steps 3] [--B 4 --T 256]
"""
import argparse
import time

import torch
from transformers import LlamaModel

from bench_torch import smollm2


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--B", type=int, default=4)
    ap.add_argument("--T", type=int, default=256)
    args = ap.parse_args()
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    cfg = smollm2()
    cfg._attn_implementation = "sdpa"
    body = LlamaModel(cfg).float()
    head = torch.nn.Linear(cfg.hidden_size, 1)
    B, T = args.B, args.T
    tokens = torch.randint(0, cfg.vocab_size, (B, T))
    w = torch.randn(B, T) / (B * T)
    params = list(body.parameters()) + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=1e-5, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)

    def step():
        values = head(body(input_ids=tokens).last_hidden_state).squeeze(-1)
        loss = (w * values).sum()
        opt.zero_grad(set_to_none=False)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()

    body.train()
    step()  # warm-up
    t0 = time.perf_counter()
    for _ in range(args.steps):
        step()
    sec = (time.perf_counter() - t0) / args.steps
    print(f"critic train B={B} T={T}: {sec:.3f} s/step, {B * T / sec:.1f} tokens/s")


if __name__ == "__main__":
    main()
