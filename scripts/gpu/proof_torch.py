"""The PyTorch side of scripts/gpu/proof.sh, on the GPU machine (torch + transformers only).

  proof_torch.py make DIR SHAPE [TOKENIZER_DIR]
                                     write a random SHAPE checkpoint (qwen2.5-0.5b, smollm2-135m,
                                     qwen3-0.6b, llama3.2-1b or gemma3-1b);
                                     with TOKENIZER_DIR, its tokenizer files beside it and their
                                     bos/eos/pad ids in config.json (vocab_size stays SHAPE's)
  proof_torch.py bench DIR B T DB P NEW [DTYPES]
                                     time a training step of B sequences of T tokens (eager with
                                     bf16 autocast and SDPA attention; eager fp32 if DTYPES has
                                     float32; torch.compile bf16 unless PROOF_COMPILE=0) and HF
                                     generate (bf16 weights, SDPA, greedy) of NEW tokens after P
                                     prompt tokens at batch DB and at batch 1, the same shapes as
                                     `rlhost selftest --bench`; one JSON line per measurement
  proof_torch.py paths [--grpo METRICS_JSONL] [--grpo-shape SHAPE] FILES...
                                     print the paths rlhost's steps took (products, attention,
                                     sampling, prefix sharing, the host's share of the time) and,
                                     for each "profile" line (selftest --bench --profile), where
                                     the device time of the phase went: its top 10 ops
  proof_torch.py table OUT [--grpo METRICS_JSONL] [--grpo-shape SHAPE] FILES...
                                     print (and write to OUT) the table of every JSON line in
                                     FILES but the profiles and the goals of issue 20 (met / not met)
"""
import json
import os
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
    # The families of issue 38 (PROOF_MODEL), their checkpoints' config.json values:
    # Qwen3-0.6B: 28 layers, hidden 1024, 16 heads of 128 (head_dim != hidden/heads), 8 KV heads,
    # FFN 3072, vocab 151936, QK-norm, tied
    "qwen3-0.6b": dict(model_type="qwen3", vocab_size=151936, hidden_size=1024, intermediate_size=3072,
                       num_hidden_layers=28, num_attention_heads=16, num_key_value_heads=8, head_dim=128,
                       max_position_embeddings=40960, rope_theta=1e6, rms_norm_eps=1e-6,
                       tie_word_embeddings=True),
    # Llama-3.2-1B: 16 layers, hidden 2048, 32 heads of 64, 8 KV heads, FFN 8192, vocab 128256,
    # llama3 RoPE (factor 32 over 8192 positions), tied
    "llama3.2-1b": dict(model_type="llama", vocab_size=128256, hidden_size=2048, intermediate_size=8192,
                        num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8, head_dim=64,
                        max_position_embeddings=131072, rope_theta=500000.0, rms_norm_eps=1e-5,
                        tie_word_embeddings=True,
                        rope=dict(rope_type="llama3", factor=32.0, low_freq_factor=1.0, high_freq_factor=4.0,
                                  original_max_position_embeddings=8192)),
    # Gemma-3-1B (gemma3_text): 26 layers, hidden 1152, 4 heads of 256, 1 KV head, FFN 6912 (GeGLU,
    # tanh GELU), vocab 262144, five sliding-window layers (512) to one global, RoPE bases 1e6
    # (global) and 1e4 (local), query_pre_attn_scalar 256, tied
    "gemma3-1b": dict(model_type="gemma3_text", vocab_size=262144, hidden_size=1152, intermediate_size=6912,
                      num_hidden_layers=26, num_attention_heads=4, num_key_value_heads=1, head_dim=256,
                      max_position_embeddings=32768, rope_theta=1e6, rms_norm_eps=1e-6, sliding_window=512,
                      query_pre_attn_scalar=256, hidden_activation="gelu_pytorch_tanh", tie_word_embeddings=True,
                      local_rope_theta=10000.0, sliding_pattern=6),
}


