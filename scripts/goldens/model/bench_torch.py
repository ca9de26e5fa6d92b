#!/usr/bin/env python3
"""PyTorch eager CPU peer of gpu/model's benchmarks, same shapes and batch:
SmolLM2-135M (or --shape, gpu/model's RLHOST_BENCH_SHAPE) with random weights
(transformers' init), fp32.

  train: forward, weighted log-prob loss, backward, clip_grad_norm_(1.0),
         AdamW step on a B x T batch -> tokens/s
  decode: model.generate, greedy, 32-token random prompts, 64 new tokens,
          batch 1 and 16 -> generated tokens/s (--decode-dtype float32, bfloat16 or int8)

Usage: python3 scripts/goldens/model/bench_torch.py [--steps 3] [--B 4 --T 256]
"""
import argparse
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM, Qwen3Config, Qwen3ForCausalLM


def smollm2():
    return LlamaConfig(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                       num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=8192,
                       rms_norm_eps=1e-5, rope_theta=100000.0, tie_word_embeddings=True,
                       bos_token_id=1, eos_token_id=2, hidden_act="silu")


# Qwen/Qwen3-0.6B's dimensions
QWEN3_06B = dict(vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
                 num_attention_heads=16, num_key_value_heads=8, head_dim=128, max_position_embeddings=40960,
                 rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=True, bos_token_id=151643,
                 eos_token_id=151645, hidden_act="silu")

# the shapes of gpu/model's benchShapes (RLHOST_BENCH_SHAPE): config and model class
SHAPES = {
    "smollm2-135m": lambda: (smollm2(), LlamaForCausalLM),
    "qwen3-0.6b": lambda: (Qwen3Config(**QWEN3_06B), Qwen3ForCausalLM),
    "qwen3-0.6b-noqknorm": lambda: (LlamaConfig(**QWEN3_06B), LlamaForCausalLM),
    "qwen3-0.6b-window64": lambda: (Qwen3Config(**QWEN3_06B, use_sliding_window=True, sliding_window=64,
                                                max_window_layers=0), Qwen3ForCausalLM),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--shape", default="smollm2-135m", choices=sorted(SHAPES))
    ap.add_argument("--B", type=int, default=4)
    ap.add_argument("--T", type=int, default=256)
    ap.add_argument("--skip-decode", action="store_true")
    ap.add_argument("--skip-train", action="store_true")
    ap.add_argument("--decode-dtype", default="float32", choices=["float32", "bfloat16", "int8"],
                    help="dtype of the model for the decode benchmark: float32 or bfloat16 (weights and "
                         "activations), or int8 (torch's dynamic quantisation of every nn.Linear, lm_head too: "
                         "int8 weights per tensor, activations quantised per product, fbgemm/onednn int8 GEMM)")
    ap.add_argument("--lora", type=int, default=0,
                    help="rank of peft LoRA adapters on all linear layers (alpha 2*rank, base frozen); 0: full fine-tuning")
    args = ap.parse_args()
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    cfg, cls = SHAPES[args.shape]()
    cfg._attn_implementation = "sdpa"
    model = cls(cfg).float()
    print(f"shape {args.shape}: {cls.__name__}")
    if args.lora > 0:  # the peer of BenchmarkTrainStepLoRA / BenchmarkDecodeLoRA (adapters not merged)
        from peft import LoraConfig, get_peft_model
        model = get_peft_model(model, LoraConfig(r=args.lora, lora_alpha=2 * args.lora, target_modules="all-linear",
                                                 lora_dropout=0.0, task_type="CAUSAL_LM"))
        print(f"peft LoRA r={args.lora}, all-linear")

    if not args.skip_train:
        B, T = args.B, args.T
        tokens = torch.randint(0, cfg.vocab_size, (B, T))
        targets = torch.roll(tokens, -1, 1)
        mask = torch.ones(B, T)
        mask[:, -1] = 0
        w = torch.randn(B, T) * mask / (B * T)
        trainable = [p for p in model.parameters() if p.requires_grad]
        opt = torch.optim.AdamW(trainable, lr=1e-5, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)

        def step():
            logits = model(input_ids=tokens).logits
            logp = torch.log_softmax(logits, -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
            loss = -(w * logp).sum()
            opt.zero_grad(set_to_none=False)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(trainable, 1.0)
            opt.step()

        model.train()
        step()  # warm-up
        t0 = time.perf_counter()
        for _ in range(args.steps):
            step()
        sec = (time.perf_counter() - t0) / args.steps
        print(f"train B={B} T={T}: {sec:.3f} s/step, {B * T / sec:.1f} tokens/s")

    if not args.skip_decode:
        model.eval()
        if args.decode_dtype == "bfloat16":
            model = model.to(torch.bfloat16)
        elif args.decode_dtype == "int8":
            from torch.ao.quantization import quantize_dynamic
            model.lm_head.weight = torch.nn.Parameter(model.lm_head.weight.detach().clone())  # untie, then quantise
            model = quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
            print(f"int8: torch.ao quantize_dynamic, engine {torch.backends.quantized.engine}")
        for batch in (1, 16):
            prompt = torch.randint(3, cfg.vocab_size, (batch, 32))
            kw = dict(max_new_tokens=64, min_new_tokens=64, do_sample=False, pad_token_id=0,
                      attention_mask=torch.ones_like(prompt))
            with torch.no_grad():
                model.generate(input_ids=prompt, **{**kw, "max_new_tokens": 4, "min_new_tokens": 4})
                t0 = time.perf_counter()
                out = model.generate(input_ids=prompt, **kw)
                sec = time.perf_counter() - t0
            n = (out.shape[1] - 32) * batch
            print(f"decode {args.decode_dtype} batch={batch}: {n / sec:.1f} tokens/s")


if __name__ == "__main__":
    main()
