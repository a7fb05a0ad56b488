#!/usr/bin/env python3
"""Serving at the TensorRT-LLM shapes and under Poisson load, against `folio serve` and, side by
side, any other OpenAI-compatible server (issues 15 and 16).

  python3 bench/serve_shapes.py --folio build/folio --model MODEL [--serve-args "..."]
                                [--other-url http://HOST:PORT --other-name vllm]
                                [--shapes single,128x128,1000x1000,2048x2048,poisson] [--out DIR]
                                [--tokenizer-model GGUF] [--prompt-scale 1.0] [--bound H200:8b]

One client for every server: `folio bench serve` sends identical token-id prompts (a fixed seed)
to each, /v1/completions, ignore_eos, temperature 0. `folio serve` is started here with its
defaults (plus --serve-args) unless --folio-url names a running one. Shapes:
  single     128 in / 256 out, 16 requests one at a time
  128x128    2,048 requests at once;  1000x1000: 768 at once;  2048x2048: 512 at once
  poisson    ShareGPT-like lengths: all at once (the saturation request rate), then Poisson
             arrivals at half the first server's saturation rate, the same rate for every server
             (issue 15: ITL P99 within 3x its median there)
Per shape and server it prints output tok/s, TTFT, TPOT and ITL percentiles, and the ratio to the
first server; with --bound, the workload's physical bound (bound_tok_s below) and the share of it
reached. Every run's JSON (`folio bench serve --json`) goes to --out; bench/plot_serve.py draws
them.
"""
import argparse
import json
import math
import os
import socket
import subprocess
import sys
import time
import urllib.request

SHAPES = {
    "single": dict(dataset="fixed", input_len=128, output_len=256, num_prompts=16, max_concurrency=1),
    "128x128": dict(dataset="fixed", input_len=128, output_len=128, num_prompts=2048),
    "1000x1000": dict(dataset="fixed", input_len=1000, output_len=1000, num_prompts=768),
    "2048x2048": dict(dataset="fixed", input_len=2048, output_len=2048, num_prompts=512),
}
POISSON_PROMPTS = 1024

# Hardware and model figures for the bound: peak dense BF16 FLOP/s, HBM bytes/s; the model's
# parameters (2 FLOP per parameter per token), weight bytes read per step and KV bytes per token.
BOUNDS = {
    "H200:8b": dict(flops=989e12, hbm=4.8e12, params=8.03e9, weight_bytes=16.06e9, kv_per_token=131072,
                    kv_capacity_tokens=830_000, max_seqs=1024),
}


