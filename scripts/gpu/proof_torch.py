"""The PyTorch side of scripts/gpu/proof.sh, on the GPU machine (torch + transformers only).

  proof_torch.py make DIR SHAPE      write a random SHAPE checkpoint (qwen2.5-0.5b or smollm2-135m)
  proof_torch.py bench DIR B T NEW   time a training step (eager, then torch.compile where it works)
                                     and HF generate on the same shapes as `rlhost selftest --bench`;
                                     one JSON line per measurement
  proof_torch.py table OUT FILES...  print (and write to OUT) the table of every JSON line in FILES
"""
import json
import statistics
import sys
import time

SHAPES = {
    # Qwen2.5-0.5B-Instruct: 24 layers, hidden 896, 14 heads, 2 KV heads, FFN 4864, vocab 151936, tied
    "qwen2.5-0.5b": dict(model_type="qwen2", vocab_size=151936, hidden_size=896, intermediate_size=4864,
                         num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2,
                         max_position_embeddings=4096, rope_theta=1e6, rms_norm_eps=1e-6,
                         tie_word_embeddings=True),
    # SmolLM2-135M-Instruct: 30 layers, hidden 576, 9 heads, 3 KV heads, FFN 1536, vocab 49152, tied
    "smollm2-135m": dict(model_type="llama", vocab_size=49152, hidden_size=576, intermediate_size=1536,
                         num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3,
                         max_position_embeddings=4096, rope_theta=100000.0, rms_norm_eps=1e-5,
                         tie_word_embeddings=True),
}

# Peaks for MFU: bf16 as measured with PyTorch on the H100/H200 machines (8192^3 product,
# about 790-800 TFLOP/s); fp32 (no tensor cores) from the datasheet.
PEAK_BF16 = 795e12
PEAK_FP32 = 67e12


def make(out, shape):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    cfg = dict(SHAPES[shape])
    mt = cfg.pop("model_type")
    config = AutoConfig.for_model(mt, **cfg)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, torch_dtype=torch.float32)
    model.save_pretrained(out, safe_serialization=True)
    n = sum(p.numel() for p in model.parameters())
    print(f"proof: {shape}: {n/1e6:.1f}M parameters (random) in {out}", file=sys.stderr)


def bench(path, B, T, new):
    import torch
    from transformers import AutoModelForCausalLM
    dev = "cuda"
    model = AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.float32).to(dev)
    params = sum(p.numel() for p in model.parameters())
    V = model.config.vocab_size
    g = torch.Generator(device="cpu").manual_seed(1)
    tokens = torch.randint(0, V, (B, T), generator=g).to(dev)
    w = torch.full((B, T - 1), 1.0 / (B * T), device=dev)
    name = torch.cuda.get_device_name()

    def train_step(fwd, opt):
        opt.zero_grad(set_to_none=True)
        logits = fwd(tokens).logits[:, :-1].float()
        logp = torch.log_softmax(logits, -1).gather(-1, tokens[:, 1:, None])[..., 0]
        loss = -(logp * w).sum()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    def timed(fwd, label, steps=5):
        opt = torch.optim.AdamW(model.parameters(), lr=1e-6, weight_decay=0.01)
        torch.cuda.reset_peak_memory_stats()
        train_step(fwd, opt)
        torch.cuda.synchronize()
        times = []
        for _ in range(steps):
            t0 = time.perf_counter()
            train_step(fwd, opt)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        s = statistics.median(times)
        print(json.dumps(dict(kind="train", device=f"torch-{label}/{name}", params=params, batch=B, seq=T,
                              seconds=s, tokens=B * T, tokens_per_s=B * T / s, flop=6.0 * params * B * T,
                              peak_device_bytes=torch.cuda.max_memory_allocated())), flush=True)
        del opt

    timed(lambda x: model(input_ids=x), "eager")
    try:
        compiled = torch.compile(model)
        timed(lambda x: compiled(input_ids=x), "compile")
    except Exception as e:  # torch.compile needs a working Triton; say so and go on
        print(f"proof: torch.compile failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}", file=sys.stderr)

    P = max(1, T // 2)
    prompts = torch.randint(0, V, (B, P), generator=g).to(dev)
    with torch.no_grad():
        model.generate(prompts[:1], max_new_tokens=4, min_new_tokens=4, do_sample=False)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        out = model.generate(prompts, attention_mask=torch.ones_like(prompts), max_new_tokens=new,
                             min_new_tokens=new, do_sample=False)
        torch.cuda.synchronize()
        s = time.perf_counter() - t0
    toks = (out.shape[1] - P) * B
    print(json.dumps(dict(kind="decode", device=f"torch-hf-generate/{name}", params=params, batch=B, seq=P + new,
                          seconds=s, tokens=toks, tokens_per_s=toks / s, flop=2.0 * params * toks,
                          peak_device_bytes=torch.cuda.max_memory_allocated())), flush=True)


def table(out, files):
    rows = []
    for f in files:
        shape = f.split("/")[-1].split(".")[0]
        for line in open(f):
            line = line.strip()
            if line.startswith("{"):
                r = json.loads(line)
                r["shape"] = shape
                rows.append(r)
    ref = {}
    for r in rows:
        if r["device"].startswith("torch-eager") or r["device"].startswith("torch-hf-generate"):
            ref[(r["shape"], r["kind"])] = r["tokens_per_s"]
    lines = ["| shape | step | runner | B x T | tokens/s | MFU bf16 | MFU fp32 | peak device MiB | host->device B/step | device->host B/step | syncs/step | x PyTorch |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        fl = r["flop"] / r["seconds"]
        x = r["tokens_per_s"] / ref[(r["shape"], r["kind"])] if (r["shape"], r["kind"]) in ref else float("nan")
        lines.append("| {} | {} | {} | {} x {} | {:.0f} | {:.2%} | {:.2%} | {:.0f} | {} | {} | {} | {:.2f} |".format(
            r["shape"], r["kind"], r["device"], r["batch"], r["seq"], r["tokens_per_s"], fl / PEAK_BF16, fl / PEAK_FP32,
            r.get("peak_device_bytes", 0) / 2**20, r.get("host_to_device_bytes_per_step", "-"),
            r.get("device_to_host_bytes_per_step", "-"), r.get("syncs_per_step", "-"), x))
    lines.append("")
    lines.append(f"MFU: model FLOPs (6 x params x tokens for a training step, 2 x params x tokens decoding) over "
                 f"{PEAK_BF16/1e12:.0f} TFLOP/s bf16 (measured on this machine class) and {PEAK_FP32/1e12:.0f} TFLOP/s fp32 (datasheet).")
    text = "\n".join(lines)
    print(text)
    with open(out, "w") as f:
        f.write(text + "\n")


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "make":
        make(sys.argv[2], sys.argv[3])
    elif cmd == "bench":
        bench(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
    elif cmd == "table":
        table(sys.argv[2], sys.argv[3:])
    else:
        sys.exit(__doc__)
