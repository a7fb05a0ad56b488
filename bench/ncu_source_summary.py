#!/usr/bin/env python3
"""Where a kernel's instructions and stalls go, from Nsight Compute's per-instruction table.

  ncu --section SourceCounters ... -o REPORT PROGRAM
  ncu -i REPORT.ncu-rep --page source --csv --print-source sass > SASS.csv
  python3 bench/ncu_source_summary.py SASS.csv [--units N] [--top 15]

A kernel's instructions fall into groups by how often each one ran: the main loop's body runs
as often as there are loop iterations, a prologue once per warp, and so on. The table lists
each group (its execution count, how many instructions it holds, what it costs per --units,
e.g. the number of warp steps, and its share of the stall samples), then the opcodes of the
busiest group and the most stalled instructions. This is how the KIVI decode kernel's copies
(~200 instructions a step) and split AND/OR pairs were found (docs/BENCHMARKS.md, eighteenth
session).
"""
import argparse
import collections
import csv
import sys


def to_int(text):
    try:
        return int(text.replace(",", ""))
    except (ValueError, AttributeError):
        return 0


def read_rows(path):
    """(address, executions, stall samples, sass text) per instruction of the first kernel."""
    with open(path, newline="") as f:
        table = list(csv.reader(f))
    header_at = next((i for i, row in enumerate(table) if "Instructions Executed" in row), None)
    if header_at is None:
        sys.exit(f"{path}: no 'Instructions Executed' column (was the report taken with --section SourceCounters?)")
    header = table[header_at]
    executed = header.index("Instructions Executed")
    source = header.index("Source")
    stalls = header.index("Warp Stall Sampling (All Samples)") if "Warp Stall Sampling (All Samples)" in header else None
    rows = []
    for row in table[header_at + 1:]:
        if row and row[0] == "Kernel Name":  # a second kernel's table: the first one is summarized
            break
        if len(row) <= max(executed, source):
            continue
        rows.append((row[0], to_int(row[executed]), to_int(row[stalls]) if stalls is not None else 0, row[source]))
    return rows


def opcode(sass):
    words = sass.split()
    if not words:
        return "?"
    word = words[1] if words[0].startswith("@") and len(words) > 1 else words[0]
    return word.split(".")[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("csv", help="ncu --page source --csv --print-source sass output")
    parser.add_argument("--units", type=float, default=0, help="divide instruction counts by this (e.g. warp steps)")
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    rows = read_rows(args.csv)
    if not rows:
        sys.exit(f"{args.csv}: no instructions")
    total = sum(n for _, n, _, _ in rows)
    total_stalls = sum(s for _, _, s, _ in rows) or 1
    groups = collections.defaultdict(lambda: [0, 0, 0])  # executions -> [instructions, executed, stalls]
    for _, n, s, _ in rows:
        g = groups[n]
        g[0] += 1
        g[1] += n
        g[2] += s
    per = args.units if args.units > 0 else 1.0
    unit = " a unit" if args.units > 0 else ""
    line = f"{len(rows)} instructions in the binary, {total:,} executed (warp-level)"
    if args.units > 0:
        line += f", {total / per:.1f} a unit"
    print(line)
    print(f"{'runs':>12} {'instructions':>12} {'executed' + unit:>18} {'share':>7} {'stalls':>7}")
    for runs, (count, executed, stalls) in sorted(groups.items(), key=lambda kv: -kv[1][1])[: args.top]:
        if executed == 0:
            continue
        print(f"{runs:>12,} {count:>12} {executed / per:>18,.1f} {100 * executed / total:>6.1f}% "
              f"{100 * stalls / total_stalls:>6.1f}%")
    busiest = max(groups.items(), key=lambda kv: kv[1][1])[0]
    ops = collections.Counter(opcode(sass) for _, n, _, sass in rows if n == busiest)
    print(f"\nopcodes of the busiest group ({busiest:,} runs each):")
    print("  " + ", ".join(f"{op} {count}" for op, count in ops.most_common(args.top)))
    print("\nmost stalled instructions (samples, runs, SASS):")
    for address, n, s, sass in sorted(rows, key=lambda r: -r[2])[: args.top]:
        print(f"  {s:>6} {n:>10,}  {sass.strip()}")


if __name__ == "__main__":
    main()
