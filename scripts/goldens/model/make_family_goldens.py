#!/usr/bin/env python3
"""Goldens for the decoder families beyond Llama-2 and Qwen2: tiny random Qwen3,
Llama 3 (llama3 RoPE), Mistral (sliding window), Gemma 3 text checkpoints that
transformers writes, and what transformers / PyTorch autograd compute on them.

Usage: python3 scripts/goldens/model/make_family_goldens.py gpu/model/testdata

For each checkpoint NAME below it writes
  NAME/                    config.json + model.safetensors (save_pretrained, fp32)
  NAME-golden.safetensors  logits [B,T,V], logp, entropy, loss [1], grad.<param>,
                           adamw.<param> (make_goldens.py's loss and AdamW step);
                           grpo.grad.<param>: the gradient of one GRPO actor loss
                           (veRL's formula, below) on the same batch;
                           lora.grpo.grad.<peft name>: the same loss's gradient of
                           LoRA adapters (peft, all-linear) on the frozen model
  NAME-lora/               the adapters (peft save_pretrained)
  NAME-golden.json         the batch, the coefficients, the GRPO inputs and loss,
                           greedy generations of 32 tokens (prompts longer than
                           the sliding windows)

The GRPO actor loss is veRL's (dp_actor with use_kl_loss, core_algos):
  ratio = exp(clamp(logp - old_logp, -20, 20))
  pg = max(-A*ratio, -A*clip(ratio, 1-0.2, 1+0.2)); where A < 0: min(pg, -A*3)
  kl = low_var_kl: x = clamp(ref_logp - logp, -20, 20), clamp(exp(x) - x - 1, -10, 10)
  loss = token_mean(pg) + 0.001 * token_mean(kl)    over the response mask
with old_logp = logp + noise (so some ratios clip), ref_logp = logp + noise and
per-sequence advantages of both signs.
"""
import json
import os
import sys

import peft
import torch
import transformers
from peft import LoraConfig, get_peft_model
from safetensors.torch import save_file
from transformers import (Gemma3ForCausalLM, Gemma3TextConfig, LlamaConfig, LlamaForCausalLM, MistralConfig,
                          MistralForCausalLM, Qwen3Config, Qwen3ForCausalLM)

B, T = 3, 9
LENGTHS = [9, 6, 3]
PAD = 0
ENT_COEF = 0.01
LR, BETAS, EPS, WD, MAX_NORM = 1e-2, (0.9, 0.95), 1e-8, 0.1, 1.0
GEN_TOKENS = 32
CLIP, CLIP_C, KL_COEF = 0.2, 3.0, 0.001
LORA_RANK, LORA_ALPHA = 4, 8.0

COMMON = dict(vocab_size=128, hidden_size=48, intermediate_size=96, num_attention_heads=4,
              max_position_embeddings=128, initializer_range=0.1, bos_token_id=1, eos_token_id=2,
              pad_token_id=PAD)


