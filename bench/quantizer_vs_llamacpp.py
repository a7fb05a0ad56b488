#!/usr/bin/env python3
"""`folio quantize` against llama.cpp's quantizer on the same source weights (issue 13): the
default model decoded to F16 by folio, re-encoded as Q8_0 and Q4_K_M by each, then every file
scored by the same program (`folio perplexity --kl-reference f16.gguf`: perplexity, mean KL
divergence from the F16 model's next-token distributions, top-1 agreement) over the same text.

  /tmp/refvenv/bin/python bench/quantizer_vs_llamacpp.py [--chunks 6] [--threads 2] [--imatrix-text F]

llama.cpp quantizes through llama-cpp-python's llama_model_quantize (the library under
llama-quantize), without an importance matrix (llama-cpp-python has no imatrix tool); folio's
rows without one are the like-for-like comparison, and --imatrix-text adds folio's with one.
Quantization wall time is measured for both (same threads)."""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

import llama_cpp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FOLIO = os.path.join(ROOT, "build", "folio")
MODELS = os.environ.get("FOLIO_MODELS_DIR", os.path.expanduser("~/.cache/folio/models"))
FTYPES = {"q8_0": llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0, "q4_k_m": llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_K_M}


def run(cmd):
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
    return done, time.perf_counter() - start


def llamacpp_quantize(src, dst, ftype, threads):
    params = llama_cpp.llama_model_quantize_default_params()
    params.nthread = threads
    params.ftype = ftype
    start = time.perf_counter()
    rc = llama_cpp.llama_model_quantize(src.encode(), dst.encode(), params)
    if rc != 0:
        sys.exit(f"llama_model_quantize({dst}) returned {rc}")
    return time.perf_counter() - start


def score(path, reference, text, chunks, threads):
    done, _ = run([FOLIO, "perplexity", "-m", path, "-f", text, "-c", "512", "--chunks", str(chunks), "-t",
                   str(threads), "--kl-reference", reference])
    m = re.search(r"reference \S+ ([\d.]+), model ([\d.]+) \(([-+\d.]+)%\); mean KL ([\d.]+) nats \(max ([\d.]+)\), "
                  r"top-1 agreement ([\d.]+)%", done.stdout)
    if not m:
        sys.exit(f"cannot parse: {done.stdout}")
    return {"ref_ppl": float(m.group(1)), "ppl": float(m.group(2)), "delta": float(m.group(3)),
            "kl": float(m.group(4)), "top1": float(m.group(6))}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=os.path.join(MODELS, "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--text", default=os.path.join(ROOT, "tests/data/perplexity.txt"))
    ap.add_argument("--chunks", type=int, default=6)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--imatrix-text", default="")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="quantizer-vs-llamacpp-")
    f16 = os.path.join(work, "f16.gguf")
    run([FOLIO, "quantize", "-q", args.model, f16, "--type", "f16"])
    rows = []
    for name, ftype in FTYPES.items():
        ours = os.path.join(work, f"folio-{name}.gguf")
        _, folio_s = run([FOLIO, "quantize", "-q", "-t", str(args.threads), f16, ours, "--type", name])
        theirs = os.path.join(work, f"llamacpp-{name}.gguf")
        llama_s = llamacpp_quantize(f16, theirs, ftype, args.threads)
        print(f"{name}: folio {folio_s:.1f} s, llama.cpp {llama_s:.1f} s", file=sys.stderr, flush=True)
        rows.append((f"folio {name}", ours, folio_s))
        rows.append((f"llama.cpp {name}", theirs, llama_s))
        if args.imatrix_text:
            weighted = os.path.join(work, f"folio-{name}-imatrix.gguf")
            _, t = run([FOLIO, "quantize", "-q", "-t", str(args.threads), f16, weighted, "--type", name,
                        "--imatrix-text", args.imatrix_text])
            rows.append((f"folio {name} + imatrix", weighted, t))
    print(f"| file | size | quantize time | perplexity (F16 reference) | delta | mean KL | top-1 |")
    print("|---|---|---|---|---|---|---|")
    for label, path, seconds in rows:
        s = score(path, f16, args.text, args.chunks, args.threads)
        print(f"| {label} | {os.path.getsize(path) / 2**20:.1f} MiB | {seconds:.1f} s | {s['ppl']:.4f} "
              f"({s['ref_ppl']:.4f}) | {s['delta']:+.3f}% | {s['kl']:.5f} | {s['top1']:.2f}% |", flush=True)


if __name__ == "__main__":
    main()
