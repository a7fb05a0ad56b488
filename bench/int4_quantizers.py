#!/usr/bin/env python3
"""folio's 4-bit checkpoint writers side by side (issue 13): round to nearest, GPTQ (plain and
act-order) and AWQ made by `folio quantize` from one F32 / F16 / BF16 Hugging Face directory,
each scored by `folio perplexity --kl-reference SOURCE` (perplexity, mean KL divergence from the
source's next-token distributions, top-1 agreement) on a text the calibration did not see.

  python3 bench/int4_quantizers.py --source ~/.cache/folio/models/hf/smollm2-f32 --group-size 64
  python3 bench/int4_quantizers.py --source ~/.cache/folio/models/hf/gemma3-f32 --group-size 128

The calibration text is Debian's GPL-2, LGPL-2.1 and Artistic license texts concatenated; the
evaluation text tests/data/perplexity.txt (GPL-3, Apache-2.0, MPL-2.0)."""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FOLIO = os.path.join(ROOT, "build", "folio")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", required=True)
    ap.add_argument("--group-size", type=int, default=128)
    ap.add_argument("--calibration-tokens", type=int, default=2048)
    ap.add_argument("--chunks", type=int, default=6)
    ap.add_argument("--only", default="", help="comma-separated variant labels, e.g. 'AWQ,AWQ without clipping'")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="int4-quantizers-")
    calibration = os.path.join(work, "calibration.txt")
    with open(calibration, "w") as out:
        for name in ("GPL-2", "LGPL-2.1", "Artistic"):
            out.write(open(f"/usr/share/common-licenses/{name}", errors="replace").read())
    variants = [("round to nearest (int4)", ["--type", "int4"]),
                ("GPTQ", ["--type", "gptq"]),
                ("GPTQ act-order", ["--type", "gptq", "--act-order"]),
                ("AWQ", ["--type", "awq"]),
                ("AWQ without clipping", ["--type", "awq", "--no-clip"])]
    if args.only:
        variants = [v for v in variants if v[0] in args.only.split(",")]
    print(f"| {os.path.basename(args.source.rstrip('/'))} g{args.group_size} | quantize time | perplexity | delta "
          "| mean KL | top-1 agreement |")
    print("|---|---|---|---|---|---|")
    for label, extra in variants:
        out = os.path.join(work, label.replace(" ", "-").lower())
        start = time.perf_counter()
        done = subprocess.run([FOLIO, "quantize", args.source, out, "--group-size", str(args.group_size), "-q",
                               "--calibration-text", calibration, "--calibration-tokens",
                               str(args.calibration_tokens), *extra], capture_output=True, text=True)
        seconds = time.perf_counter() - start
        if done.returncode != 0:
            sys.exit(f"{label}: {done.stderr[-1000:]}")
        done = subprocess.run([FOLIO, "perplexity", "-m", out, "-f", os.path.join(ROOT, "tests/data/perplexity.txt"),
                               "-c", "512", "--chunks", str(args.chunks), "--kl-reference", args.source],
                              capture_output=True, text=True)
        m = re.search(r"reference \S+ ([\d.]+), model ([\d.]+) \(([-+\d.]+)%\); mean KL ([\d.]+) nats \(max [\d.]+\), "
                      r"top-1 agreement ([\d.]+)%", done.stdout)
        if not m:
            sys.exit(f"{label}: cannot parse {done.stdout} {done.stderr[-500:]}")
        print(f"| {label} | {seconds:.0f} s | {float(m.group(2)):.4f} (source {float(m.group(1)):.4f}) "
              f"| {float(m.group(3)):+.2f}% | {float(m.group(4)):.4f} | {float(m.group(5)):.2f}% |", flush=True)


if __name__ == "__main__":
    main()
