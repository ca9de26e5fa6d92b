"""Tests of the proof's table (proof_torch.py table) and of recording it in docs/bench/cuda.md
(record_bench.py), on fixture measurements: `make test-gpu-proof` (pytest; no torch needed)."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).parent
sys.path.insert(0, str(HERE))
import proof_torch  # noqa: E402
import record_bench  # noqa: E402

QWEN_PARAMS = 494032768


def row(kind, device, tps, B, T, secs=None, **kw):
    tokens = kw.pop("tokens", B * T)
    r = dict(kind=kind, device=device, params=QWEN_PARAMS, batch=B, seq=T, tokens=tokens, tokens_per_s=tps,
             seconds=secs or tokens / tps, vocab=151936, **kw)
    r.setdefault("flop", proof_torch.train_flop(QWEN_PARAMS, 24, 896, B, T) if kind == "train" else 2.0 * QWEN_PARAMS * tokens)
    return r


def fixture(tmp_path, ours_train=60000.0, ours_peak=20 << 30, ours_dec=9000.0, ours_lat=0.004, rows_extra=()):
    """A proof's qwen2.5-0.5b.jsonl: rlhost bf16 and the PyTorch references at the goal shapes."""
    rows = [
        row("train", "cuda/NVIDIA H100 80GB HBM3/sm_90/bfloat16", ours_train, 8, 1024, dtype="bfloat16",
            peak_device_bytes=ours_peak, host_to_device_bytes_per_step=131072, device_to_host_bytes_per_step=65544,
            syncs_per_step=3, host_frac=0.02),
        row("train", "torch-eager-bf16/NVIDIA H100 80GB HBM3", 40000.0, 8, 1024, dtype="bfloat16",
            peak_device_bytes=24 << 30, peak_allocated_bytes=22 << 30),
        row("decode", "cuda/NVIDIA H100 80GB HBM3/sm_90/bfloat16", ours_dec, 64, 640, prompt=128, tokens=64 * 512,
            per_token_latency_s=64 * 512 / ours_dec / 512, dtype="bfloat16"),
        row("decode", "cuda/NVIDIA H100 80GB HBM3/sm_90/bfloat16", 1 / ours_lat, 1, 640, prompt=128, tokens=512,
            per_token_latency_s=ours_lat, dtype="bfloat16"),
        row("decode", "torch-hf-generate-bf16/NVIDIA H100 80GB HBM3", 2500.0, 64, 640, prompt=128, tokens=64 * 512,
            per_token_latency_s=64 * 512 / 2500.0 / 512, dtype="bfloat16"),
        row("decode", "torch-hf-generate-bf16/NVIDIA H100 80GB HBM3", 50.0, 1, 640, prompt=128, tokens=512,
            per_token_latency_s=0.02, dtype="bfloat16"),
    ] + list(rows_extra)
    f = tmp_path / "qwen2.5-0.5b.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return f


def metrics(tmp_path, steps):
    f = tmp_path / "metrics.jsonl"
    f.write_text("".join(json.dumps(dict(step=i + 1, data=d)) + "\n" for i, d in enumerate(steps)))
    return f


class Goals(dict):
    """The goals table of a proof table: goal -> (measured, status), looked up by the goal's start."""

    def __init__(self, text):
        super().__init__()
        seen = False
        for line in text.splitlines():
            if line.startswith("| goal |"):
                seen = True
                continue
            if seen and line.startswith("| ") and not line.startswith("| ---"):
                cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
                self[cells[0]] = (cells[1], cells[2])

    def __getitem__(self, prefix):
        m = [v for k, v in self.items() if k.startswith(prefix)]
        assert len(m) == 1, (prefix, list(self))
        return m[0]


goal_table = Goals


def test_goals_met(tmp_path):
    m = metrics(tmp_path, [{"perf/host_frac": 0.03, "timing_s/step": 10.0}, {"perf/host_frac": 0.01, "timing_s/step": 30.0}])
    out = tmp_path / "table.md"
    proof_torch.table(str(out), [str(fixture(tmp_path))], str(m))
    g = goal_table(out.read_text())
    assert len(g) == 6
    assert g["training step tokens/s"][0].startswith("1.50x (60000 vs 40000 tokens/s, B x T 8 x 1024)")
    assert g["training step tokens/s"][1] == "met"
    # 60000 tokens/s of 8 x 1024: 6 x 494M x 60000 + attention 6 x 24 x 896 x 1024 x 60000 = 185.8 TFLOP/s
    assert g["training step MFU"] == ("23.4%", "NOT met")
    assert g["peak device"] == ("20480 vs 24576 MiB", "met")
    assert g["decode tokens/s"][0].startswith("3.60x (9000 vs 2500 tokens/s, batch 64, 512 new)")
    assert g["decode tokens/s"][1] == "met"
    assert g["batch-1 latency"] == ("4.00 vs 20.00 ms", "met")
    # time-weighted: (0.03 x 10 + 0.01 x 30) / 40 = 1.5%
    assert g["3-step GRPO"] == ("1.5% of 2 steps' wall time", "met")


