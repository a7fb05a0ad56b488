#!/usr/bin/env python3
"""Throughput against latency from `folio bench serve --json` files: one point per run, output
tok/s on x, TTFT p50 and TPOT p50 (and ITL p99) on y, one series per label.

  python3 bench/plot_serve.py OUT.png LABEL=FILE.json[,FILE.json...] [LABEL=...]
  python3 bench/plot_serve.py OUT.png LABEL=DIR   (every *.json of a bench/serve_shapes.py --out
                                                   directory but summary.json)
  python3 bench/plot_serve.py OUT.png LABEL=summary.json   (a serve_shapes.py summary: every run)

Needs matplotlib (not a folio dependency; any venv)."""

import glob
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def runs_of(spec):
    files = []
    for part in spec.split(","):
        if os.path.isdir(part):
            files += sorted(f for f in glob.glob(os.path.join(part, "*.json")) if not f.endswith("summary.json"))
        else:
            files.append(part)
    runs = []
    for path in files:
        with open(path) as f:
            r = json.load(f)
        if "output_throughput" not in r:  # bench/serve_shapes.py's summary.json
            for shape, shape_runs in r.items():
                for i, run in enumerate(shape_runs):
                    tag = shape if shape != "poisson" else ("poisson-sat", "poisson-half")[i % 2]
                    runs.append((f"{run['server']}-{tag}", run))
            continue
        name = os.path.splitext(os.path.basename(path))[0]
        runs.append((name, r))
    return sorted(runs, key=lambda nr: nr[1]["output_throughput"])


def main():
    if len(sys.argv) < 3 or any("=" not in a for a in sys.argv[2:]):
        sys.exit(__doc__)
    out = sys.argv[1]
    series = [(a.split("=", 1)[0], runs_of(a.split("=", 1)[1])) for a in sys.argv[2:]]
    panels = [("ttft", "median_ms", "TTFT p50 (ms)"), ("tpot", "median_ms", "TPOT p50 (ms)"),
              ("itl", "p99_ms", "ITL p99 (ms)")]
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4.5))
    for ax, (metric, stat, title) in zip(axes, panels):
        for label, runs in series:
            xs = [r["output_throughput"] for _, r in runs]
            ys = [r[metric][stat] for _, r in runs]
            ax.plot(xs, ys, "o", label=label)
            for (name, _), x, y in zip(runs, xs, ys):
                ax.annotate(name.split("-", 1)[-1], (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
        ax.set_xlabel("output tokens/s")
        ax.set_ylabel(title)
        ax.set_yscale("log")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.suptitle("serving: throughput against latency (folio bench serve)")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