def families():
    """name, class, config: several shapes (GQA ratios, tied and untied, head_dim != hidden/heads,
    windows shorter than the prompts, RoPE scalings)."""
    qwen3 = Qwen3Config(**COMMON, num_hidden_layers=2, num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-6,
                        rope_theta=1000000.0, tie_word_embeddings=True)
    qwen3_yarn = Qwen3Config(**COMMON, num_hidden_layers=2, num_key_value_heads=1, head_dim=8, rms_norm_eps=1e-6,
                             tie_word_embeddings=False,
                             rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                                              "original_max_position_embeddings": 32})
    llama3 = LlamaConfig(**COMMON, num_hidden_layers=2, num_key_value_heads=1, head_dim=12, rms_norm_eps=1e-5,
                         tie_word_embeddings=False, attention_bias=False, hidden_act="silu",
                         rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                                          "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                          "original_max_position_embeddings": 32})
    mistral = MistralConfig(**COMMON, num_hidden_layers=2, num_key_value_heads=2, head_dim=8, rms_norm_eps=1e-5,
                            rope_theta=10000.0, tie_word_embeddings=False, sliding_window=4, hidden_act="silu")
    gemma3 = Gemma3TextConfig(**COMMON, num_hidden_layers=3, num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-6,
                              layer_types=["sliding_attention", "full_attention", "sliding_attention"],
                              sliding_window=4, query_pre_attn_scalar=24,
                              rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
                                               "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}},
                              tie_word_embeddings=True)
    gemma3_capped = Gemma3TextConfig(**COMMON, num_hidden_layers=2, num_key_value_heads=1, head_dim=12,
                                     rms_norm_eps=1e-6, layer_types=["sliding_attention", "full_attention"],
                                     sliding_window=5, query_pre_attn_scalar=12, final_logit_softcapping=4.0,
                                     rope_parameters={"full_attention": {"rope_type": "linear", "factor": 2.0,
                                                                         "rope_theta": 1000000.0},
                                                      "sliding_attention": {"rope_type": "default",
                                                                            "rope_theta": 10000.0}},
                                     tie_word_embeddings=False)
    return [
        ("tiny-qwen3", Qwen3ForCausalLM, qwen3),
        ("tiny-qwen3-yarn", Qwen3ForCausalLM, qwen3_yarn),
        ("tiny-llama3", LlamaForCausalLM, llama3),
        ("tiny-mistral", MistralForCausalLM, mistral),
        ("tiny-gemma3", Gemma3ForCausalLM, gemma3),
        ("tiny-gemma3-capped", Gemma3ForCausalLM, gemma3_capped),
    ]


def batch(gen, V):
    tokens = torch.full((B, T), PAD, dtype=torch.long)
    targets = torch.full((B, T), -1, dtype=torch.long)
    for b, n in enumerate(LENGTHS):
        seq = torch.randint(3, V, (n,), generator=gen)
        tokens[b, :n] = seq
        targets[b, : n - 1] = seq[1:]
    mask = (targets >= 0).float()
    weights = (torch.rand((B, T), generator=gen) * 2 - 1) * mask
    return tokens, targets, mask, weights


def logp_entropy(model, tokens, targets, mask):
    logits = model(input_ids=tokens).logits  # [B,T,V]
    logsm = torch.log_softmax(logits, dim=-1)
    logp = logsm.gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1) * mask
    entropy = -(logsm.exp() * logsm).sum(-1)
    return logits, logp, entropy


def grpo_loss(logp, old, ref, adv, mask):
    """veRL's vanilla clipped policy loss with dual clip, plus low_var_kl, token-mean."""
    tokens = mask.sum()
    lr = torch.clamp(logp - old, -20.0, 20.0)
    ratio = torch.exp(lr)
    l1 = -adv * ratio
    l2 = -adv * torch.clamp(ratio, 1 - CLIP, 1 + CLIP)
    lc = torch.maximum(l1, l2)
    l3 = torch.minimum(-adv * CLIP_C, lc)
    pg = torch.where(adv < 0, l3, lc)
    pg_loss = (pg * mask).sum() / tokens
    x = torch.clamp(ref - logp, -20.0, 20.0)
    kl = torch.clamp(torch.exp(x) - x - 1, -10.0, 10.0)
    kl_loss = (kl * mask).sum() / tokens
    return pg_loss + KL_COEF * kl_loss


