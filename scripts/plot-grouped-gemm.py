#!/usr/bin/env python3
"""Plots INT4 (W4A16) and INT8 (W8A16) against BF16 GEMM time per batch size, per Llama-3-8B
weight shape, from the `bench: gemm int4 vs bf16` / `bench: gemm int8 vs bf16` lines of
`folio_cuda_e2e bench` (docs/data/grouped-gemm-h100.txt; an older file may hold INT4 only).
Files with a `wgmma` column (the main-loop GEMM, docs/data/gpu-2026-12-05-wgmma/) plot two
lines a shape past 64 tokens: dashed, dequantize + cuBLASLt; solid, the path GemmPolicy now
picks (the wgmma GEMM up to 256 tokens where its tiles fill the 132 SMs, as gemm_policy.h).

    python scripts/plot-grouped-gemm.py docs/data/grouped-gemm-h100.txt docs/grouped-gemm-vs-bf16.png [GPU]

Needs matplotlib (not a folio dependency; any venv)."""

import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


SHAPE_ROWS = {"qkv": 6144, "o": 4096, "gate_up": 28672, "down": 4096, "lm_head": 128256}
SMS = 132  # H100 SXM


def parse(path):
    """{format: {shape: [(n, bf16, small, dequant, wgmma or None, default), ...]}}"""
    formats, current = {}, None
    for line in open(path):
        m = re.match(r"bench: gemm (int4|int8) vs bf16 (\S+)", line)
        if m:
            current = formats.setdefault(m.group(1), {}).setdefault(m.group(2), [])
            continue
        m = re.match(r"\s+n=(\d+)\s+bf16\s+([\d.]+) \| int[48] small\s+([\d.]+) dequant\+gemm\s+([\d.]+)"
                     r"(?: wgmma\s+([\d.]+))? \| default\s+([\d.]+)", line)
        if m and current is not None:
            current.append(tuple(None if v is None else float(v) for v in m.groups()))
    return formats


def policy_time(name, row):
    """The time of the path the current GemmPolicy picks for this shape and n."""
    n, _, small, dequant, wgmma, default = row
    if wgmma is None:
        return default
    if n <= 64:
        return small
    tiles = -(-SHAPE_ROWS.get(name, 0) // 128) * -(-int(n) // 128)
    return wgmma if n <= 256 and 2 * tiles > SMS else dequant


def main():
    formats = parse(sys.argv[1])
    gpu = sys.argv[3] if len(sys.argv) > 3 else "H100"
    fig, axes = plt.subplots(1, len(formats), figsize=(7 * len(formats), 4.5), squeeze=False, sharey=True)
    for ax, (fmt, shapes) in zip(axes[0], formats.items()):
        for name, rows in shapes.items():
            line = ax.plot([r[0] for r in rows], [r[1] / policy_time(name, r) for r in rows], marker="o",
                           label=name)[0]
            if rows and rows[0][4] is not None:
                big = [r for r in rows if r[0] >= 64]
                ax.plot([r[0] for r in big], [r[1] / r[3] if r[0] > 64 else r[1] / r[2] for r in big],
                        linestyle="--", color=line.get_color(), alpha=0.6)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.axvline(64, color="gray", linestyle=":", linewidth=0.8)
        ax.text(66, 0.2, "small kernel | wgmma GEMM or dequantize + cuBLASLt (dashed)", fontsize=8,
                color="gray")
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