def bound_tok_s(b, num_prompts, input_len, output_len, concurrency=None):
    """Output tokens per second no engine can beat on this hardware: the time is at least the
    FLOPs over the peak (every token's 2 x params, prefill and decode) and at least the bytes
    over the bandwidth (each decode step reads the weights once and every running sequence's
    K/V). Sequences run in waves of what fits (max_seqs, the KV pool at full length)."""
    per_seq = input_len + output_len
    running = concurrency or min(num_prompts, b["max_seqs"], max(1, b["kv_capacity_tokens"] // per_seq))
    waves = math.ceil(num_prompts / running)
    t_flops = 2.0 * b["params"] * num_prompts * per_seq / b["flops"]
    avg_context = input_len + output_len / 2.0
    step_bytes = b["weight_bytes"] + running * avg_context * b["kv_per_token"]
    t_bytes = waves * output_len * step_bytes / b["hbm"]
    return num_prompts * output_len / max(t_flops, t_bytes)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(url, proc, limit_s=600):
    start = time.time()
    while time.time() - start < limit_s:
        if proc is not None and proc.poll() is not None:
            return False
        try:
            urllib.request.urlopen(url + "/health", timeout=2)
            return True
        except Exception:
            time.sleep(1)
    return False


def bench(folio, url, tokenizer_model, out_json, shape, rate="inf", scale=1.0, name=""):
    cmd = [folio, "bench", "serve", "--base-url", url, "--tokenizer-model", tokenizer_model, "--ignore-eos",
           "--request-rate", str(rate), "--json", out_json, "--seed", "0"]
    if shape.get("dataset") == "fixed":
        cmd += ["--dataset", "fixed", "--input-len", str(shape["input_len"]), "--output-len", str(shape["output_len"])]
    else:
        cmd += ["--dataset", "sharegpt-like", "--scale", str(scale)]
    cmd += ["--num-prompts", str(shape["num_prompts"])]
    if shape.get("max_concurrency"):
        cmd += ["--max-concurrency", str(shape["max_concurrency"])]
    print(f"  {name}: {' '.join(cmd[1:])}", flush=True)
    if subprocess.run(cmd, stdout=subprocess.DEVNULL).returncode != 0:
        print(f"  {name}: folio bench serve failed; the shape is left out", flush=True)
        return None
    with open(out_json) as f:
        r = json.load(f)
    r.pop("requests", None)
    return r


def row(label, name, r, first=None, bound=None):
    itl_ratio = r["itl"]["p99_ms"] / r["itl"]["median_ms"] if r["itl"]["median_ms"] > 0 else float("nan")
    ratio = "1.00x"
    if first:
        ratio = f"{r['output_throughput'] / first['output_throughput']:.2f}x" if first["output_throughput"] > 0 else "-"
    share = f"{100 * r['output_throughput'] / bound:.0f}%" if bound else "-"
    return (f"| {label} | {name} | {r['completed']}/{r['completed'] + r['failed']} | {r['output_throughput']:,.0f} | "
            f"{ratio} | {share} | {r['ttft']['median_ms']:.0f} / {r['ttft']['p99_ms']:.0f} | "
            f"{r['tpot']['median_ms']:.2f} | {r['itl']['median_ms']:.1f} / {r['itl']['p99_ms']:.1f} "
            f"({itl_ratio:.1f}x) |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--folio", default="build/folio")
    ap.add_argument("--model", help="what `folio serve` serves (not needed with --folio-url)")
    ap.add_argument("--serve-args", default="--device cuda", help="extra `folio serve` arguments")
    ap.add_argument("--folio-url", help="a running folio server instead of starting one")
    ap.add_argument("--other-url", help="another OpenAI-compatible server, measured after folio")
    ap.add_argument("--other-name", default="other")
    ap.add_argument("--tokenizer-model", help="GGUF whose tokenizer makes the prompts (default: --model)")
    ap.add_argument("--shapes", default="single,128x128,1000x1000,2048x2048,poisson")
    ap.add_argument("--prompt-scale", type=float, default=1.0,
                    help="multiplies every shape's request count (a quick run: 0.1)")
    ap.add_argument("--bound", choices=sorted(BOUNDS), help="print each fixed shape's share of the physical bound")
    ap.add_argument("--out", default="serve-shapes")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    tokenizer_model = args.tokenizer_model or args.model
    shapes = [s.strip() for s in args.shapes.split(",") if s.strip()]
    for s in shapes:
        if s not in SHAPES and s != "poisson":
            sys.exit(f"unknown shape {s}: one of {', '.join(list(SHAPES) + ['poisson'])}")

    proc = None
    servers = []
    if args.folio_url:
        servers.append(("folio", args.folio_url.rstrip("/")))
    else:
        port = free_port()
        log = open(os.path.join(args.out, "folio-serve.log"), "w")
        cmd = [args.folio, "serve", "-m", args.model, "--host", "127.0.0.1", "--port", str(port)]
        cmd += args.serve_args.split()
        print("starting:", " ".join(cmd), flush=True)
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        servers.append(("folio", f"http://127.0.0.1:{port}"))
    if args.other_url:
        servers.append((args.other_name, args.other_url.rstrip("/")))
    try:
        for name, url in servers:
            if not wait_healthy(url, proc if name == "folio" else None):
                sys.exit(f"{name} at {url} did not come up (see {args.out}/folio-serve.log)")
        results = {}
        for shape_name in shapes:
            runs = []
            if shape_name == "poisson":
                n = max(16, int(POISSON_PROMPTS * args.prompt_scale))
                base = dict(dataset="sharegpt-like", num_prompts=n)
                # Every server at one offered load: half of the first server's saturation rate.
                rate = None
                for name, url in servers:
                    sat = bench(args.folio, url, tokenizer_model, f"{args.out}/{name}-poisson-sat.json", base, name=name)
                    if sat is None:
                        continue
                    runs.append(("sharegpt-like, all at once", name, sat))
                    if rate is None:
                        rate = round(sat["request_throughput"] / 2, 2)
                    half = bench(args.folio, url, tokenizer_model, f"{args.out}/{name}-poisson-half.json", base,
                                 rate=rate, name=name)
                    if half is not None:
                        runs.append((f"sharegpt-like, Poisson {rate} req/s", name, half))
            else:
                shape = dict(SHAPES[shape_name])
                if shape_name != "single":
                    shape["num_prompts"] = max(8, int(shape["num_prompts"] * args.prompt_scale))
                for name, url in servers:
                    r = bench(args.folio, url, tokenizer_model, f"{args.out}/{name}-{shape_name}.json", shape, name=name)
                    if r is not None:
                        runs.append((shape_name, name, r))
            results[shape_name] = runs
            print("| shape | server | done | output tok/s | vs first | of bound | TTFT p50 / p99 ms | TPOT p50 ms | "
                  "ITL p50 / p99 ms (p99/p50) |")
            print("|---|---|---|---|---|---|---|---|---|")
            firsts = {}
            for label, name, r in runs:
                bound = None
                if args.bound and shape_name in SHAPES:
                    s = dict(SHAPES[shape_name])
                    n = r["completed"]
                    bound = bound_tok_s(BOUNDS[args.bound], n, s["input_len"], s["output_len"],
                                        s.get("max_concurrency"))
                first = firsts.setdefault(label, r)
                print(row(label, name, r, first if first is not r else None, bound), flush=True)
        with open(os.path.join(args.out, "summary.json"), "w") as f:
            json.dump({k: [dict(label=l, server=n, **r) for l, n, r in v] for k, v in results.items()}, f, indent=1)
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


if __name__ == "__main__":
    main()