def test_goals_not_met(tmp_path):
    m = metrics(tmp_path, [{"perf/host_frac": 0.2, "timing_s/step": 1.0}])
    out = tmp_path / "table.md"
    proof_torch.table(str(out), [str(fixture(tmp_path, ours_train=41000.0, ours_peak=30 << 30, ours_dec=7000.0,
                                              ours_lat=0.03))], str(m))
    g = goal_table(out.read_text())
    assert g["training step tokens/s"][1] == "NOT met" and g["training step tokens/s"][0].startswith("1.02x")
    assert g["peak device"][1] == "NOT met"
    assert g["decode tokens/s"][1] == "NOT met"
    assert g["batch-1 latency"] == ("30.00 vs 20.00 ms", "NOT met")
    assert g["3-step GRPO"][1] == "NOT met"


def test_goals_not_measured(tmp_path):
    # only the PyTorch rows, the decode at another shape, a run that logged no host_frac (the CPU)
    f = tmp_path / "qwen2.5-0.5b.jsonl"
    rows = [row("train", "torch-eager-bf16/H100", 40000.0, 8, 1024, dtype="bfloat16"),
            row("decode", "cuda/H100/sm_90/bfloat16", 9000.0, 4, 320, prompt=128, tokens=4 * 192, dtype="bfloat16"),
            row("decode", "torch-hf-generate-bf16/H100", 2500.0, 4, 320, prompt=128, tokens=4 * 192, dtype="bfloat16")]
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    m = metrics(tmp_path, [{"timing_s/step": 3.0}])
    out = tmp_path / "table.md"
    proof_torch.table(str(out), [str(f)], str(m))
    g = goal_table(out.read_text())
    for k in ["training step tokens/s", "training step MFU", "peak device", "batch-1 latency", "3-step GRPO"]:
        assert g[k][1] == "not measured", k
    assert g["decode tokens/s"][1] == "not measured"
    assert "NOT the goal's shape" in g["decode tokens/s"][0]
    assert [v[1] for v in g.values()] == ["not measured"] * 6


def cells(line):
    return [c.strip() for c in line.strip().strip("|").split(" | ")]


def test_measurement_rows(tmp_path):
    grpo = row("decode-grpo", "cuda/H100/sm_90/bfloat16", 8000.0, 64, 640, prompt=128, tokens=64 * 512,
               per_token_latency_s=0.008, dtype="bfloat16", prefill_tokens=1080, shared_tokens=7112)
    out = tmp_path / "table.md"
    proof_torch.table(str(out), [str(fixture(tmp_path, rows_extra=[grpo]))])
    lines = [l for l in out.read_text().splitlines() if l.startswith("| qwen2.5-0.5b |")]
    assert len(lines) == 7
    ours = cells([l for l in lines if "| train | cuda/" in l][0])
    assert ours[3] == "8 x 1024" and ours[4] == "60000" and ours[8] == "20480" and ours[11] == "3"
    assert ours[12] == "2.0%" and ours[13] == "1.50"
    hf1 = cells([l for l in lines if "torch-hf-generate" in l and "| 1 x 640 (128) |" in l][0])
    assert hf1[5] == "20.00" and hf1[13] == "1.00"
    g = cells([l for l in lines if "decode-grpo" in l][0])
    assert g[13] == "3.20"  # over HF generate at batch 64


