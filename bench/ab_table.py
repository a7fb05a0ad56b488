#!/usr/bin/env python3
"""Same-machine A/B table from alternated benchmark runs.

Reads a log of blocks headed `=== old N` / `=== new N`, each holding `RESULT name ms=...` lines
(scripts/gpu-check's `ab` stage writes one), and prints, per result, the mean time of the old
runs, of the new runs and new / old, in the order the results first appear. Alternating the two
binaries on one machine is what makes the ratio worth reading: two GPU machines of one kind
differ by a few percent (docs/BENCHMARKS.md).
"""
import argparse
import re
import sys
from collections import OrderedDict

HEADER = re.compile(r"^=== (old|new) \d+")
RESULT = re.compile(r"^RESULT (\S+) ms=([0-9.]+)")


def parse(lines):
    """{side: {name: [ms, ...]}} and the names in first-seen order."""
    times = {"old": OrderedDict(), "new": OrderedDict()}
    order = OrderedDict()
    side = None
    for line in lines:
        header = HEADER.match(line)
        if header:
            side = header.group(1)
            continue
        result = RESULT.match(line)
        if result and side:
            name, ms = result.group(1), float(result.group(2))
            times[side].setdefault(name, []).append(ms)
            order[name] = None
    return times, list(order)


def table(times, names, threshold):
    rows = []
    for name in names:
        old, new = times["old"].get(name), times["new"].get(name)
        if not old or not new:
            rows.append(f"{name:<56} {'-' if not old else f'{sum(old) / len(old):.4f}':>9} "
                        f"{'-' if not new else f'{sum(new) / len(new):.4f}':>9}   (one side only)")
            continue
        o, n = sum(old) / len(old), sum(new) / len(new)
        mark = "  <<" if n / o < 1 - threshold else ("  >>" if n / o > 1 + threshold else "")
        rows.append(f"{name:<56} {o:9.4f} {n:9.4f} {n / o:7.3f}{mark}")
    return [f"{'result (ms, mean of runs)':<56} {'old':>9} {'new':>9} {'new/old':>7}"] + rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("log", help="the alternated runs' log")
    parser.add_argument("--threshold", type=float, default=0.02,
                        help="mark ratios past 1 +- this (<< faster, >> slower)")
    args = parser.parse_args()
    with open(args.log, encoding="utf-8") as f:
        times, names = parse(f)
    if not names:
        sys.exit(f"ab_table: no RESULT lines under '=== old N' / '=== new N' headers in {args.log}")
    print("\n".join(table(times, names, args.threshold)))


if __name__ == "__main__":
    main()