def main(out):
    torch.manual_seed(1234)
    gen = torch.Generator().manual_seed(99)
    tokens, targets, mask, weights = batch(gen, COMMON["vocab_size"])
    # GRPO inputs: per-sequence advantages of both signs, old and ref log-probs near the model's
    adv_seq = torch.tensor([1.3, -0.7, 0.4])
    adv = adv_seq[:, None].expand(B, T) * mask
    noise_old = torch.randn((B, T), generator=gen) * 0.3
    noise_ref = torch.randn((B, T), generator=gen) * 0.2
    for name, cls, cfg in families():
        cfg._attn_implementation = "eager"
        model = cls(cfg).float()
        with torch.no_grad():  # random norms and biases too, so their gradients are exercised
            for pname, p in model.named_parameters():
                if pname.endswith("norm.weight"):
                    p.copy_(0.2 + 0.2 * torch.randn(p.shape) if "gemma" in name else 1 + 0.2 * torch.randn(p.shape))
                elif pname.endswith(".bias"):
                    p.copy_(0.1 * torch.randn(p.shape))
        model.save_pretrained(os.path.join(out, name), safe_serialization=True)

        # greedy generation, one prompt at a time, no early stop on eos
        model.eval()
        prompts = [tokens[b, : LENGTHS[b]].tolist() for b in range(B)]
        gens = []
        with torch.no_grad():
            for p in prompts:
                o = model.generate(torch.tensor([p]), max_new_tokens=GEN_TOKENS, do_sample=False, eos_token_id=None,
                                   pad_token_id=PAD, attention_mask=torch.ones(1, len(p), dtype=torch.long))
                seq = o[0, len(p):].tolist()
                lg = torch.log_softmax(model(o).logits[0, len(p) - 1: -1], dim=-1)
                lps = lg.gather(-1, torch.tensor(seq).unsqueeze(-1)).squeeze(-1).tolist()
                gens.append({"prompt": p, "tokens": seq, "logprobs": lps})

        model.train()
        logits, logp, entropy = logp_entropy(model, tokens, targets, mask)
        loss = -(weights * logp).sum() - ENT_COEF * (mask * entropy).sum()
        loss.backward()
        golden = {"logits": logits.detach(), "logp": logp.detach(), "entropy": entropy.detach(),
                  "loss": loss.detach().reshape(1)}
        for pname, p in model.named_parameters():
            golden["grad." + pname] = p.grad.detach().clone()

        # one GRPO actor loss, gradients by autograd
        old = (logp.detach() + noise_old) * mask
        ref = (logp.detach() + noise_ref) * mask
        model.zero_grad()
        _, logp2, _ = logp_entropy(model, tokens, targets, mask)
        gloss = grpo_loss(logp2, old, ref, adv, mask)
        gloss.backward()
        for pname, p in model.named_parameters():
            golden["grpo.grad." + pname] = p.grad.detach().clone()

        # AdamW after the weighted loss's gradients (make_goldens.py's step)
        model.zero_grad()
        _, logp3, entropy3 = logp_entropy(model, tokens, targets, mask)
        (-(weights * logp3).sum() - ENT_COEF * (mask * entropy3).sum()).backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM)
        opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=BETAS, eps=EPS, weight_decay=WD)
        state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        opt.step()
        for pname, p in model.named_parameters():
            golden["adamw." + pname] = p.detach().clone()

        # LoRA on the saved (pre-AdamW) weights: peft adapters on every linear layer, B random
        model.load_state_dict(state)
        lcfg = LoraConfig(r=LORA_RANK, lora_alpha=LORA_ALPHA, target_modules="all-linear", lora_dropout=0.0,
                          bias="none", task_type="CAUSAL_LM")
        pm = get_peft_model(model, lcfg)
        with torch.no_grad():
            for pname, p in pm.named_parameters():
                if "lora_B" in pname:
                    p.copy_(0.2 * torch.randn(p.shape))
        pm.save_pretrained(os.path.join(out, name + "-lora"), safe_serialization=True)
        os.remove(os.path.join(out, name + "-lora", "README.md"))  # peft's model card template
        _, logp4, _ = logp_entropy(pm, tokens, targets, mask)
        lloss = grpo_loss(logp4, old, ref, adv, mask)
        lloss.backward()
        for pname, p in pm.named_parameters():
            if p.requires_grad:
                # peft's saved names: base_model.model.model.layers.N...lora_A.weight
                golden["lora.grpo.grad." + pname.replace(".default", "")] = p.grad.detach().clone()
        golden["lora.logp"] = logp4.detach()

        save_file({k: v.contiguous().float() for k, v in golden.items()}, os.path.join(out, name + "-golden.safetensors"))
        meta = {
            "B": B, "T": T, "lengths": LENGTHS,
            "tokens": tokens.tolist(), "targets": targets.tolist(), "weights": weights.tolist(),
            "ent_coef": ENT_COEF,
            "adamw": {"lr": LR, "beta1": BETAS[0], "beta2": BETAS[1], "eps": EPS,
                      "weight_decay": WD, "max_norm": MAX_NORM, "grad_norm": float(norm)},
            "grpo": {"old_logp": old.tolist(), "ref_logp": ref.tolist(), "adv": adv.tolist(),
                     "clip": CLIP, "clip_c": CLIP_C, "kl_coef": KL_COEF, "kl_type": "low_var_kl",
                     "agg": "token-mean", "loss": float(gloss.detach()), "lora_loss": float(lloss.detach())},
            "lora": {"rank": LORA_RANK, "alpha": LORA_ALPHA, "targets": ["all-linear"]},
            "generate": gens,
            "torch": torch.__version__, "transformers": transformers.__version__, "peft": peft.__version__,
        }
        with open(os.path.join(out, name + "-golden.json"), "w") as f:
            json.dump(meta, f, indent=1)
        print(name, "loss", float(loss.detach()), "grpo", float(gloss.detach()), "grad norm", float(norm))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "gpu/model/testdata")