def test_table_cli(tmp_path):
    out = tmp_path / "t.md"
    m = metrics(tmp_path, [{"perf/host_frac": 0.04, "timing_s/step": 2.0}])
    p = subprocess.run([sys.executable, str(HERE / "proof_torch.py"), "table", str(out), "--grpo", str(m),
                        "--grpo-shape", "smollm2-135m", str(fixture(tmp_path))], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert out.read_text() == p.stdout
    assert "| 4.0% of 1 steps' wall time, smollm2-135m shape | met |" in p.stdout
    p = subprocess.run([sys.executable, str(HERE / "proof_torch.py"), "paths", "--grpo", str(m), "--grpo-shape", "x",
                        str(fixture(tmp_path))], capture_output=True, text=True)
    assert p.returncode == 0 and "\nGRPO step 1: 2 s, 0.04 host not waiting" in p.stdout, (p.stdout, p.stderr)


# a profile line of `rlhost selftest --bench --profile` (made-up figures)
PROFILE_TRAIN = dict(kind="profile", phase="train", device="cuda/H100/sm_90/bfloat16", batch=8, seq=1024, wall_ms=650.0,
                     device_ms=600.0, entries=[
                         dict(op="flash_attention_backward_dkv", kind="kernel", calls=24, ms=360.0, mean_us=15000.0, share=0.6),
                         dict(op="cublasGemmEx bf16->f32 NT 896x8192x4864", kind="cublas", calls=168, ms=174.0,
                              mean_us=1035.7, share=0.29),
                         dict(op="rope_qk", kind="kernel", calls=24, ms=60.0, mean_us=2500.0, share=0.1),
                         dict(op="memcpy HtoD", kind="copy", calls=3, ms=6.0, mean_us=2000.0, share=0.01)])


def test_paths(tmp_path):
    ours = dict(device="cuda/H100/sm_90/bfloat16", dtype="bfloat16", products="cublasGemmEx, CUDA_R_16BF operands")
    extra = [
        row("train", attention="AttentionVarlenForward/Backward (8 packed sequences of 1024, no T x T scores)",
            tps=60000.0, B=8, T=1024, host_frac=0.02, **{k: v for k, v in ours.items()}),
        row("decode-grpo", tps=8000.0, B=64, T=640, prompt=128, tokens=64 * 512, device_to_host_bytes_per_step=512,
            prefill_tokens=1080, shared_tokens=7112, **{k: v for k, v in ours.items() if k != "products"}),
        row("decode", tps=900.0, B=1, T=640, prompt=128, tokens=512, device_to_host_bytes_per_step=607744,
            **{k: v for k, v in ours.items() if k != "products"}),
    ]
    f = tmp_path / "qwen2.5-0.5b.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in extra) + json.dumps(row("train", "torch-eager-bf16/H100", 1.0, 8, 1024)) + "\n"
                 + json.dumps(PROFILE_TRAIN) + "\n")
    m = metrics(tmp_path, [{"timing_s/step": 2.5, "perf/host_frac": 0.031, "perf/upload_s": 0.012, "rollout/prefix_shared_tokens": 300,
                            "timing_s/gen": 1.9, "perf/gen_host_frac": 0.25}])
    lines = proof_torch.paths([str(f)], str(m))
    want = [
        "qwen2.5-0.5b train bfloat16 batch 8 products: cublasGemmEx, CUDA_R_16BF operands",
        "qwen2.5-0.5b train bfloat16 batch 8 attention: AttentionVarlenForward/Backward (8 packed sequences of 1024, no T x T scores)",
        "qwen2.5-0.5b train bfloat16 batch 8 host not waiting on the device: 2.0% of the wall time",
        "qwen2.5-0.5b decode-grpo bfloat16 batch 64 sampling: 512 B down per forward (64 rows of logits would be 38895616 B): on the device",
        "qwen2.5-0.5b decode-grpo bfloat16 batch 64 prefix sharing: 1080 prompt tokens prefilled, 7112 copied from a slot with the same prompt",
        "qwen2.5-0.5b decode bfloat16 batch 1 sampling: 607744 B down per forward (1 rows of logits would be 607744 B): ON THE HOST",
        "qwen2.5-0.5b profile train bfloat16 batch 8: 600.0 ms on the device in a 650.0 ms step (kernel 70.0%, cublas 29.0%, copy 1.0%); "
        "top 4 of 4 ops:",
        "   60.0%    360.000 ms      24 x   15000.0 us  flash_attention_backward_dkv",
        "   29.0%    174.000 ms     168 x    1035.7 us  cublasGemmEx bf16->f32 NT 896x8192x4864",
        "   10.0%     60.000 ms      24 x    2500.0 us  rope_qk",
        "    1.0%      6.000 ms       3 x    2000.0 us  memcpy HtoD",
        "GRPO step 1: 2.5 s, 0.031 host not waiting on the device, - s waiting, - queue waits, - download waits, 0.012 s in uploads, - s queueing (launches, products), "
        "- allocations, - s allocating, - syncs, - B up, - B down, "
        "- prompt tokens prefilled, 300 shared, - update padding (packed micro-batches: AttentionVarlen), "
        "1.9 s generating, - s reward, - s old log-probs, - s updating, 0.25 host not waiting in the rollout, "
        "- host not waiting in the update, - s queueing in the update",
    ]
    assert lines == want
    top2 = proof_torch.profile_lines(dict(PROFILE_TRAIN, shape="qwen2.5-0.5b"), top=2)
    assert top2 == [want[6].replace("top 4 of 4", "top 2 of 4")] + want[7:9]
    failed = dict(PROFILE_TRAIN, shape="x", phase="decode", entries=[], error="profile: record an event: CUDA_ERROR_X")
    assert proof_torch.profile_lines(failed) == ["x profile decode bfloat16 batch 8: FAILED: profile: record an event: CUDA_ERROR_X"]


