#!/usr/bin/env python3
"""Goldens for host/sft: the tokens, loss mask, per-token loss and gradients of one SFT step,
computed with the Hugging Face stack (tokenizers, transformers' apply_chat_template and
LlamaForCausalLM, PyTorch autograd) on a tiny random checkpoint.

Usage: python3 scripts/goldens/sft/make_goldens.py host/sft/testdata

Writes
  tiny-chat/                 a tiny Llama (vocab 258: the 256 byte-level tokens plus
                             <|im_start|> and <|im_end|>) with a byte-level tokenizer and a
                             Qwen2.5-style chat template that renders tools and Hermes tool calls
  sft-golden.json            the conversations, and for each: input_ids, loss_mask, the
                             per-token loss; the step's loss
  sft-golden.safetensors     grad.<param> for every parameter

The reference layout of a conversation is veRL's tool agent (agent_loop/tool_agent_loop.py),
written here independently of the Go code:
  prompt      = apply_chat_template(messages before the first assistant turn, tools,
                add_generation_prompt=True)                          loss_mask 0
  assistant   = the text the template adds for the turn, i.e.
                render(history + [turn]) minus render(history, add_generation_prompt=True),
                tokenised and cut after the eos token (where generation stops)   loss_mask 1
  observation = apply_chat_template(the tool/user messages alone, add_generation_prompt=True)
                minus apply_chat_template([{}]) (veRL's system-prompt cut)       loss_mask 0
Loss: the token-mean cross-entropy over every loss_mask-1 token of the batch (both
conversations): loss = sum_tokens -log p(token) / number of such tokens.
"""
import json
import os
import sys

import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from tokenizers import AddedToken
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

TEMPLATE = (
    "{%- if tools %}<|im_start|>system\n"
    "{%- if messages[0].role == 'system' %}\n{{ messages[0].content }}\n{%- endif %}\n"
    "# Tools\n<tools>\n{%- for tool in tools %}\n{{ tool | tojson }}\n{%- endfor %}\n</tools><|im_end|>\n"
    "{% elif messages[0].role == 'system' %}<|im_start|>system\n{{ messages[0].content }}<|im_end|>\n{% endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'system' and loop.first %}"
    "{%- elif message.role == 'assistant' %}<|im_start|>assistant\n{{ message.content }}"
    "{%- if message.tool_calls %}{%- for tc in message.tool_calls %}\n<tool_call>\n"
    "{\"name\": \"{{ tc.function.name }}\", \"arguments\": {{ tc.function.arguments | tojson }}}\n</tool_call>"
    "{%- endfor %}{%- endif %}<|im_end|>\n"
    "{% elif message.role == 'tool' %}<|im_start|>tool\n{{ message.content }}<|im_end|>\n"
    "{% else %}<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n{% endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

TOOLS = [{"type": "function", "function": {"name": "calc", "description": "Evaluate an arithmetic expression.",
          "parameters": {"type": "object", "properties": {"expression": {"type": "string", "description": "e.g. 2+3"}},
                         "required": ["expression"]}}}]

CONVERSATIONS = [
    {"messages": [
        {"role": "system", "content": "You are a careful calculator."},
        {"role": "user", "content": "What is 12*7+3?"},
        {"role": "assistant", "content": "Let me compute.", "tool_calls": [
            {"type": "function", "function": {"name": "calc", "arguments": {"expression": "12*7+3"}}}]},
        {"role": "tool", "content": "87"},
        {"role": "assistant", "content": "12*7+3 = 87.\n#### 87"},
    ], "tools": TOOLS},
    {"messages": [
        {"role": "user", "content": "Say hi."},
        {"role": "assistant", "content": "Hi!"},
        {"role": "user", "content": "Again, louder."},
        {"role": "assistant", "content": "HI!"},
    ], "tools": None},
]


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


def make_tokenizer(out):
    vocab = {ch: b for b, ch in sorted(bytes_to_unicode().items())}
    tk = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tk.decoder = decoders.ByteLevel()
    tk.add_special_tokens([AddedToken("<|im_start|>", special=True, normalized=False),
                           AddedToken("<|im_end|>", special=True, normalized=False)])
    tk.save(os.path.join(out, "tokenizer.json"))
    cfg = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": None, "eos_token": "<|im_end|>",
           "pad_token": "<|im_end|>", "chat_template": TEMPLATE}
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    return PreTrainedTokenizerFast.from_pretrained(out)


def render(tok, msgs, tools, agp):
    return tok.apply_chat_template(msgs, tools=tools, add_generation_prompt=agp, tokenize=False)


