#!/usr/bin/env python3
"""A Mistral tekken.json as Hugging Face tokenizer files (tokenizer.json, tokenizer_config.json).

The conversion is transformers' own (transformers.integrations.mistral's
convert_tekken_tokenizer, what Mistral's Hugging Face repositories are converted with); no chat
template is attached (the goldens bring theirs). The goldens compare the ids of this tokenizer
with mistral-common's own encoding, so a wrong conversion fails a test.

Usage: tekken_to_hf.py TEKKEN_JSON DST_DIR
"""
import os
import sys

from transformers.integrations.mistral import convert_tekken_tokenizer


def main():
    src, dst = sys.argv[1], sys.argv[2]
    tok = convert_tekken_tokenizer(src, chat_template="")
    tok.chat_template = None
    os.makedirs(dst, exist_ok=True)
    tok.save_pretrained(dst)
    for extra in ("chat_template.jinja", "tekken.json"):
        p = os.path.join(dst, extra)
        if os.path.exists(p):
            os.remove(p)


if __name__ == "__main__":
    main()