def shape_config(shape, major):
    """model_type and the transformers config keyword arguments of SHAPE for a transformers of
    major version `major`: RoPE scaling as rope_parameters from 5 on (rope_scaling before), Gemma's
    layer pattern as layer_types and its two RoPE bases per layer type (rope_local_base_freq and
    sliding_window_pattern before 5), as its checkpoints' config.json has them."""
    cfg = dict(SHAPES[shape])
    mt = cfg.pop("model_type")
    rope = cfg.pop("rope", None)
    local = cfg.pop("local_rope_theta", None)
    pattern = cfg.pop("sliding_pattern", None)
    if pattern:
        n = cfg["num_hidden_layers"]
        cfg["layer_types"] = ["full_attention" if (i + 1) % pattern == 0 else "sliding_attention" for i in range(n)]
    if major >= 5:
        theta = cfg.pop("rope_theta")
        if local is not None:
            cfg["rope_parameters"] = {"full_attention": {"rope_type": "default", "rope_theta": theta},
                                      "sliding_attention": {"rope_type": "default", "rope_theta": local}}
        elif rope:
            cfg["rope_parameters"] = dict(rope, rope_theta=theta)
        else:
            cfg["rope_theta"] = theta
    else:
        if rope:
            cfg["rope_scaling"] = dict(rope)
        if local is not None:
            cfg["rope_local_base_freq"] = local
            cfg["sliding_window_pattern"] = pattern
    return mt, cfg

# Peaks for MFU: bf16 as measured with PyTorch on the H100/H200 machines (8192^3 product,
# about 790-800 TFLOP/s); fp32 (no tensor cores) from the datasheet.
PEAK_BF16 = 795e12
PEAK_FP32 = 67e12


def token_ids(tokdir):
    """bos/eos/pad ids of the tokenizer files in tokdir (tokenizer_config.json's tokens, looked up
    in tokenizer.json's added tokens and vocabulary), as config.json keys; unset tokens are left out."""
    with open(os.path.join(tokdir, "tokenizer_config.json")) as f:
        tc = json.load(f)
    with open(os.path.join(tokdir, "tokenizer.json")) as f:
        tj = json.load(f)
    ids = dict(tj.get("model", {}).get("vocab", {}))
    ids.update({a["content"]: a["id"] for a in tj.get("added_tokens", [])})
    out = {}
    for key in ("bos", "eos", "pad"):
        tok = tc.get(f"{key}_token")
        if isinstance(tok, dict):
            tok = tok.get("content")
        if not tok:
            continue
        if tok not in ids:
            raise SystemExit(f"proof: {tokdir}/tokenizer_config.json: {key}_token {tok!r} is not in tokenizer.json")
        out[f"{key}_token_id"] = ids[tok]
    return out


def make(out, shape, tokdir=None):
    """A random SHAPE checkpoint in out. With tokdir, its tokenizer files are copied beside the
    weights and its bos/eos/pad ids become config.json's, as in a real checkpoint; the model's
    vocab_size stays SHAPE's, which may exceed the tokenizer's ids (Qwen2.5's does too)."""
    import shutil
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    import transformers
    mt, cfg = shape_config(shape, int(transformers.__version__.split(".")[0]))
    if tokdir:
        cfg.update(token_ids(tokdir))
    config = AutoConfig.for_model(mt, **cfg)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, torch_dtype=torch.float32)
    model.save_pretrained(out, safe_serialization=True)
    if tokdir:
        for f in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(os.path.join(tokdir, f), out)
    n = sum(p.numel() for p in model.parameters())
    print(f"proof: {shape}: {n/1e6:.1f}M parameters (random) in {out}", file=sys.stderr)


def train_flop(params, layers, q_dim, B, T):
    """Model FLOPs of a training step: 6 x params x tokens, plus causal attention forward and
    backward (QK^T and PV, half the T x T pairs: 6 x L x NH*HD x T per token), as rlhost's
    selftest --bench counts them."""
    return 6.0 * params * B * T + 6.0 * layers * q_dim * T * B * T


