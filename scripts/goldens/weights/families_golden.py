#!/usr/bin/env python3
"""GGUF goldens for gpu/weights: tiny random checkpoints of the newer decoder families, written by
transformers and converted to GGUF by llama.cpp's own convert_hf_to_gguf.py.

For each family transformers builds a small random model and saves it (save_pretrained, F32):

  qwen3       Qwen3ForCausalLM: head_dim 16 != hidden 32 / 4 heads, q_norm/k_norm, GQA 2:1, tied
  gemma3      Gemma3ForCausalLM (gemma3_text): 6 layers (5 sliding with window 16, 1 global; local
              RoPE base 10000, global 1e6), head_dim 16, query_pre_attn_scalar = head_dim, GQA 2:1,
              the four norms, QK-norm, tied
  llama3      LlamaForCausalLM with rope_scaling llama3 (Llama 3.2's factor 32, low 1, high 4,
              original 8192; theta 500000; head_dim 16, whose 8 frequencies span all three bands of
              the llama3 formula), GQA 2:1, tied
  mistral     MistralForCausalLM, sliding_window 16, GQA 4:1, untied
  qwen3-yarn  Qwen3ForCausalLM with yarn RoPE scaling (factor 4, original 32), untied

into gpu/weights/testdata/<family>/ (config.json, model.safetensors), and converts each directory
with the vendored llama.cpp's convert_hf_to_gguf.py (--outtype f32) into
gpu/weights/testdata/<family>.gguf. The tokenizer the converter needs is a SentencePiece BPE model
of 384 pieces with byte fallback, trained here on GSM8K questions (sentencepiece package); it is
not committed, the GGUFs carry it.

It also converts one-layer Gemma 3 and Llama 3 models to Q8_0 (micro-gemma3-q8_0.gguf,
micro-llama3-q8_0.gguf), seeds of FuzzGGUFCheckpoint.

The Go test TestFamiliesGGUF loads each pair and checks that the GGUF gives the safetensors'
tensors (exactly; Gemma's norms within the rounding of llama.cpp's +1) and config.

Usage (make weights-families-goldens, which fetches the llama.cpp source and sentencepiece):
  python scripts/goldens/weights/families_golden.py --llama-cpp DIR/vendor/llama.cpp \
      --gsm8k ../shared/data/gsm8k/train.jsonl
Needs torch, transformers, safetensors, numpy, sentencepiece.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import torch
import transformers
from transformers import AutoModelForCausalLM, Gemma3TextConfig, LlamaConfig, MistralConfig, Qwen3Config

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
OUT = os.path.join(ROOT, "gpu", "weights", "testdata")
VOCAB = 384


def configs():
    common = dict(vocab_size=VOCAB, max_position_embeddings=256, bos_token_id=1, eos_token_id=2, pad_token_id=0)
    return {
        "qwen3": Qwen3Config(**common, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                             num_attention_heads=4, num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-6,
                             tie_word_embeddings=True,
                             rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}),
        "gemma3": Gemma3TextConfig(**common, hidden_size=32, intermediate_size=64, num_hidden_layers=6,
                                   num_attention_heads=2, num_key_value_heads=1, head_dim=16,
                                   query_pre_attn_scalar=16, sliding_window=16, rms_norm_eps=1e-6,
                                   rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
                                                    "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}),
        "llama3": LlamaConfig(**{**common, "max_position_embeddings": 131072}, hidden_size=32,
                              intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                              num_key_value_heads=1, rms_norm_eps=1e-5,
                              tie_word_embeddings=True,
                              rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 32.0,
                                               "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                               "original_max_position_embeddings": 8192}),
        "mistral": MistralConfig(**common, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                 num_attention_heads=4, num_key_value_heads=1, head_dim=8, sliding_window=16,
                                 rms_norm_eps=1e-5, tie_word_embeddings=False,
                                 rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}),
        "qwen3-yarn": Qwen3Config(**{**common, "max_position_embeddings": 128}, hidden_size=32,
                                  intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                                  num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-6, tie_word_embeddings=False,
                                  rope_parameters={"rope_type": "yarn", "rope_theta": 1000000.0, "factor": 4.0,
                                                   "original_max_position_embeddings": 32}),
    }


def micro_configs():
    c = configs()
    small = dict(num_hidden_layers=1, intermediate_size=32)
    return {"micro-gemma3": Gemma3TextConfig(**{**c["gemma3"].to_dict(), **small, "layer_types": None}),
            "micro-llama3": LlamaConfig(**{**c["llama3"].to_dict(), **small})}


def make_model(name, cfg, seed):
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(cfg).float().eval()
    with torch.no_grad():  # every tensor distinct, so swapped tensors or rows are caught
        for pname, p in model.named_parameters():
            if pname.endswith("norm.weight"):
                # Gemma stores w for (1 + w), the others w itself: both around their identity
                p.copy_((0.0 if name == "gemma3" else 1.0) + 0.1 * torch.randn_like(p))
            else:
                p.copy_(0.05 * torch.randn_like(p))
    return model


def train_tokenizer(gsm8k, path):
    import sentencepiece as spm

    with tempfile.TemporaryDirectory() as d:
        text = os.path.join(d, "text.txt")
        with open(gsm8k, encoding="utf-8") as f, open(text, "w", encoding="utf-8") as out:
            for i, line in enumerate(f):
                if i == 2000:
                    break
                out.write(json.loads(line)["question"] + "\n")
        spm.SentencePieceTrainer.train(input=text, model_prefix=os.path.join(d, "m"), vocab_size=VOCAB,
                                       model_type="bpe", byte_fallback=True, character_coverage=1.0,
                                       unk_id=3, bos_id=1, eos_id=2, pad_id=0, num_threads=1,
                                       minloglevel=2)
        shutil.copy(os.path.join(d, "m.model"), path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama-cpp", required=True, help="llama.cpp source tree (convert_hf_to_gguf.py, gguf-py)")
    ap.add_argument("--gsm8k", required=True, help="GSM8K train.jsonl, to train the tokenizer")
    a = ap.parse_args()
    convert = os.path.join(a.llama_cpp, "convert_hf_to_gguf.py")
    with tempfile.TemporaryDirectory() as tmp:
        spm_model = os.path.join(tmp, "tokenizer.model")
        train_tokenizer(a.gsm8k, spm_model)
        for seed, (name, cfg) in enumerate(configs().items(), start=11):
            model = make_model(name, cfg, seed)
            hf = os.path.join(tmp, name)
            model.save_pretrained(hf)
            shutil.copy(spm_model, os.path.join(hf, "tokenizer.model"))
            gguf_path = os.path.join(OUT, name + ".gguf")
            subprocess.run([sys.executable, convert, hf, "--outtype", "f32", "--outfile", gguf_path],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            dst = os.path.join(OUT, name)
            shutil.rmtree(dst, ignore_errors=True)
            os.makedirs(dst)
            for f in ("config.json", "model.safetensors"):
                shutil.copyfile(os.path.join(hf, f), os.path.join(dst, f))
            print(f"{name}: {dst}/ and {gguf_path} ({os.path.getsize(gguf_path)} bytes)")
        # Fuzz seeds (FuzzGGUFCheckpoint): one-layer Gemma 3 and Llama 3 (rope_freqs) files, Q8_0
        for name, cfg in micro_configs().items():
            model = make_model(name.split("-")[1], cfg, 99)
            hf = os.path.join(tmp, name)
            model.save_pretrained(hf)
            shutil.copy(spm_model, os.path.join(hf, "tokenizer.model"))
            gguf_path = os.path.join(OUT, name + "-q8_0.gguf")
            subprocess.run([sys.executable, convert, hf, "--outtype", "q8_0", "--outfile", gguf_path],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            print(f"{name}: {gguf_path} ({os.path.getsize(gguf_path)} bytes)")
    with open(os.path.join(OUT, "families-VERSIONS"), "w") as f:
        f.write(f"transformers {transformers.__version__}\ntorch {torch.__version__}\n"
                f"llama.cpp {os.path.basename(os.path.dirname(os.path.dirname(os.path.realpath(a.llama_cpp))))}"
                f" (vendor/llama.cpp)\n")


if __name__ == "__main__":
    main()
