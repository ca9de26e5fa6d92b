"""Write docs/bench/cuda.md from a proof run's output folder (scripts/gpu/proof.sh OUT):
OUT/table.md (the measurements and the goals), OUT/machine.txt (date, GPU, driver, commit,
software; proof.sh writes it) and, when present, OUT/paths.txt (the paths and the device-time
profile) and OUT/dev-cuda.txt (dev/cuda's variants against their defaults), into the history
entry. DOC gets the machine and the goals table (docs/benchmarks.md
holds every area's latest figures in 150 lines); HISTORY gets the whole table, above the
earlier runs. `make bench-cuda` runs it after the proof on a GPU machine;
`make bench-cuda-record FROM=OUT` runs it on a folder brought back from one.

  record_bench.py OUT DOC HISTORY
"""
import sys

HEADER = "## CUDA backend (gpu/cuda) — `make bench-cuda`"


def machine(path):
    info = {}
    for line in open(path):
        k, _, v = line.strip().partition(" ")
        if k:
            info[k] = v.strip()
    return info


def record(out, doc, history):
    try:
        table = open(f"{out}/table.md").read().strip()
    except OSError as e:
        sys.exit(f"record_bench: {out}/table.md: {e.strerror} (run scripts/gpu/proof.sh {out} on a GPU machine first)")
    try:
        info = machine(f"{out}/machine.txt")
    except OSError as e:
        sys.exit(f"record_bench: {out}/machine.txt: {e.strerror} (proof.sh writes it; an older proof folder lacks it)")
    rows = [l for l in table.splitlines() if l.startswith("| ") and not l.startswith("| ---")]
    if len(rows) < 2:
        sys.exit(f"record_bench: {out}/table.md holds no measurements (a proof whose steps all failed?); {doc} left as it was")
    missing = [k for k in ("date", "gpu", "driver", "commit") if not info.get(k)]
    if missing:
        sys.exit(f"record_bench: {out}/machine.txt lacks {', '.join(missing)}; {doc} left as it was")
    measured = (f"Measured {info['date']} on {info['gpu']}, driver {info['driver']}, rlhost {info['commit']}"
                + (f"; {info['software']}" if info.get("software") else "")
                + (f"; {info['shapes']}" if info.get("shapes") else "")
                + ", by `scripts/gpu/proof.sh` (docs/gpu.md, \"Proof on a GPU machine\"), recorded with `make bench-cuda-record`.")
    lines = table.splitlines()
    g = next((i for i, l in enumerate(lines) if l.startswith("Goals (")), None)
    goals = "(the table has no goals section)"
    if g is not None:  # the goals' table: the lines after its title up to the next paragraph
        body = []
        for l in lines[g + 1:]:
            if l.strip() and not l.startswith("|"):
                break
            if l.strip():
                body.append(l)
        goals = "\n".join(body)
    what = lines[g].rstrip(":") if g is not None else "Goals"
    text = "\n".join([HEADER, measured + f" {what}, below; every measurement of the run (tokens/s, latency, MFU, "
                      "memory, transfers, syncs) and where the device time went: [history/cuda.md](history/cuda.md).",
                      "", goals, ""])
    try:
        earlier = open(history).read()
    except FileNotFoundError:
        earlier = "# CUDA backend: proof runs on GPU machines (latest first)\n"
    head, _, rest = earlier.partition("\n")
    parts = ["", f"## {info['date']}, {info['gpu']}", "", measured, "", table, ""]
    try:  # the paths each step took and where the device time went (proof.sh writes it)
        paths = open(f"{out}/paths.txt").read().strip()
    except OSError:
        paths = ""
    if paths:
        parts += ["Paths and device time by op (`proof_torch.py paths`):", "", "```", paths, "```", ""]
    try:  # dev/cuda's benchmarks: each variant waiting for a proof against its default
        dev = open(f"{out}/dev-cuda.txt").read().strip()
    except OSError:
        dev = ""
    if dev:
        parts += ["dev/cuda's variants against their defaults (docs/gpu.md, \"Kernel variants\"):", "", "```", dev, "```", ""]
    entry = "\n".join(parts)
    with open(history, "w") as f:
        f.write(head + "\n" + entry + rest)
    with open(doc, "w") as f:
        f.write(text)
    print(f"record_bench: {doc} and {history} written from {out}/table.md ({info['gpu']}, {info['date']}); "
          "run make bench-docs to rebuild docs/benchmarks.md")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    record(sys.argv[1], sys.argv[2], sys.argv[3])
