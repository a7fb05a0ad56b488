#!/usr/bin/env python3
"""pp512 / tg128 (and peak RSS) of folio and llama.cpp side by side, on the same GGUF, same machine, same run.

  /tmp/refvenv/bin/python bench/cpu_vs_llamacpp.py [--model M] [--reps 5] [--threads N]

llama.cpp runs through llama-cpp-python's low-level API (llama_decode on a llama_batch, no
Python work per token beyond the call), measured like llama-bench: ppN = N random tokens from
an empty cache in one batch; tgN = N single-token decodes from an empty cache. folio runs
`folio bench --json` with the same N, repetitions and threads. The two alternate, one
repetition each at a time, so drift in the machine's speed hits both alike.
"""
import argparse
import ctypes
import json
import os
import random
import statistics
import subprocess
import sys
import time

import llama_cpp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def llamacpp_setup(model_path, threads, ctx):
    llama_cpp.llama_backend_init()
    mparams = llama_cpp.llama_model_default_params()
    model = llama_cpp.llama_model_load_from_file(model_path.encode(), mparams)
    cparams = llama_cpp.llama_context_default_params()
    cparams.n_ctx = ctx
    cparams.n_batch = 512
    cparams.n_ubatch = 512
    cparams.n_threads = threads
    cparams.n_threads_batch = threads
    context = llama_cpp.llama_init_from_model(model, cparams)
    vocab = llama_cpp.llama_model_get_vocab(model)
    return model, context, llama_cpp.llama_vocab_n_tokens(vocab)


def llamacpp_run(context, tokens):
    llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(context), True)
    array = (llama_cpp.llama_token * len(tokens))(*tokens)
    start = time.perf_counter()
    if llama_cpp.llama_decode(context, llama_cpp.llama_batch_get_one(array, len(tokens))) != 0:
        raise RuntimeError("llama_decode failed")
    llama_cpp.llama_synchronize(context)
    return time.perf_counter() - start


def llamacpp_generate(context, tokens):
    llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(context), True)
    start = time.perf_counter()
    one = (llama_cpp.llama_token * 1)()
    for t in tokens:
        one[0] = t
        if llama_cpp.llama_decode(context, llama_cpp.llama_batch_get_one(one, 1)) != 0:
            raise RuntimeError("llama_decode failed")
        llama_cpp.llama_synchronize(context)
    return time.perf_counter() - start


def folio_once(binary, model, n_prompt, n_gen, threads):
    """(ppN tok/s, tgN tok/s, peak RSS MiB) of one `folio bench` process."""
    out = subprocess.run([binary, "bench", "-m", model, "-p", str(n_prompt), "-n", str(n_gen), "-r", "1",
                          "-t", str(threads), "--json"], check=True, capture_output=True, text=True).stdout
    rows = {json.loads(line)["test"]: json.loads(line) for line in out.splitlines() if line.strip()}
    pp, tg = rows[f"pp{n_prompt}"], rows[f"tg{n_gen}"]
    return pp["median_tps"], tg["median_tps"], tg["peak_rss_mib"]


def peak_rss_mib():
    """This process's peak resident set: VmHWM, not getrusage's ru_maxrss, which after exec still
    counts the parent the process was forked from."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    raise RuntimeError("no VmHWM in /proc/self/status")


def llamacpp_rss(args, load):
    """Peak RSS (MiB) of a fresh Python process that imports llama_cpp and, with load, loads the
    model and runs one ppN and one tgN as the timed runs do."""
    child = [sys.executable, os.path.abspath(__file__), "--model", args.model, "--threads", str(args.threads),
             "--n-prompt", str(args.n_prompt), "--n-gen", str(args.n_gen), "--rss-child", "load" if load else "import"]
    return float(subprocess.run(child, check=True, capture_output=True, text=True).stdout.split()[-1])


def rss_child(args):
    if args.rss_child == "load":
        _, context, vocab = llamacpp_setup(args.model, args.threads, args.n_prompt + args.n_gen + 16)
        rng = random.Random(1)
        llamacpp_run(context, [rng.randrange(vocab) for _ in range(args.n_prompt)])
        llamacpp_generate(context, [rng.randrange(vocab) for _ in range(args.n_gen)])
    else:
        llama_cpp.llama_backend_init()
    print(f"{peak_rss_mib():.1f}")


def describe(values):
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default=os.path.expanduser("~/.cache/folio/models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    p.add_argument("--folio", default=os.path.join(ROOT, "build", "folio"))
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--n-prompt", type=int, default=512)
    p.add_argument("--n-gen", type=int, default=128)
    p.add_argument("--rss-child", choices=["load", "import"], help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.rss_child:
        return rss_child(args)

    # Peak resident sets first, one fresh process each, before this process maps the model: folio
    # hands its stored weight pages back once packed (MADV_PAGEOUT), which the kernel declines
    # for pages another process maps too. llama.cpp runs inside Python: the same process
    # importing llama_cpp without a model is measured beside it.
    folio_rss = folio_once(args.folio, args.model, args.n_prompt, args.n_gen, args.threads)[2]
    llama_rss, python_rss = llamacpp_rss(args, True), llamacpp_rss(args, False)

    model, context, vocab = llamacpp_setup(args.model, args.threads, args.n_prompt + args.n_gen + 16)
    rng = random.Random(1234)
    results = {"folio_pp": [], "folio_tg": [], "llama_pp": [], "llama_tg": []}
    # Warm-up of both, untimed.
    llamacpp_run(context, [rng.randrange(vocab) for _ in range(args.n_prompt)])
    folio_once(args.folio, args.model, args.n_prompt, args.n_gen, args.threads)
    for rep in range(args.reps):
        pp = llamacpp_run(context, [rng.randrange(vocab) for _ in range(args.n_prompt)])
        tg = llamacpp_generate(context, [rng.randrange(vocab) for _ in range(args.n_gen)])
        results["llama_pp"].append(args.n_prompt / pp)
        results["llama_tg"].append(args.n_gen / tg)
        fpp, ftg, _ = folio_once(args.folio, args.model, args.n_prompt, args.n_gen, args.threads)
        results["folio_pp"].append(fpp)
        results["folio_tg"].append(ftg)
        print(f"rep {rep + 1}/{args.reps}: llama.cpp pp {args.n_prompt / pp:.1f} tg {args.n_gen / tg:.1f} | "
              f"folio pp {fpp:.1f} tg {ftg:.1f}", file=sys.stderr)

    pp_ratio = statistics.median(results["folio_pp"]) / statistics.median(results["llama_pp"])
    tg_ratio = statistics.median(results["folio_tg"]) / statistics.median(results["llama_tg"])
    print(f"| test | folio tok/s | llama.cpp tok/s | folio / llama.cpp |")
    print(f"|---|---|---|---|")
    print(f"| pp{args.n_prompt} | {describe(results['folio_pp'])} | {describe(results['llama_pp'])} | {pp_ratio:.2f} |")
    print(f"| tg{args.n_gen} | {describe(results['folio_tg'])} | {describe(results['llama_tg'])} | {tg_ratio:.2f} |")
    print(f"| peak RSS, MiB | {folio_rss:.1f} | {llama_rss:.1f} (Python + llama_cpp without a model: "
          f"{python_rss:.1f}; difference {llama_rss - python_rss:.1f}) | |")
    print(f"\n{args.threads} threads, median (min-max) of {args.reps} runs each, llama-cpp-python "
          f"{llama_cpp.__version__}")


if __name__ == "__main__":
    main()
