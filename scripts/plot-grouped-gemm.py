#!/usr/bin/env python3
"""Plots INT4 (W4A16) and INT8 (W8A16) against BF16 GEMM time per batch size, per Llama-3-8B
weight shape, from the `bench: gemm int4 vs bf16` / `bench: gemm int8 vs bf16` lines of
`folio_cuda_e2e bench` (docs/data/grouped-gemm-h100.txt; an older file may hold INT4 only):

    python scripts/plot-grouped-gemm.py docs/data/grouped-gemm-h100.txt docs/grouped-gemm-vs-bf16.png [GPU]

Needs matplotlib (not a folio dependency; any venv)."""

import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def parse(path):
    """{format: {shape: [(n, bf16, small, dequant, default), ...]}}"""
    formats, current = {}, None
    for line in open(path):
        m = re.match(r"bench: gemm (int4|int8) vs bf16 (\S+)", line)
        if m:
            current = formats.setdefault(m.group(1), {}).setdefault(m.group(2), [])
            continue
        m = re.match(r"\s+n=(\d+)\s+bf16\s+([\d.]+) \| int[48] small\s+([\d.]+) dequant\+gemm\s+([\d.]+) \| "
                     r"default\s+([\d.]+)", line)
        if m and current is not None:
            current.append(tuple(float(v) for v in m.groups()))
    return formats


def main():
    formats = parse(sys.argv[1])
    gpu = sys.argv[3] if len(sys.argv) > 3 else "H100"
    fig, axes = plt.subplots(1, len(formats), figsize=(7 * len(formats), 4.5), squeeze=False, sharey=True)
    for ax, (fmt, shapes) in zip(axes[0], formats.items()):
        for name, rows in shapes.items():
            ax.plot([r[0] for r in rows], [r[1] / r[4] for r in rows], marker="o", label=name)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.axvline(64, color="gray", linestyle=":", linewidth=0.8)
        ax.text(66, 0.2, "small kernel | dequantize + cuBLASLt", fontsize=8, color="gray")
        # Single BF16 timings can be outliers (an earlier run had o at n = 4 at 6x its
        # neighbours); the axis stops at 2.75 so that one does not flatten the rest.
        ax.set_ylim(0, 2.75)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("tokens in the product (n)")
        ax.set_ylabel(f"BF16 time / {fmt.upper()} time (above 1: {fmt.upper()} faster)")
        bits = "W4A16" if fmt == "int4" else "W8A16"
        ax.set_title(f"{fmt.upper()} ({bits}) vs BF16 GEMM, Llama-3-8B shapes, {gpu}")
        ax.legend()
        ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()
