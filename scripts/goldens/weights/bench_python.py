#!/usr/bin/env python3
"""Model-file load/save speed: Go (gpu/weights benchmarks) vs the Python reference packages, in
one run, written to docs/bench/history/model-files.md (the current section, docs/bench/model-files.md, takes the new figures by hand).

Peers doing the same work as the Go benchmarks:
  GGUF load:        gguf.GGUFReader + gguf.quants.dequantize of every tensor to float32 + undoing
                    the llama Q/K row permutation (numpy), i.e. the tensors weights.Load returns.
  GGUF open:        gguf.GGUFReader alone (header, metadata, tensor infos; numpy memmap).
  safetensors save: safetensors.numpy.save_file of the 134.5M-value F32 state dict.
  safetensors load: safetensors.numpy.load_file of that file.

Usage (from the repository root, after `make model`): python3 scripts/goldens/weights/bench_python.py
"""
import os
import platform
import re
import subprocess
import tempfile
import time

import gguf
import numpy as np
from importlib.metadata import version
from safetensors.numpy import load_file, save_file

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SMOL = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
OUT = os.path.join(ROOT, "docs", "bench", "history", "model-files.md")
REPS = 3


def unpermute(w, n_head):
    # inverse of llama.cpp's LlamaModel.permute
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def load_gguf():
    r = gguf.GGUFReader(SMOL)
    nh = int(r.fields["llama.attention.head_count"].contents())
    nkv = int(r.fields["llama.attention.head_count_kv"].contents())
    out = {}
    for t in r.tensors:
        x = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32, copy=False)
        x = x.reshape([int(d) for d in reversed(t.shape)])
        if t.name.endswith("attn_q.weight"):
            x = unpermute(x, nh)
        elif t.name.endswith("attn_k.weight"):
            x = unpermute(x, nkv)
        out[t.name] = np.ascontiguousarray(x)
    return out


def timeit(fn):
    best = float("inf")
    for _ in range(REPS):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def go_bench():
    cmd = ["go", "test", "-run", "^$", "-bench", "SmolLM2", "-benchtime", "1x", "-count", str(REPS), "./gpu/weights/"]
    out = subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True).stdout
    res = {}
    for m in re.finditer(r"^Benchmark(\w+)-\d+\s+\d+\s+(\d+) ns/op", out, re.M):
        res[m.group(1)] = min(res.get(m.group(1), float("inf")), int(m.group(2)) / 1e9)
    return res, " ".join(cmd)


def main():
    if not os.path.exists(SMOL):
        raise SystemExit("models/SmolLM2-135M-Instruct.Q4_1.gguf is missing: run `make model`")
    go, go_cmd = go_bench()
    py = {}
    py["OpenGGUFSmolLM2"] = timeit(lambda: gguf.GGUFReader(SMOL))
    py["LoadGGUFSmolLM2"] = timeit(load_gguf)
    tensors = load_gguf()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "model.safetensors")
        py["SaveSmolLM2"] = timeit(lambda: save_file(tensors, path, metadata={"format": "pt"}))
        py["LoadSafetensorsSmolLM2"] = timeit(lambda: load_file(path))
    rows = [
        ("GGUF open (header, metadata, tensor infos)", "OpenGGUFSmolLM2", "gguf.GGUFReader"),
        ("GGUF load to fp32 (Q4_1/Q8_0 dequant, Q/K un-permute)", "LoadGGUFSmolLM2", "GGUFReader + gguf.quants.dequantize + numpy"),
        ("safetensors save, F32 538 MB", "SaveSmolLM2", "safetensors.numpy.save_file"),
        ("safetensors load, F32 538 MB", "LoadSafetensorsSmolLM2", "safetensors.numpy.load_file"),
    ]
    lines = [
        "## Model files (gpu/gguf, gpu/safetensors, gpu/weights)",
        "",
        f"Command: `python3 scripts/goldens/weights/bench_python.py` (runs `{go_cmd}`, then the Python peers; "
        f"best of {REPS} runs for both). Model: SmolLM2-135M-Instruct.Q4_1.gguf "
        "(98 MB; 210 Q4_1, 1 Q8_0, 61 F32 tensors; 134.5M parameters).",
        "",
        f"Machine: {os.cpu_count()} cores ({platform.processor() or platform.machine()}), shared with other jobs "
        f"(load average {os.getloadavg()[0]:.1f} at the end of the run), gguf {version('gguf')}, "
        f"safetensors {version('safetensors')}, "
        f"numpy {np.__version__}, {platform.python_implementation()} {platform.python_version()}.",
        "",
        "| operation | Go (s) | Python peer | Python (s) | Go speed-up |",
        "|---|---:|---|---:|---:|",
    ]
    for label, key, peer in rows:
        g, p = go.get(key), py[key]
        ratio = f"{p / g:.2f}x" if g else "n/a"
        lines.append(f"| {label} | {g:.3f} | {peer} | {p:.3f} | {ratio} |" if g else f"| {label} | n/a | {peer} | {p:.3f} | n/a |")
    lines += [
        "",
        "Go's GGUF load returns the same tensors as the Python peer (gpu/weights TestSmolLM2 checks them "
        "against transformers' own GGUF loading). safetensors.numpy.load_file reads each tensor into a "
        "numpy array in its Rust core; the Go load maps the file and converts every tensor to []float32 in parallel "
        "over the cores. gguf.GGUFReader builds numpy views for every metadata field (49152 tokens, 48900 merges), "
        "hence its slow open. "
        "Save times are dominated by the kernel writing 538 MB to disk and vary by 3x between runs "
        "on this shared machine.",
        "",
    ]
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