def test_table_ignores_profiles(tmp_path):
    # the profile lines of --profile are not measurements: the table and goals are as without them
    plain = tmp_path / "a"
    plain.mkdir()
    with_prof = tmp_path / "b"
    with_prof.mkdir()
    f = fixture(plain)
    g = fixture(with_prof, rows_extra=[PROFILE_TRAIN, dict(PROFILE_TRAIN, phase="decode", batch=64)])
    proof_torch.table(str(plain / "t.md"), [str(f)])
    proof_torch.table(str(with_prof / "t.md"), [str(g)])
    assert (plain / "t.md").read_text() == (with_prof / "t.md").read_text()
    assert len(proof_torch.read_rows([str(g)], "profile")) == 2


FIXTURE_TABLE = """| shape | step | tokens/s |
| --- | --- | --- |
| qwen2.5-0.5b | train | 123 |

Goals (issue 20; qwen2.5-0.5b shape):

| goal | measured | status |
| --- | --- | --- |
| g1 | 1.50x | met |
"""


def proof_out(tmp_path, table=FIXTURE_TABLE):
    d = tmp_path / "out"
    d.mkdir()
    (d / "table.md").write_text(table)
    (d / "machine.txt").write_text("date 2026-11-30T10:00:00Z\ngpu NVIDIA H100 80GB HBM3\ndriver 580.159\n"
                                   "commit 0123456789abcdef0123456789abcdef01234567\nsoftware torch 2.11.0 cuda 13.0 transformers 5.23.0\n")
    return d


def test_record(tmp_path):
    doc, hist = tmp_path / "cuda.md", tmp_path / "history-cuda.md"
    doc.write_text("## CUDA backend (gpu/cuda) — `make bench-cuda`\nNot measured: nothing yet.\n")
    hist.write_text("# CUDA history\n\n## 2026-11-01, earlier GPU\n\nold run\n")
    record_bench.record(str(proof_out(tmp_path)), str(doc), str(hist))
    text = doc.read_text()
    assert text.startswith("## CUDA backend (gpu/cuda) — `make bench-cuda`\nMeasured 2026-11-30T10:00:00Z on NVIDIA H100 80GB HBM3, driver 580.159, rlhost 0123456789ab")
    assert "Not measured" not in text
    assert "torch 2.11.0" in text and "| g1 | 1.50x | met |" in text and "| qwen2.5-0.5b | train | 123 |" not in text
    assert "(history/cuda.md)" in text
    h = hist.read_text()
    assert h.startswith("# CUDA history\n\n## 2026-11-30T10:00:00Z, NVIDIA H100 80GB HBM3\n")
    assert "| qwen2.5-0.5b | train | 123 |" in h and "| g1 | 1.50x | met |" in h
    assert h.index("2026-11-30") < h.index("## 2026-11-01, earlier GPU") and h.endswith("old run\n")
    # a history that does not exist yet is started
    record_bench.record(str(tmp_path / "out"), str(doc), str(tmp_path / "new.md"))
    assert (tmp_path / "new.md").read_text().startswith("# CUDA backend: proof runs on GPU machines (latest first)\n\n## 2026-11-30")
    assert "Paths and device time" not in h  # no paths.txt in that folder


def test_record_paths(tmp_path):
    """paths.txt (proof.sh's paths step, with the profile) goes into the history entry, not the doc."""
    out = proof_out(tmp_path)
    (out / "paths.txt").write_text("qwen2.5-0.5b profile train bfloat16 batch 8: 639.2 ms on the device\n   27.1%  flash_attention_backward_dkv\n")
    doc, hist = tmp_path / "cuda.md", tmp_path / "h.md"
    record_bench.record(str(out), str(doc), str(hist))
    h = hist.read_text()
    assert "Paths and device time by op" in h and "27.1%  flash_attention_backward_dkv" in h
    assert h.index("| g1 | 1.50x | met |") < h.index("Paths and device time")
    assert "flash_attention" not in doc.read_text()


