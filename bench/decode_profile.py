#!/usr/bin/env python3
"""Where a decode step's time goes on the GPU, kernel by kernel (issues 13, 15, 16).

Runs `folio bench` under Nsight Compute (ncu, one metric: each kernel's duration, clocks not
locked) with a short prompt and a few decode steps, then prints the last complete decode step:
every kernel in launch order folded by name, its count, total microseconds and share, the GEMMs'
and the rest's totals, against the step's wall time that `folio bench` reports without ncu.

    bench/decode_profile.py --folio build-gpu/folio --model DIR_OR_GGUF [--steps 4] [--out CSV]
                            [--batch B --depth D] [--detail REGEX [--detail-count 12]]

--batch B (> 1) profiles a step of B requests decoding together at a context of about --depth
tokens (`folio bench verify --max-k 0`: B prompts of D random tokens prefilled, then plain decode
steps), and first times the same steps without ncu, so that the device time of the step can be
set against its wall time (the rest is the host's share and the gaps between kernels). The GPU's
default of 512 prompt tokens a step beside decodes would take B * D / 512 steps to admit every
request (and the first would finish first): pass `-- --max-prefill-tokens-while-decoding 8192`.

--detail runs ncu a second time on the first --detail-count launches whose demangled name
matches REGEX, with the sections that say why a kernel is slow (speed of light, occupancy,
scheduler and warp-state statistics: issue-slot use and stall reasons), printed as ncu's text.

A step starts at the embedding kernel (`embed_kernel`); a decode step is one whose kernels
include no prefill attention. ncu serializes kernels (no overlap) and adds no time to a
kernel's own duration, so the sum is the step's device time without launch gaps; graphs are
profiled node by node.
"""
import argparse
import csv
import glob
import io
import json
import os
import re
import shutil
import subprocess
import sys
from collections import OrderedDict


def find_ncu():
    found = shutil.which("ncu")
    if found:
        return found
    candidates = sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu") + glob.glob("/usr/local/cuda*/bin/ncu"))
    return candidates[-1] if candidates else None


def bench_command(folio, model, steps, batch, depth, extra):
    if batch > 1:
        return [folio, "bench", "verify", "-m", model, "--device", "cuda", "--batch", str(batch), "--depth",
                str(depth), "--max-k", "0", "--steps", str(steps)] + extra
    return [folio, "bench", "-m", model, "--device", "cuda", "-p", str(depth), "-n", str(steps), "-r", "1"] + extra


def wall_step_ms(folio, model, batch, depth, extra):
    """The median wall time of a decode step at this batch without ncu (bench verify's figure)."""
    cmd = bench_command(folio, model, 16, batch, depth, extra + ["--json"])
    print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.stderr.write(done.stderr[-4000:])
        sys.exit(f"folio bench verify exited with {done.returncode}")
    rows = json.loads(done.stdout[done.stdout.find("["):])
    return next(r["step_ms"] for r in rows if r["k"] == 0)


# The decode-only step the executor brackets with cudaProfilerStart / Stop under --batch (the
# first may capture a graph after an eager run).
PROFILED_DECODE_STEP = 3


def profile_window(window):
    """ncu flags and environment that profile one decode step alone (window) rather than the
    thousands of prefill kernels before it, or the whole run."""
    if not window:
        return [], None
    return ["--profile-from-start", "off"], dict(os.environ, FOLIO_PROFILE_DECODE_STEP=str(PROFILED_DECODE_STEP))


def run_ncu(ncu, command, window):
    flags, env = profile_window(window)
    cmd = [ncu, "--clock-control", "none", "--metrics", "gpu__time_duration.sum", "--csv", "--page", "raw",
           "--print-units", "base"] + flags + command
    print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        sys.stderr.write(done.stderr[-4000:])
        sys.exit(f"ncu exited with {done.returncode}")
    return done.stdout


def run_detail(ncu, command, regex, count, window):
    cmd = [ncu, "--clock-control", "none", "--kernel-name-base", "demangled", "--kernel-name", "regex:" + regex,
           "--launch-count", str(count)]
    flags, env = profile_window(window)
    cmd += flags
    for section in ("SpeedOfLight", "Occupancy", "LaunchStats", "SchedulerStats", "WarpStateStats",
                    "MemoryWorkloadAnalysis"):
        cmd += ["--section", section]
    cmd += command
    print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    start = done.stdout.find("==PROF==")
    print(done.stdout[start if start >= 0 else 0:])
    if done.returncode != 0:
        sys.stderr.write(done.stderr[-4000:])
        sys.exit(f"ncu --detail exited with {done.returncode}")