def observation_prefix(tok):
    """What the template renders before the first message (docs/tokenizer.md): veRL's
    apply_chat_template([{}]) where that is a prefix of a rendered observation, else the
    longest common prefix of a lone user turn and a lone assistant turn, cut back to its
    last newline."""
    p = tok.apply_chat_template([{}], add_generation_prompt=False, tokenize=False)
    probe = tok.apply_chat_template([{"role": "tool", "content": "x"}], add_generation_prompt=True, tokenize=False)
    a = tok.apply_chat_template([{"role": "user", "content": "\x01"}], tokenize=False)
    b = tok.apply_chat_template([{"role": "assistant", "content": "\x02"}], tokenize=False)
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    lcp = a[:n]
    lcp = lcp[:lcp.rfind("\n") + 1]
    if probe.startswith(p) and len(p) <= len(lcp):
        return p
    return lcp


def layout(tok, conv):
    msgs, tools = conv["messages"], conv["tools"]
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    first = next(i for i, m in enumerate(msgs) if m["role"] == "assistant")
    ids = tok.encode(render(tok, msgs[:first], tools, True), add_special_tokens=False)
    mask = [0] * len(ids)
    system_prefix = observation_prefix(tok)
    i = first
    while i < len(msgs):
        if msgs[i]["role"] != "assistant":
            j = i
            while j < len(msgs) and msgs[j]["role"] != "assistant":
                j += 1
            text = tok.apply_chat_template(msgs[i:j], add_generation_prompt=True, tokenize=False)
            assert text.startswith(system_prefix)
            obs = tok.encode(text[len(system_prefix):], add_special_tokens=False)
            ids += obs
            mask += [0] * len(obs)
            i = j
            continue
        before = render(tok, msgs[:i], tools, True)
        after = render(tok, msgs[:i + 1], tools, False)
        assert after.startswith(before)
        turn = tok.encode(after[len(before):], add_special_tokens=False)
        turn = turn[:turn.index(eos) + 1]
        ids += turn
        mask += [1] * len(turn)
        i += 1
    return ids, mask


def main(out):
    torch.manual_seed(4321)
    mdir = os.path.join(out, "tiny-chat")
    os.makedirs(mdir, exist_ok=True)
    tok = make_tokenizer(mdir)
    cfg = LlamaConfig(vocab_size=258, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, max_position_embeddings=1024, hidden_act="silu", initializer_range=0.1,
                      rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False, attention_bias=False,
                      bos_token_id=None, eos_token_id=257, pad_token_id=None)
    # pad_token_id stays None: with one, transformers builds the embedding with padding_idx,
    # and PyTorch then never updates that row (the eos row here); rlhost trains every row.
    cfg._attn_implementation = "eager"
    model = LlamaForCausalLM(cfg).float()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1 + 0.2 * torch.randn(p.shape))
    model.save_pretrained(mdir, safe_serialization=True)

    convs = []
    total, count = 0.0, 0
    model.train()
    per_conv = []
    for conv in CONVERSATIONS:
        ids, mask = layout(tok, conv)
        x = torch.tensor([ids])
        logits = model(input_ids=x).logits[0]  # [T,V]
        logp = torch.log_softmax(logits[:-1], dim=-1).gather(-1, x[0, 1:].unsqueeze(-1)).squeeze(-1)  # [T-1]
        m = torch.tensor(mask[1:], dtype=torch.float32)
        per_conv.append((ids, mask, logp, m))
        count += int(m.sum())
    loss = sum(-(logp * m).sum() for _, _, logp, m in per_conv) / count
    loss.backward()
    for (ids, mask, logp, m), conv in zip(per_conv, CONVERSATIONS):
        token_loss = [0.0] + (-(logp * m)).detach().tolist()  # at the position of the predicted token
        convs.append({"messages": conv["messages"], "tools": json.dumps(conv["tools"]) if conv["tools"] else None,
                      "input_ids": ids, "loss_mask": mask, "token_loss": token_loss,
                      "text": tok.decode(ids)})
    grads = {"grad." + n: p.grad.detach().clone().contiguous() for n, p in model.named_parameters()}
    save_file(grads, os.path.join(out, "sft-golden.safetensors"))
    import transformers
    meta = {"conversations": convs, "loss": float(loss), "loss_tokens": count,
            "torch": torch.__version__, "transformers": transformers.__version__}
    with open(os.path.join(out, "sft-golden.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print("loss", float(loss), "tokens", count, "lengths", [len(c["input_ids"]) for c in convs])


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "host/sft/testdata")