def bench(path, B, T, DB, P, new, dtypes):
    import torch
    from transformers import AutoModelForCausalLM
    dev = "cuda"
    model = AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.float32, attn_implementation="sdpa").to(dev)
    cfg = model.config
    params = sum(p.numel() for p in model.parameters())
    V = cfg.vocab_size
    q_dim = cfg.num_attention_heads * (getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads)
    flop = train_flop(params, cfg.num_hidden_layers, q_dim, B, T)
    g = torch.Generator(device="cpu").manual_seed(1)
    tokens = torch.randint(0, V, (B, T), generator=g).to(dev)
    w = torch.full((B, T - 1), 1.0 / (B * T), device=dev)
    name = torch.cuda.get_device_name()

    def train_step(fwd, opt, bf16):
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
            logits = fwd(tokens).logits[:, :-1]
        logp = torch.log_softmax(logits.float(), -1).gather(-1, tokens[:, 1:, None])[..., 0]
        loss = -(logp * w).sum()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    def timed(fwd, label, bf16, steps=5):
        opt = torch.optim.AdamW(model.parameters(), lr=1e-6, weight_decay=0.01)
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        train_step(fwd, opt, bf16)
        torch.cuda.synchronize()
        times = []
        for _ in range(steps):
            t0 = time.perf_counter()
            train_step(fwd, opt, bf16)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        s = statistics.median(times)
        print(json.dumps(dict(kind="train", device=f"torch-{label}/{name}", params=params, batch=B, seq=T,
                              seconds=s, tokens=B * T, tokens_per_s=B * T / s, flop=flop, vocab=V,
                              dtype="bfloat16" if bf16 else "float32", attention="SDPA (B x T, causal)",
                              peak_device_bytes=torch.cuda.max_memory_reserved(),
                              peak_allocated_bytes=torch.cuda.max_memory_allocated())), flush=True)
        del opt

    timed(lambda x: model(input_ids=x), "eager-bf16", True)
    if "float32" in dtypes:
        timed(lambda x: model(input_ids=x), "eager-fp32", False)
    if os.environ.get("PROOF_COMPILE", "1") != "0":
        try:
            compiled = torch.compile(model)
            timed(lambda x: compiled(input_ids=x), "compile-bf16", True)
        except Exception as e:  # torch.compile needs a working Triton; say so and go on
            print(f"proof: torch.compile failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}", file=sys.stderr)
    for p in model.parameters():
        p.grad = None

    # HF generate in bf16 (the weights cast once), greedy, every sequence NEW tokens
    model = model.to(torch.bfloat16)
    torch.cuda.empty_cache()
    for b in ([DB, 1] if DB != 1 else [1]):
        prompts = torch.randint(0, V, (b, P), generator=g).to(dev)
        with torch.no_grad():
            model.generate(prompts[:1], max_new_tokens=4, min_new_tokens=4, do_sample=False)
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            t0 = time.perf_counter()
            out = model.generate(prompts, attention_mask=torch.ones_like(prompts), max_new_tokens=new,
                                 min_new_tokens=new, do_sample=False)
            torch.cuda.synchronize()
            s = time.perf_counter() - t0
        toks = (out.shape[1] - P) * b
        print(json.dumps(dict(kind="decode", device=f"torch-hf-generate-bf16/{name}", params=params, batch=b,
                              seq=P + new, prompt=P, seconds=s, tokens=toks, tokens_per_s=toks / s,
                              per_token_latency_s=s / new, flop=2.0 * params * toks, vocab=V, dtype="bfloat16",
                              peak_device_bytes=torch.cuda.max_memory_reserved(),
                              peak_allocated_bytes=torch.cuda.max_memory_allocated())), flush=True)


# The goals of issue 20, for the Qwen2.5-0.5B shape: (what, the measured value, met).
GOAL_SHAPE = "qwen2.5-0.5b"


def is_rlhost(r):
    return r["device"].startswith("cuda/")


def read_rows(files, kind=None):
    """The measurements of files (kind None: every line but the profiles; "profile": only those)."""
    rows = []
    for f in files:
        shape = f.split("/")[-1].removesuffix(".jsonl")  # qwen2.5-0.5b.jsonl: the name has dots
        for line in open(f):
            line = line.strip()
            if line.startswith("{"):
                r = json.loads(line)
                if (r.get("kind") == "profile") != (kind == "profile"):
                    continue
                r["shape"] = shape
                rows.append(r)
    return rows


PROFILE_TOP = 10