def parse(text):
    # ncu prints the program's own output first; the CSV starts at the header line.
    start = text.find('"ID"')
    if start < 0:
        sys.exit("no ncu CSV in the output:\n" + text[-3000:])
    rows = list(csv.DictReader(io.StringIO(text[start:])))
    kernels = []
    for row in rows:
        value = row.get("gpu__time_duration.sum", "")
        try:
            ns = float(value.replace(",", ""))
        except ValueError:
            continue  # the units row
        kernels.append((row["Kernel Name"], ns / 1e3))
    return kernels


def short_name(name):
    name = re.sub(r"\(.*$", "", name)  # drop the argument list
    name = re.sub(r"^void ", "", name)
    name = re.sub(r"<.*>$", lambda m: "<" + str(m.group(0).count(",") + 1) + " args>" if len(m.group(0)) > 60 else m.group(0), name)
    return name[:90]


def steps_of(kernels):
    steps, current = [], []
    for name, us in kernels:
        if "embed_kernel" in name and current:
            steps.append(current)
            current = []
        current.append((name, us))
    if current:
        steps.append(current)
    return steps


def is_gemm(name):
    return bool(re.search(r"gemm|gemv|Gemm|cutlass|sm90_xmma|nvjet|matmul|int4_|int8_|fp8_small", name))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--folio", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--batch", type=int, default=1, help="requests decoding together (> 1: bench verify)")
    ap.add_argument("--depth", type=int, help="context tokens before the decode steps (default 32, 1000 with --batch)")
    ap.add_argument("--out", help="write every kernel (step, name, us) here as CSV")
    ap.add_argument("--detail", help="also print ncu's sections for kernels matching this regex")
    ap.add_argument("--detail-count", type=int, default=12)
    ap.add_argument("extra", nargs="*", help="more `folio bench` flags, after --")
    args = ap.parse_args()
    ncu = find_ncu()
    if ncu is None:
        sys.exit("ncu (Nsight Compute) not found")
    depth = args.depth if args.depth else (1000 if args.batch > 1 else 32)
    command = bench_command(args.folio, args.model, args.steps, args.batch, depth, args.extra)
    wall = wall_step_ms(args.folio, args.model, args.batch, depth, args.extra) if args.batch > 1 else None
    kernels = parse(run_ncu(ncu, command, window=args.batch > 1))
    steps = steps_of(kernels)
    decode = [s for s in steps if not any("prefill" in n for n, _ in s)]
    if not decode:
        sys.exit(f"no decode step among {len(steps)} steps ({len(kernels)} kernels)")
    if args.out:
        with open(args.out, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["step", "kernel", "us"])
            for i, s in enumerate(steps):
                for n, us in s:
                    w.writerow([i, n, f"{us:.3f}"])
    step = decode[-1]
    total = sum(us for _, us in step)
    folded = OrderedDict()
    for name, us in step:
        key = short_name(name)
        count, sum_us = folded.get(key, (0, 0.0))
        folded[key] = (count + 1, sum_us + us)
    print(f"decode step at batch {args.batch}, depth {depth}: {len(step)} kernels, {total:.1f} us of device time "
          f"({len(steps)} steps profiled, {len(decode)} decode)")
    if wall is not None:
        print(f"wall time of the step without ncu (median of 16): {wall * 1e3:.1f} us; device share "
              f"{100 * total / (wall * 1e3):.1f}%")
    print(f"{'kernel':<92} {'count':>5} {'us':>9} {'share':>6}")
    for key, (count, us) in sorted(folded.items(), key=lambda kv: -kv[1][1]):
        print(f"{key:<92} {count:>5} {us:>9.1f} {100 * us / total:>5.1f}%")
    gemm = sum(us for n, us in step if is_gemm(n))
    print(f"RESULT decode_profile batch={args.batch} depth={depth} kernels={len(step)} device_us={total:.1f} "
          f"gemm_us={gemm:.1f} other_us={total - gemm:.1f} other_kernels={sum(1 for n, _ in step if not is_gemm(n))}"
          + (f" wall_us={wall * 1e3:.1f}" if wall is not None else ""))
    if args.detail:
        run_detail(ncu, command, args.detail, args.detail_count, window=args.batch > 1)


if __name__ == "__main__":
    main()
