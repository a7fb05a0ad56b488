#!/usr/bin/env python3
"""Plots where one decode step's device time goes, from bench/decode_profile.py's CSVs (every
kernel of every step profiled: step, kernel, us), one stacked bar per file: the matrix products
(GEMV / GEMM), RoPE + KV write, RMSNorm, decode attention, SwiGLU and the rest.

    python scripts/plot-decode-profile.py OUT.png LABEL=FILE.csv[.gz] ...

Needs matplotlib (not a folio dependency; any venv)."""

import csv
import gzip
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

CLASSES = [  # (label, test on the kernel name, colour)
    ("matrix products", lambda n: any(k in n for k in ("gemv", "gemm", "Gemm", "nvjet", "sm90_xmma", "cutlass")),
     "#4c72b0"),
    ("RoPE + KV write", lambda n: "rope_write_kv" in n, "#dd8452"),
    ("RMSNorm", lambda n: "rms_norm" in n, "#55a868"),
    ("decode attention", lambda n: "decode" in n, "#c44e52"),
    ("SwiGLU", lambda n: "swiglu" in n, "#8172b3"),
    ("other", lambda n: True, "#937860"),
]


def last_decode_step(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        rows = list(csv.DictReader(f))
    steps = {}
    for r in rows:
        steps.setdefault(int(r["step"]), []).append((r["kernel"], float(r["us"])))
    decode = [k for k, s in sorted(steps.items()) if not any("prefill" in n for n, _ in s)]
    return steps[decode[-1]]


def main():
    out, specs = sys.argv[1], sys.argv[2:]
    labels, totals = [], []
    for spec in specs:
        label, path = spec.split("=", 1)
        sums = {c[0]: 0.0 for c in CLASSES}
        for name, us in last_decode_step(path):
            for cls, test, _ in CLASSES:
                if test(name):
                    sums[cls] += us
                    break
        labels.append(label)
        totals.append(sums)
    fig, ax = plt.subplots(figsize=(9, 1.4 + 0.7 * len(labels)))
    for i, sums in enumerate(totals):
        left = 0.0
        for cls, _, colour in CLASSES:
            width = sums[cls] / 1e3
            ax.barh(i, width, left=left, color=colour, label=cls if i == 0 else None)
            if width > 0.25:
                ax.text(left + width / 2, i, f"{width:.2f}", ha="center", va="center", fontsize=8, color="white")
            left += width
        ax.text(left + 0.03, i, f"{left:.2f} ms", va="center", fontsize=9)
    ax.set_yticks(range(len(labels)), labels)
    ax.invert_yaxis()
    ax.set_xlabel("device time of one decode step at batch 1, ms (Nsight Compute, kernels serialized)")
    ax.legend(ncol=6, fontsize=8, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    ax.set_xlim(0, max(sum(t.values()) for t in totals) / 1e3 * 1.15)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main()