def profile_lines(r, top=PROFILE_TOP):
    """The lines of one profile (rlhost selftest --bench --profile): the phase's device time, its
    split between kernels, cuBLAS and copies, and its top ops."""
    dtype = r["device"].rsplit("/", 1)[-1]
    who = f"{r['shape']} profile {r['phase']} {dtype} batch {r['batch']}"
    if r.get("error"):
        return [f"{who}: FAILED: {r['error']}"]
    by_kind = {}
    for e in r["entries"]:
        by_kind[e["kind"]] = by_kind.get(e["kind"], 0.0) + e["share"]
    split = ", ".join(f"{k} {v:.1%}" for k, v in sorted(by_kind.items(), key=lambda kv: -kv[1]))
    out = [f"{who}: {r['device_ms']:.1f} ms on the device in a {r['wall_ms']:.1f} ms step ({split}); "
           f"top {min(top, len(r['entries']))} of {len(r['entries'])} ops:"]
    for e in r["entries"][:top]:
        out.append(f"  {e['share']:6.1%} {e['ms']:10.3f} ms {e['calls']:7d} x {e['mean_us']:9.1f} us  {e['op']}")
    return out


def grpo_host_frac(path):
    """Time-weighted perf/host_frac of a run's metrics.jsonl: sum(step x frac) / sum(step);
    None when the run logged none (not on cuda, or no step finished)."""
    num = den = 0.0
    n = 0
    for line in open(path):
        line = line.strip()
        if not line:
            continue
        d = json.loads(line).get("data", {})
        if "perf/host_frac" in d and "timing_s/step" in d:
            num += float(d["perf/host_frac"]) * float(d["timing_s/step"])
            den += float(d["timing_s/step"])
            n += 1
    return (num / den, n) if den > 0 else (None, 0)


def status(ok):
    return "not measured" if ok is None else ("met" if ok else "NOT met")


def goals(rows, grpo, grpo_shape=None):
    """The rows of the goals table: (goal, measured, status)."""

    def one(pred):
        m = [r for r in rows if r["shape"] == GOAL_SHAPE and pred(r)]
        return m[0] if m else None
    ours_t = one(lambda r: is_rlhost(r) and r["kind"] == "train" and r.get("dtype") == "bfloat16")
    ref_t = one(lambda r: r["kind"] == "train" and r["device"].startswith("torch-eager-bf16"))
    out = []
    if ours_t and ref_t:
        x = ours_t["tokens_per_s"] / ref_t["tokens_per_s"]
        out.append(("training step tokens/s >= 1.2x PyTorch eager (bf16 autocast, SDPA), same B x T",
                    f"{x:.2f}x ({ours_t['tokens_per_s']:.0f} vs {ref_t['tokens_per_s']:.0f} tokens/s, "
                    f"B x T {ours_t['batch']} x {ours_t['seq']})", x >= 1.2))
    else:
        out.append(("training step tokens/s >= 1.2x PyTorch eager (bf16 autocast, SDPA), same B x T", "-", None))
    if ours_t:
        mfu = ours_t["flop"] / ours_t["seconds"] / PEAK_BF16
        out.append((f"training step MFU >= 45% of bf16 peak ({PEAK_BF16/1e12:.0f} TFLOP/s)", f"{mfu:.1%}", mfu >= 0.45))
    else:
        out.append((f"training step MFU >= 45% of bf16 peak ({PEAK_BF16/1e12:.0f} TFLOP/s)", "-", None))
    if ours_t and ref_t and ours_t.get("peak_device_bytes") and ref_t.get("peak_device_bytes"):
        a, b = ours_t["peak_device_bytes"], ref_t["peak_device_bytes"]
        out.append(("peak device memory of the step <= PyTorch's (rlhost: taken from the driver; PyTorch: max_memory_reserved)",
                    f"{a/2**20:.0f} vs {b/2**20:.0f} MiB", a <= b))
    else:
        out.append(("peak device memory of the step <= PyTorch's", "-", None))
    ours_d = [r for r in rows if r["shape"] == GOAL_SHAPE and is_rlhost(r) and r["kind"] == "decode" and r.get("dtype") == "bfloat16"]
    hf_d = [r for r in rows if r["shape"] == GOAL_SHAPE and r["device"].startswith("torch-hf-generate") and r["kind"] == "decode"]
    big = [(o, h) for o in ours_d for h in hf_d if o["batch"] == h["batch"] > 1 and o["seq"] == h["seq"] and o.get("prompt") == h.get("prompt")]
    what = "decode tokens/s >= 3x HF generate, batch 64, 512 new tokens"
    if big:
        o, h = big[0]
        x = o["tokens_per_s"] / h["tokens_per_s"]
        shape_ok = o["batch"] == 64 and o["seq"] - o.get("prompt", 0) == 512
        note = "" if shape_ok else " (NOT the goal's shape)"
        out.append((what, f"{x:.2f}x ({o['tokens_per_s']:.0f} vs {h['tokens_per_s']:.0f} tokens/s, batch {o['batch']}, "
                          f"{o['seq'] - o.get('prompt', 0)} new){note}", (x >= 3) if shape_ok else None))
    else:
        out.append((what, "-", None))
    one_b = [(o, h) for o in ours_d for h in hf_d if o["batch"] == h["batch"] == 1 and o["seq"] == h["seq"]]
    what = "batch-1 latency per token <= HF generate's"
    if one_b and one_b[0][0].get("per_token_latency_s") and one_b[0][1].get("per_token_latency_s"):
        o, h = one_b[0]
        a, b = o["per_token_latency_s"], h["per_token_latency_s"]
        out.append((what, f"{a*1e3:.2f} vs {b*1e3:.2f} ms", a <= b))
    else:
        out.append((what, "-", None))
    what = "3-step GRPO `rlhost train`: host time between kernels < 5% (perf/host_frac, an upper bound)"
    frac, n = grpo if grpo else (None, 0)
    on = f", {grpo_shape} shape" if grpo_shape else ""
    if frac is None:
        out.append((what, "-", None))
    else:
        out.append((what, f"{frac:.1%} of {n} steps' wall time{on}", frac < 0.05))
    return out


