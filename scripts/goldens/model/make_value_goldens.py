#!/usr/bin/env python3
"""Goldens for gpu/model's critic (ValueModel): a Linear(hidden, 1) head on
transformers' last hidden state of the tiny random checkpoints.

Usage: python3 scripts/goldens/model/make_value_goldens.py gpu/model/testdata
(after make_goldens.py, whose checkpoints and batch it reads).

For each family NAME in (tiny-llama, tiny-qwen2) it writes NAME-value-golden.safetensors:
  head.weight [1,C], head.bias [1]   the random head the test loads
  values [B,T]                       head(AutoModel(tokens).last_hidden_state)
  loss [1]                           sum_{b,t} coef[b,t] * values[b,t]
  grad.<param>                       d loss / d every parameter (decoder HF names with the
                                     model. prefix, and score.weight / score.bias)
  adamw.<param>                      every parameter after one AdamW step with the gradients
                                     clipped to MAX_NORM over decoder and head together

and NAME-value-golden.json with coef, the optimizer settings and the gradient norm.
The batch (tokens) is NAME-golden.json's. This is what veRL's critic computes:
AutoModelForTokenClassification(num_labels=1) with its dropouts set to 0 is exactly a
Linear(hidden, 1) with bias on the base model's last hidden state (after the final norm).
"""
import json
import os
import sys

import torch
from safetensors.torch import save_file
from transformers import AutoModel

LR, BETAS, EPS, WD, MAX_NORM = 1e-2, (0.9, 0.95), 1e-8, 0.1, 1.0


def main(out):
    torch.manual_seed(4321)
    for name in ("tiny-llama", "tiny-qwen2"):
        with open(os.path.join(out, name + "-golden.json")) as f:
            meta = json.load(f)
        tokens = torch.tensor(meta["tokens"], dtype=torch.long)
        B, T = tokens.shape
        body = AutoModel.from_pretrained(os.path.join(out, name), torch_dtype=torch.float32,
                                         attn_implementation="eager")
        body.train()  # these families have no dropout
        C = body.config.hidden_size
        head = torch.nn.Linear(C, 1)
        with torch.no_grad():
            head.weight.copy_(0.3 * torch.randn(1, C))
            head.bias.copy_(torch.tensor([0.25]))
        # loss weights on the real tokens only: the padding token's embedding row gets no
        # gradient in torch (padding_idx), and the trainer never puts a loss on padding
        coef = torch.randn(B, T)
        for b, n in enumerate(meta["lengths"]):
            coef[b, n:] = 0

        w0, b0 = head.weight.detach().clone(), head.bias.detach().clone()
        hidden = body(input_ids=tokens).last_hidden_state  # [B,T,C]
        values = head(hidden).squeeze(-1)  # [B,T]
        loss = (coef * values).sum()
        loss.backward()

        golden = {"head.weight": w0, "head.bias": b0, "values": values.detach(),
                  "loss": loss.detach().reshape(1)}
        named = [("model." + n, p) for n, p in body.named_parameters()] + \
                [("score.weight", head.weight), ("score.bias", head.bias)]
        for pname, p in named:
            golden["grad." + pname] = p.grad.detach().clone()
        params = [p for _, p in named]
        norm = torch.nn.utils.clip_grad_norm_(params, MAX_NORM)
        opt = torch.optim.AdamW(params, lr=LR, betas=BETAS, eps=EPS, weight_decay=WD)
        opt.step()
        for pname, p in named:
            golden["adamw." + pname] = p.detach().clone()
        save_file({k: v.contiguous().float() for k, v in golden.items()},
                  os.path.join(out, name + "-value-golden.safetensors"))
        import transformers
        with open(os.path.join(out, name + "-value-golden.json"), "w") as f:
            json.dump({"B": B, "T": T, "coef": coef.tolist(),
                       "adamw": {"lr": LR, "beta1": BETAS[0], "beta2": BETAS[1], "eps": EPS,
                                 "weight_decay": WD, "max_norm": MAX_NORM, "grad_norm": float(norm)},
                       "torch": torch.__version__, "transformers": transformers.__version__}, f, indent=1)
        print(name, "loss", float(loss), "grad norm", float(norm))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "gpu/model/testdata")
