#!/usr/bin/env python3
"""host/metrics benchmarks: the Go figures and their Python peers, measured in one run.

Runs the Go benchmarks of host/metrics (go test -bench) and, on the same machine, against
the same MLflow server, the Python equivalents a veRL user has today:

  * metrics.jsonl: veRL's file logger record (json.dumps of {"step", "data"}) written per
    step, with flush + fsync for the same durability as the Go logger;
  * MLflow: the official client (MlflowClient.create_run, one log_batch per step as
    veRL's mlflow.log_metrics does, set_terminated), 20 steps of 60 metrics per run;
  * plot: matplotlib (Agg) drawing the same three panels at the same pixel size.

Writes docs/bench/history/metrics.md (copy the new figures into docs/bench/metrics.md, the current section). Needs the mlflow virtualenv of `make setup-mlflow`
(mlflow, matplotlib, numpy); run it with that venv's python:
    ~/.cache/rlhost/mlflow-venv/bin/python scripts/goldens/metrics/bench_python.py
"""
import json
import math
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
STEPS_PER_RUN, METRICS_PER_STEP, REPS, JSONL_STEPS = 20, 60, 3, 200

NAMES = ["critic/score/mean", "critic/rewards/mean", "actor/pg_loss", "actor/ppo_kl", "actor/entropy",
         "actor/grad_norm", "response_length/mean", "response_length/max", "response_length/min",
         "response_length/clip_ratio", "prompt_length/mean", "perf/throughput", "timing_s/gen",
         "timing_s/old_log_prob", "timing_s/ref", "timing_s/update_actor", "timing_s/step",
         "num_turns/mean", "tool_calls/mean"]