GRPO_KEYS = [("timing_s/step", "s"), ("perf/host_frac", "host not waiting on the device"),
             ("perf/device_wait_s", "s waiting"), ("perf/queue_waits", "queue waits"),
             ("perf/download_waits", "download waits"), ("perf/upload_s", "s in uploads"),
             ("perf/enqueue_s", "s queueing (launches, products)"), ("perf/device_allocs", "allocations"),
             ("perf/alloc_s", "s allocating"), ("perf/device_syncs", "syncs"),
             ("perf/host_to_device_bytes", "B up"),
             ("perf/device_to_host_bytes", "B down"), ("rollout/prefill_tokens", "prompt tokens prefilled"),
             ("rollout/prefix_shared_tokens", "shared"),
             ("perf/update_padding_frac", "update padding (packed micro-batches: AttentionVarlen)"),
             # the step's phases (docs/gpu.md, "The GRPO step's host time"): which one holds the host time
             ("timing_s/gen", "s generating"), ("timing_s/reward", "s reward"),
             ("timing_s/old_log_prob", "s old log-probs"), ("timing_s/update_actor", "s updating"),
             ("perf/gen_host_frac", "host not waiting in the rollout"),
             ("perf/update_host_frac", "host not waiting in the update"),
             ("perf/update_enqueue_s", "s queueing in the update")]


def paths(files, grpo_metrics=None):
    """The paths of issue 20 that rlhost's measured steps took, one line each."""
    lines = []
    for r in read_rows(files):
        if not is_rlhost(r):
            continue
        who = f"{r['shape']} {r['kind']} {r.get('dtype', '?')} batch {r['batch']}"
        if r.get("products"):
            lines.append(f"{who} products: {r['products']}")
        if r.get("attention"):
            lines.append(f"{who} attention: {r['attention']}")
        if r["kind"].startswith("decode"):
            logits = 4 * r.get("vocab", 0) * r["batch"]
            down = r.get("device_to_host_bytes_per_step")
            where = "-" if down is None else ("on the device" if down < logits else "ON THE HOST")
            lines.append(f"{who} sampling: {down if down is not None else '-'} B down per forward "
                         f"({r['batch']} rows of logits would be {logits} B): {where}")
        if r.get("shared_tokens") is not None:
            lines.append(f"{who} prefix sharing: {r['prefill_tokens']} prompt tokens prefilled, "
                         f"{r['shared_tokens']} copied from a slot with the same prompt")
        if r.get("host_frac") is not None:
            lines.append(f"{who} host not waiting on the device: {r['host_frac']:.1%} of the wall time")
    for r in read_rows(files, "profile"):
        lines += profile_lines(r)
    if grpo_metrics:
        for line in open(grpo_metrics):
            if not line.strip():
                continue
            d = json.loads(line)
            v = d.get("data", {})
            lines.append(f"GRPO step {d.get('step')}: " + ", ".join(
                ("%.4g" % v[k] if k in v else "-") + " " + what for k, what in GRPO_KEYS))
    print("\n".join(lines))
    return lines


