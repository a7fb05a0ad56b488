#!/usr/bin/env python3
"""pp512 / tg128 of folio and llama.cpp side by side, on the same GGUF, same machine, same run.

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
    out = subprocess.run([binary, "bench", "-m", model, "-p", str(n_prompt), "-n", str(n_gen), "-r", "1",
                          "-t", str(threads), "--json"], check=True, capture_output=True, text=True).stdout
    rows = {json.loads(line)["test"]: json.loads(line)["median_tps"] for line in out.splitlines() if line.strip()}
    return rows[f"pp{n_prompt}"], rows[f"tg{n_gen}"]


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
    args = p.parse_args()

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
        fpp, ftg = folio_once(args.folio, args.model, args.n_prompt, args.n_gen, args.threads)
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
    print(f"\n{args.threads} threads, median (min-max) of {args.reps} runs each, llama-cpp-python "
          f"{llama_cpp.__version__}")


if __name__ == "__main__":
    main()