def bench_step(step):
    """The same ~60 metrics as benchStep in host/metrics/bench_test.go."""
    v = {k: math.sin(step + len(k)) for k in NAMES}
    for i in range(len(v), METRICS_PER_STEP):
        v["extra/metric_%02d/mean" % i] = step * i / 7
    return v


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(tmp):
    mlflow = os.environ.get("RLHOST_MLFLOW") or shutil.which("mlflow") or os.path.join(os.path.dirname(sys.executable), "mlflow")
    port = free_port()
    log = open(os.path.join(tmp, "server.log"), "w")
    proc = subprocess.Popen([mlflow, "server", "--backend-store-uri", "sqlite:///" + os.path.join(tmp, "mlflow.db"),
                             "--artifacts-destination", os.path.join(tmp, "art"), "--host", "127.0.0.1",
                             "--port", str(port), "--workers", "1"],
                            stdout=log, stderr=log, start_new_session=True,
                            env=dict(os.environ, MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false"))
    uri = "http://127.0.0.1:%d" % port
    deadline = time.time() + 180
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit("mlflow server exited; see " + log.name)
        try:
            if urllib.request.urlopen(uri + "/health", timeout=2).read().strip() == b"OK":
                return proc, uri
        except OSError:
            pass
        time.sleep(0.3)
    sys.exit("mlflow server not healthy after 3 minutes")


def warm_up(uri):
    """One small run, so that neither side pays for the server's first requests."""
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp_id = client.create_experiment("warm-up")
    run = client.create_run(exp_id)
    client.log_batch(run.info.run_id, metrics=[Metric("a", 1.0, 0, 0)])
    client.get_metric_history(run.info.run_id, "a")
    client.set_terminated(run.info.run_id)


def go_benchmarks(uri):
    env = dict(os.environ, RLHOST_MLFLOW_URI=uri)
    res, cmds = {}, []
    # fsync times vary a lot: JSONL gets as many steps as the Python peer.
    for bench, times in (("JSONL", JSONL_STEPS), ("MLflow|Plot", REPS)):
        cmd = ["go", "test", "-run", "^$", "-bench", bench, "-benchtime", "%dx" % times, "./host/metrics/"]
        out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
        sys.stdout.write(out.stdout)
        if out.returncode != 0:
            sys.exit(out.stderr)
        for line in out.stdout.splitlines():
            m = re.match(r"Benchmark(\w+)-\d+\s+\d+\s+([\d.]+) ns/op", line)
            if m:
                res[m.group(1)] = float(m.group(2)) / 1e9
        cmds.append("`%s`" % " ".join(cmd))
    return res, " and ".join(cmds)


def py_jsonl(tmp):
    path = os.path.join(tmp, "metrics.jsonl")
    n = JSONL_STEPS
    with open(path, "a") as f:
        t = time.perf_counter()
        for step in range(n):
            f.write(json.dumps({"step": step, "data": bench_step(step)}) + "\n")
            f.flush()
            os.fsync(f.fileno())
        return (time.perf_counter() - t) / n


def py_mlflow(uri):
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("python-bench")
    exp_id = exp.experiment_id if exp else client.create_experiment("python-bench")
    runs, per_step = [], []
    for rep in range(REPS + 1):  # the first run warms the client up
        t = time.perf_counter()
        run = client.create_run(exp_id, run_name="py-%d" % rep)
        for step in range(1, STEPS_PER_RUN + 1):
            ts = int(time.time() * 1000)
            s = time.perf_counter()
            client.log_batch(run.info.run_id, metrics=[Metric(k, v, ts, step) for k, v in bench_step(step).items()])
            per_step.append(time.perf_counter() - s)
        client.set_terminated(run.info.run_id)
        if rep:
            runs.append(time.perf_counter() - t)
    return sum(runs) / len(runs), sum(per_step[STEPS_PER_RUN:]) / len(per_step[STEPS_PER_RUN:])


def py_plot(tmp):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = list(range(1, 201))
    score = [0.1 + 0.6 * (1 - math.exp(-s / 50)) for s in steps]
    vals = [s for s in steps if s % 10 == 0]
    valr = [0.1 + 0.003 * s for s in vals]
    rows = [bench_step(s) for s in steps]
    mean = [r["response_length/mean"] for r in rows]
    lo = [r["response_length/min"] for r in rows]
    hi = [r["response_length/max"] for r in rows]

    def draw(path):
        fig, ax = plt.subplots(1, 3, figsize=(16.8, 4.64), dpi=100)
        fig.suptitle("Training curves - steps 1 to 200")
        ax[0].plot(steps, score, label="train score")
        ax[0].plot(vals, valr, marker="o", label="val openai/gsm8k")
        ax[0].set(title="Reward", xlabel="step", ylabel="mean reward")
        ax[1].plot(vals, valr, marker="o", color="C3", label="val openai/gsm8k")
        ax[1].set(title="Accuracy", xlabel="step", ylabel="accuracy")
        ax[2].fill_between(steps, lo, hi, color="C4", alpha=0.2)
        ax[2].plot(steps, mean, color="C4", label="mean response length (band: min..max)")
        ax[2].set(title="Response length", xlabel="step", ylabel="tokens")
        for a in ax:
            a.grid(True, color="#e4e4e4")
            a.legend(loc="best")
        fig.savefig(path)
        plt.close(fig)

    out = os.path.join(tmp, "curves.png")
    draw(out)  # warm-up: font cache, imports
    t = time.perf_counter()
    for _ in range(REPS):
        draw(out)
    return (time.perf_counter() - t) / REPS


def main():
    tmp = tempfile.mkdtemp(prefix="rlhost-metrics-bench-")
    proc, uri = start_server(tmp)
    try:
        warm_up(uri)
        go, cmd = go_benchmarks(uri)
        py_json = py_jsonl(tmp)
        py_run, py_step = py_mlflow(uri)
        py_png = py_plot(tmp)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        shutil.rmtree(tmp, ignore_errors=True)

    import matplotlib
    import mlflow
    load = os.getloadavg()
    rows = [
        ("metrics.jsonl: one step (60 metrics) appended + fsync", go["JSONLLog"], py_json, "json.dumps + write + fsync (veRL file-logger record)"),
        ("MLflow: what Log costs the training loop per step", go["MLflowLog"], py_step, "MlflowClient.log_batch per step (synchronous, as veRL's mlflow.log_metrics)"),
        ("MLflow: run of 20 steps x 60 metrics, create to finished, all delivered", go["MLflowRun"], py_run, "MlflowClient create_run + 20 log_batch + set_terminated"),
        ("plot: 3 panels, 200 steps, 1680x464 PNG", go["Plot"], py_png, "matplotlib %s (Agg) savefig" % matplotlib.__version__),
    ]

    def fmt(s):
        return "%.3g ms" % (s * 1e3) if s >= 1e-3 else "%.3g µs" % (s * 1e6)

    lines = [
        "## host/metrics",
        "",
        "Command: `make bench-metrics` (%s against an `mlflow server` %s with a SQLite store, "
        "then the Python peers against the same server in the same run: "
        "`scripts/goldens/metrics/bench_python.py`). The server runs with "
        "`MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false`, as in the tests." % (cmd, mlflow.__version__),
        "",
        "Machine: %s, %d cores, Python %s; load average during the run %.1f / %.1f / %.1f "
        "(the machine was shared, so absolute times are inflated; both sides ran in the same minutes)."
        % (platform.processor() or platform.machine(), os.cpu_count(), platform.python_version(), *load),
        "",
        "| what | rlhost (Go) | Python peer | Go / Python | peer |",
        "|---|---:|---:|---:|---|",
    ]
    for what, g, p, peer in rows:
        lines.append("| %s | %s | %s | %.3gx | %s |" % (what, fmt(g), fmt(p), g / p, peer))
    lines += [
        "",
        "The MLflow `Log` of rlhost only queues the points (a goroutine sends them), so the "
        "training loop never waits for the server; the run figure includes delivery of every point.",
        "",
    ]
    os.makedirs(os.path.join(ROOT, "docs", "bench"), exist_ok=True)
    out = os.path.join(ROOT, "docs", "bench", "history", "metrics.md")
    with open(out, "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))
    print("wrote", out)


if __name__ == "__main__":
    main()