def table(out, files, grpo_metrics=None, grpo_shape=None):
    rows = read_rows(files)
    ref = {}
    for r in rows:
        if r["device"].startswith("torch-eager-bf16") or r["device"].startswith("torch-hf-generate"):
            ref.setdefault((r["shape"], r["kind"], r["batch"]), r["tokens_per_s"])

    def cell(v, fmt):
        return "-" if v is None else fmt.format(v)
    def syncs(r):
        # rlhost's decode waits for each forward's samples alone (overlap scheduling)
        s = r.get("syncs_per_step", 0 if "host_frac" in r else "-")
        w = r.get("download_waits_per_step")
        return f"{s} + {w:g} waits" if w else s
    lines = ["| shape | step | runner | B x T (prompt) | tokens/s | ms/token (one sequence) | MFU bf16 | MFU fp32 | peak device MiB | host->device B/step | device->host B/step | syncs/step | host not waiting | x PyTorch |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        fl = r["flop"] / r["seconds"]
        key = (r["shape"], "decode" if r["kind"] == "decode-grpo" else r["kind"], r["batch"])
        x = r["tokens_per_s"] / ref[key] if key in ref else None
        bt = f"{r['batch']} x {r['seq']}" + (f" ({r['prompt']})" if r.get("prompt") else "")
        lat = r.get("per_token_latency_s")
        lines.append("| {} | {} | {} | {} | {:.0f} | {} | {:.2%} | {:.2%} | {} | {} | {} | {} | {} | {} |".format(
            r["shape"], r["kind"], r["device"], bt, r["tokens_per_s"], cell(lat and lat * 1e3, "{:.2f}"),
            fl / PEAK_BF16, fl / PEAK_FP32, cell(r.get("peak_device_bytes") and r["peak_device_bytes"] / 2**20, "{:.0f}"),
            r.get("host_to_device_bytes_per_step", "-"), r.get("device_to_host_bytes_per_step", "-"),
            syncs(r), cell(r.get("host_frac"), "{:.1%}"), cell(x, "{:.2f}")))
    lines.append("")
    lines.append(f"MFU: model FLOPs (training: 6 x params x tokens + 6 x layers x NH*HD x T x tokens for causal attention; "
                 f"decoding: 2 x params x tokens) over {PEAK_BF16/1e12:.0f} TFLOP/s bf16 (measured on this machine class) "
                 f"and {PEAK_FP32/1e12:.0f} TFLOP/s fp32 (datasheet). ms/token: a decode's time over its new tokens, "
                 "prefill included. Peak device memory: rlhost, what its backend took from the driver (cuMemGetInfo; "
                 "decode lines include the training state); PyTorch, max_memory_reserved. host not waiting: 1 - the "
                 "host's time blocked on the device / wall time, an upper bound on the GPU's idle share. "
                 "x PyTorch: over PyTorch eager bf16 (training) or HF generate at the same batch (decoding).")
    lines.append("")
    lines.append(f"Goals (issue 20; {GOAL_SHAPE} shape):")
    lines.append("")
    lines.append("| goal | measured | status |")
    lines.append("| --- | --- | --- |")
    g = grpo_host_frac(grpo_metrics) if grpo_metrics else None
    for what, val, ok in goals(rows, g, grpo_shape):
        lines.append(f"| {what} | {val} | {status(ok)} |")
    text = "\n".join(lines)
    print(text)
    with open(out, "w") as f:
        f.write(text + "\n")


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "make":
        make(sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else None)
    elif cmd == "bench":
        bench(sys.argv[2], *(int(a) for a in sys.argv[3:8]), sys.argv[8:] or ["bfloat16"])
    elif cmd in ("table", "paths"):
        args = sys.argv[3:] if cmd == "table" else sys.argv[2:]
        opts = {}
        while args[:1] in (["--grpo"], ["--grpo-shape"]):
            opts[args[0]], args = args[1], args[2:]
        grpo = opts.get("--grpo")
        if cmd == "table":
            table(sys.argv[2], args, grpo, opts.get("--grpo-shape"))
        else:
            paths(args, grpo)
    else:
        sys.exit(__doc__)