def test_record_dev_cuda(tmp_path):
    """dev-cuda.txt (proof.sh's dev/cuda benchmarks) goes into the history entry, not the doc."""
    out = proof_out(tmp_path)
    line = "decode_vec qwen2.5-0.5b batch 64 over 640 positions (3 chunks of 216): default 60.2 us, variant 41.0 us, variant/default 0.681, max diff 3.1e-07"
    (out / "dev-cuda.txt").write_text(line + "\n")
    doc, hist = tmp_path / "cuda.md", tmp_path / "h.md"
    record_bench.record(str(out), str(doc), str(hist))
    h = hist.read_text()
    assert "dev/cuda's variants against their defaults" in h and line in h
    assert "decode_vec" not in doc.read_text()


@pytest.mark.parametrize("missing,want", [("table.md", "table.md"), ("machine.txt", "machine.txt")])
def test_record_refuses_incomplete(tmp_path, missing, want):
    d = proof_out(tmp_path)
    os.remove(d / missing)
    doc = tmp_path / "cuda.md"
    doc.write_text("before\n")
    with pytest.raises(SystemExit) as e:
        record_bench.record(str(d), str(doc), str(tmp_path / "h.md"))
    assert want in str(e.value) and not (tmp_path / "h.md").exists()
    assert doc.read_text() == "before\n"


def test_record_refuses_table_without_rows(tmp_path):
    d = proof_out(tmp_path, table="| a | b |\n| --- | --- |\n")
    doc = tmp_path / "cuda.md"
    doc.write_text("before\n")
    with pytest.raises(SystemExit) as e:
        record_bench.record(str(d), str(doc), str(tmp_path / "h.md"))
    assert "no measurements" in str(e.value) and not (tmp_path / "h.md").exists()
    assert doc.read_text() == "before\n"


REPO = HERE.parent.parent


def make(*args, path=None):
    env = dict(os.environ)
    if path is not None:
        env["PATH"] = path
    return subprocess.run(["make", "-s", "--no-print-directory", *args], cwd=REPO, env=env, capture_output=True, text=True)


def test_make_bench_cuda_without_gpu(tmp_path):
    # a PATH without nvidia-smi: one line, exit 0, the doc untouched
    doc = tmp_path / "cuda.md"
    doc.write_text("before\n")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ["make", "bash", "sh", "grep", "python3"]:
        src = subprocess.run(["which", tool], capture_output=True, text=True).stdout.strip()
        if src:
            (bindir / tool).symlink_to(src)
    p = make("bench-cuda", f"BENCH_CUDA_DOC={doc}", path=str(bindir))
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().splitlines() == [f"bench-cuda: no NVIDIA GPU here (nvidia-smi lists none); {doc} left as it is"]
    assert doc.read_text() == "before\n"


def test_make_bench_cuda_record(tmp_path):
    doc = tmp_path / "cuda.md"
    hist = tmp_path / "hist.md"
    p = make("bench-cuda-record", f"FROM={proof_out(tmp_path)}", f"BENCH_CUDA_DOC={doc}", f"BENCH_CUDA_HISTORY={hist}")
    assert p.returncode == 0, p.stderr
    assert "NVIDIA H100 80GB HBM3, driver 580.159" in doc.read_text() and "| g1 | 1.50x | met |" in hist.read_text()
    p = make("bench-cuda-record", f"BENCH_CUDA_DOC={doc}", f"BENCH_CUDA_HISTORY={hist}")
    assert p.returncode != 0 and "FROM=DIR" in p.stderr


def test_token_ids(tmp_path):
    # tiny-chat's tokenizer files: no bos, eos and pad <|im_end|> (an added token, id 257)
    assert proof_torch.token_ids(str(REPO / "host/sft/testdata/tiny-chat")) == {"eos_token_id": 257, "pad_token_id": 257}
    (tmp_path / "tokenizer.json").write_text(json.dumps(
        {"added_tokens": [{"id": 5, "content": "<s>"}], "model": {"vocab": {"a": 0, "</s>": 7}}}))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"bos_token": {"content": "<s>"}, "eos_token": "</s>", "pad_token": ""}))
    assert proof_torch.token_ids(str(tmp_path)) == {"bos_token_id": 5, "eos_token_id": 7}
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|nope|>"}))
    with pytest.raises(SystemExit, match=r"tokenizer_config.json: eos_token '<\|nope\|>' is not in tokenizer.json"):
        proof_torch.token_ids(str(tmp_path))


STUB_PY = """#!/usr/bin/env bash
# proof.sh's python: unpacking the bundle runs for real, the versions are made up, the rest is logged
case "$1 $2" in "-c "*gzip*) exec {py} "$@";; "-c "*) echo "torch 0 cuda 0 transformers 0"; exit 0;; esac
echo "py $*" >>{log}
if [ "$2" = make ]; then mkdir -p "$3" && echo x >"$3/model.safetensors" && {{ [ -z "$5" ] || cp "$5/tokenizer.json" "$3/"; }}; fi
exit 0
"""
STUB_RLHOST = """#!/usr/bin/env bash
echo "rlhost $*${{RLHOST_CUDA_PINNED:+ [pinned=$RLHOST_CUDA_PINNED]}}${{RLHOST_CUDA_QUEUE_DEPTH:+ [queue=$RLHOST_CUDA_QUEUE_DEPTH]}}${{RLHOST_CUDA_OVERLAP:+ [overlap=$RLHOST_CUDA_OVERLAP]}}" >>{log}
if [ "$1" = train ]; then
    d=runs/proof-arith
    for a in "$@"; do case $a in trainer.run_dir=*) d=${{a#trainer.run_dir=}};; esac; done
    mkdir -p "$d" && echo '{{"step": 1}}' >"$d/metrics.jsonl"
fi
exit 0
"""


def stub_bundle(tmp_path):
    """A proof bundle in tmp_path/bundle (proof.sh, empty tokenizer, a stub arith plugin) and
    stand-ins for python, rlhost and nvidia-smi that log their calls; returns the bundle, the
    output folder, the log and the environment that puts the stand-ins first."""
    import gzip
    import shutil
    bundle, out, log = tmp_path / "bundle", tmp_path / "out", tmp_path / "log"
    (bundle / "tokenizer").mkdir(parents=True)
    (bundle / "plugins").mkdir()
    (bundle / "arith-raw").mkdir()
    shutil.copy(HERE / "proof.sh", bundle)
    (bundle / "dev-cuda" / "dev" / "cuda").mkdir(parents=True)
    for name in ("logprob_forward", "sample"):
        (bundle / "dev-cuda" / "dev" / "cuda" / f"{name}.cu").write_text("// a benchmark\n")
    (bundle / "tokenizer" / "tokenizer.json").write_text("{}")
    with gzip.open(bundle / "plugins" / "rlhost-task-arith.gz", "wb") as f:
        f.write(b"#!/bin/sh\n")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    nvcc = f"""#!/bin/sh
echo "nvcc $*" >>{log}
while [ $# -gt 0 ]; do [ "$1" = -o ] && {{ printf '#!/bin/sh\\necho "%s ran"\\n' "$(basename "$2")" >"$2"; chmod +x "$2"; }}; shift; done
"""
    for name, text in [("python", STUB_PY.format(py=sys.executable, log=log)), ("rlhost", STUB_RLHOST.format(log=log)),
                       ("nvidia-smi", "#!/bin/sh\ncase \"$*\" in *--query-gpu=compute_cap\\ *) echo 9.0;; *) echo 'NVIDIA H100 80GB HBM3';; esac\n"),
                       ("nvcc", nvcc)]:
        (bindir / name).write_text(text)
        (bindir / name).chmod(0o755)
    env = dict(os.environ, PYTHON=str(bindir / "python"), RLHOST=str(bindir / "rlhost"), PATH=f"{bindir}:{os.environ['PATH']}")
    return bundle, out, log, env


@pytest.mark.parametrize("knob,shape,profile,dev,torch,ab", [(None, "qwen2.5-0.5b", None, None, None, None),
                                                             ("smollm2-135m", "smollm2-135m", "0", "0", "1", "0"),
                                                             (None, "qwen2.5-0.5b", None, "1", "0", "1")])
def test_proof_grpo_shape(tmp_path, knob, shape, profile, dev, torch, ab):
    # proof.sh with stand-ins for python, rlhost and nvidia-smi: the GRPO run's checkpoint is
    # PROOF_GRPO_SHAPE's (default the goal's), made with the bundle's tokenizer files, and the
    # goals table is told that shape
    bundle, out, log, env = stub_bundle(tmp_path)
    env.pop("PROOF_GRPO_SHAPE", None)
    env.pop("PROOF_GRPO_SIZE", None)
    if knob:
        env["PROOF_GRPO_SHAPE"] = knob
        env["PROOF_GRPO_SIZE"] = "4 4 32"
    env.pop("PROOF_PROFILE", None)
    if profile:
        env["PROOF_PROFILE"] = profile
    env.pop("PROOF_DEV", None)
    if dev is not None:
        env["PROOF_DEV"] = dev
    env.pop("PROOF_TORCH", None)
    if torch is not None:
        env["PROOF_TORCH"] = torch
    env.pop("PROOF_GRPO_AB", None)
    if ab is not None:
        env["PROOF_GRPO_AB"] = ab
    p = subprocess.run(["bash", str(bundle / "proof.sh"), str(out)], env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    # the PyTorch peers run unless PROOF_TORCH=0, and machine.txt says when they did not
    peers = [c for c in log.read_text().splitlines() if c.startswith(f"py {bundle}/proof_torch.py bench ")]
    assert len(peers) == (0 if torch == "0" else 1), peers
    assert ("PyTorch peers skipped" in (out / "machine.txt").read_text()) == (torch == "0")
    assert f"3-step GRPO: rlhost train on the arith task, {shape} shape" in p.stdout
    assert f"; GRPO run {shape}" in (out / "machine.txt").read_text()
    calls = log.read_text().splitlines()
    ck = out / f"ck-grpo-{shape}"
    assert f"py {bundle}/proof_torch.py make {ck} {shape} {bundle}/tokenizer" in calls
    # the bench runs with --profile unless PROOF_PROFILE=0
    bench = [c for c in calls if c.startswith("rlhost selftest --device cuda --bench ")]
    assert bench[0].endswith(" --profile") == (profile != "0"), bench
    assert len(bench) == 1, bench
    selftest = [c for c in calls if c.startswith("rlhost selftest --device cuda") and " --bench " not in c]
    assert selftest == ["rlhost selftest --device cuda"], selftest
    # dev/cuda's benchmarks (PROOF_DEV, default 1): each built for the GPU's architecture and run
    built = [c for c in calls if c.startswith("nvcc ")]
    on = dev != "0"
    assert f"dev/cuda benchmarks {'on' if on else 'off'}" in (out / "machine.txt").read_text()
    if on:
        # built side by side (proof.sh): in either order
        assert sorted(c.rsplit("/", 1)[1] for c in built) == ["logprob_forward.cu", "sample.cu"], built
        assert all(" -arch=sm_90 " in c and f" -o {out}/dev-" in c for c in built), built
        assert (out / "dev-cuda.txt").read_text().split() == ["dev-logprob_forward", "ran", "dev-sample", "ran"]
    else:
        assert built == [], built
    train = [c for c in calls if c.startswith("rlhost train ")]
    assert all(f"actor_rollout_ref.model.path={ck} " in c for c in train), train
    # the default run, then (PROOF_GRPO_AB, default 1) with uploads from pageable memory, with no
    # bound on the queue and without overlap scheduling, each into its own run folder, and their step
    # lines printed
    tails = [c.rsplit("proof-arith", 1)[1] for c in train]
    want_tails = [""] if ab == "0" else ["", "-pageable [pinned=0]", "-unbounded [queue=0]", "-serial [overlap=0]"]
    assert tails == want_tails, train
    for run in ("pageable", "unbounded", "serial"):
        printed = any(c.startswith(f"py {bundle}/proof_torch.py paths --grpo {out}/runs/proof-arith-{run}/metrics.jsonl")
                      for c in calls)
        assert printed == (ab != "0"), (run, calls)
    # the run's size: PROOF_GRPO_SIZE="PROMPTS N TOKENS", default 32 prompts x 8 samples x 256 tokens
    prompts, n, toks = (4, 4, 32) if knob else (32, 8, 256)
    for kv in (f"data.train_batch_size={prompts}", f"actor_rollout_ref.actor.ppo_mini_batch_size={prompts}",
               f"actor_rollout_ref.rollout.n={n}", f"data.max_response_length={toks}",
               f"actor_rollout_ref.rollout.max_num_seqs={prompts * n}"):
        assert f" {kv} " in train[0], (kv, train[0])
    assert f"GRPO run {shape} ({prompts} prompts x {n} samples, up to {toks} new tokens)" in (out / "machine.txt").read_text()
    for cmd in ("paths", "table"):
        assert any(c.startswith(f"py {bundle}/proof_torch.py {cmd} ") and f"--grpo-shape {shape} " in c for c in calls), calls


def stub_proof(tmp_path, env_extra):
    """Runs the bundle's proof.sh with the stand-ins for python, rlhost and nvidia-smi of
    test_proof_grpo_shape and the environment env_extra (PROOF_* set to None are removed);
    returns the process, the output folder and the calls the stand-ins logged."""
    bundle, out, log, env = stub_bundle(tmp_path)
    env = {k: v for k, v in env.items() if not k.startswith("PROOF_")}
    env.update(PROOF_GRPO_AB="0", PROOF_VARIANTS="")
    env.update({k: v for k, v in env_extra.items() if v is not None})
    p = subprocess.run(["bash", str(bundle / "proof.sh"), str(out)], env=env, capture_output=True, text=True)
    calls = log.read_text().splitlines() if log.exists() else []
    return p, bundle, out, calls


@pytest.mark.parametrize("model", ["qwen3-0.6b", "llama3.2-1b", "gemma3-1b", None])
def test_proof_model(tmp_path, model):
    # PROOF_MODEL picks the shape of the training-step and decode comparisons: the random
    # checkpoint proof_torch.py makes, rlhost's bench on it and PyTorch's on the same; the GRPO
    # run keeps its own shape (PROOF_GRPO_SHAPE, default the goal's)
    p, bundle, out, calls = stub_proof(tmp_path, {"PROOF_MODEL": model})
    assert p.returncode == 0, p.stdout + p.stderr
    shape = model or "qwen2.5-0.5b"
    ck = out / f"ck-{shape}"
    assert f"py {bundle}/proof_torch.py make {ck} {shape}" in calls, calls
    bench = [c for c in calls if c.startswith("rlhost selftest --device cuda --bench ")]
    assert bench and all(c.startswith(f"rlhost selftest --device cuda --bench {ck} ") for c in bench), bench
    peers = [c for c in calls if c.startswith(f"py {bundle}/proof_torch.py bench ")]
    assert len(peers) == 1 and peers[0].startswith(f"py {bundle}/proof_torch.py bench {ck} "), peers
    assert f"shapes {shape}: train B=8 T=1024" in (out / "machine.txt").read_text()
    assert f"py {bundle}/proof_torch.py make {out}/ck-grpo-qwen2.5-0.5b qwen2.5-0.5b {bundle}/tokenizer" in calls
    assert any(c.startswith(f"py {bundle}/proof_torch.py table ") and c.endswith(f" {out}/{shape}.jsonl") for c in calls), calls


def test_proof_model_unknown(tmp_path):
    # a shape proof_torch.py does not know is refused before anything runs, naming the known ones
    p, _, _, calls = stub_proof(tmp_path, {"PROOF_MODEL": "gemma3-27b"})
    assert p.returncode == 2
    assert 'unknown shape "gemma3-27b"' in p.stderr and "qwen3-0.6b llama3.2-1b gemma3-1b" in p.stderr, p.stderr
    assert not any("selftest" in c for c in calls), calls


def test_proof_models_listed():
    # proof.sh's list of shapes is proof_torch.py's
    text = (HERE / "proof.sh").read_text()
    line = next(ln for ln in text.splitlines() if ln.startswith("MODELS="))
    assert line.split("=", 1)[1].strip('"').split() == list(proof_torch.SHAPES)


def test_shape_config():
    # the new families' configs as their checkpoints' config.json: Llama 3.2's llama3 RoPE and
    # Gemma 3's layer pattern and two RoPE bases, as transformers 5 (rope_parameters) and 4 take them
    mt, cfg = proof_torch.shape_config("llama3.2-1b", 5)
    assert mt == "llama" and "rope_theta" not in cfg and "rope_scaling" not in cfg
    assert cfg["rope_parameters"] == dict(rope_type="llama3", factor=32.0, low_freq_factor=1.0, high_freq_factor=4.0,
                                          original_max_position_embeddings=8192, rope_theta=500000.0)
    mt, cfg = proof_torch.shape_config("llama3.2-1b", 4)
    assert cfg["rope_theta"] == 500000.0 and cfg["rope_scaling"]["rope_type"] == "llama3" and "rope_parameters" not in cfg
    mt, cfg = proof_torch.shape_config("gemma3-1b", 5)
    assert mt == "gemma3_text" and cfg["head_dim"] == 256 and cfg["sliding_window"] == 512
    lt = cfg["layer_types"]
    assert len(lt) == 26 and lt.count("full_attention") == 4 and lt[5] == "full_attention" and lt[:5] == ["sliding_attention"] * 5
    assert cfg["rope_parameters"] == {"full_attention": {"rope_type": "default", "rope_theta": 1e6},
                                      "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}
    assert not any(k in cfg for k in ("local_rope_theta", "sliding_pattern", "rope"))
    mt, cfg = proof_torch.shape_config("gemma3-1b", 4)
    assert cfg["rope_theta"] == 1e6 and cfg["rope_local_base_freq"] == 10000.0 and cfg["sliding_window_pattern"] == 6
    mt, cfg = proof_torch.shape_config("qwen3-0.6b", 5)
    assert mt == "qwen3" and cfg["head_dim"] == 128 and cfg["rope_theta"] == 1e6
    # the shapes of before are unchanged
    assert proof_torch.shape_config("qwen2.5-0.5b", 5) == ("qwen2", {k: v for k, v in proof_torch.SHAPES["qwen2.5-0.5b"].items()
                                                                     if k != "model_type"})
