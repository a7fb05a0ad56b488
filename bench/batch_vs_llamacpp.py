#!/usr/bin/env python3
"""Issue 3's mixed-length workload: folio's continuous batching vs llama.cpp's parallel decoding.

  /tmp/refvenv/bin/python bench/batch_vs_llamacpp.py [--scale 1] [--num-requests 64] [--reps 1]

Both serve the same requests (folio writes them with `bench batch --dump-workload`, so the
token ids are identical) on the same GGUF: greedy, no end-of-sequence stop, every request
generating exactly its max_tokens. folio runs `folio bench batch --workloads mixed --json`
(its continuous-batching and one-at-a-time rows). llama.cpp runs through llama-cpp-python's
low-level API the way its `parallel` example serves clients: one sequence id per request, one
llama_decode per step over a llama_batch that holds every running request's next token plus
prompt chunks of newly admitted ones, up to n_batch tokens (folio's scheduling policy, so the
difference is the engines, not the schedules). Greedy sampling is a numpy argmax over the
logits row. The two alternate per repetition, so drift in the machine's speed hits both.
"""
import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import llama_cpp
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_workload(folio, model, args):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "workload.jsonl")
        subprocess.run([folio, "bench", "batch", "-m", model, "--scale", str(args.scale), "--num-requests",
                        str(args.num_requests), "--corpus", args.corpus, "--dump-workload", path],
                       check=True, capture_output=True)
        with open(path) as f:
            rows = [json.loads(line) for line in f if line.strip()]
    return [r for r in rows if r["workload"] == "mixed lengths"]


class LlamaServer:
    def __init__(self, model_path, threads, n_seq, n_ctx_per_seq, n_batch, unified):
        llama_cpp.llama_backend_init()
        self.model = llama_cpp.llama_model_load_from_file(model_path.encode(), llama_cpp.llama_model_default_params())
        p = llama_cpp.llama_context_default_params()
        p.n_seq_max = n_seq
        p.n_ctx = n_seq * n_ctx_per_seq
        p.n_batch = n_batch
        p.n_ubatch = n_batch
        p.n_threads = threads
        p.n_threads_batch = threads
        p.kv_unified = unified
        self.ctx = llama_cpp.llama_init_from_model(self.model, p)
        self.vocab = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(self.model))
        self.n_batch = n_batch
        self.n_seq = n_seq
        self.batch = llama_cpp.llama_batch_init(n_batch, 0, 1)

    def close(self):
        llama_cpp.llama_batch_free(self.batch)
        llama_cpp.llama_free(self.ctx)
        llama_cpp.llama_model_free(self.model)

    def serve(self, requests):
        """All requests submitted at once; returns (seconds, output tokens, each request's tokens)."""
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(self.ctx), True)
        memory = llama_cpp.llama_get_memory(self.ctx)
        states = [dict(prompt=r["prompt"], max_tokens=r["max_tokens"], done=0, out=[]) for r in requests]
        waiting = states[::-1]  # pop() takes the first
        running, free_seqs, b = [], list(range(self.n_seq - 1, -1, -1)), self.batch
        output_tokens = 0
        start = time.perf_counter()
        while waiting or running:
            b.n_tokens = 0
            sampled = []  # (request, batch row)

            def add(req, tokens, first_pos, wants_logits):
                for k, t in enumerate(tokens):
                    i = b.n_tokens
                    b.token[i] = t
                    b.pos[i] = first_pos + k
                    b.n_seq_id[i] = 1
                    b.seq_id[i][0] = req["seq"]
                    b.logits[i] = 1 if (wants_logits and k == len(tokens) - 1) else 0
                    b.n_tokens += 1
                if wants_logits:
                    sampled.append((req, b.n_tokens - 1))

            budget = self.n_batch
            for req in running:  # decode tokens and unfinished prompt chunks first
                if budget == 0:
                    break
                if req["done"] < len(req["prompt"]):
                    n = min(len(req["prompt"]) - req["done"], budget)
                    add(req, req["prompt"][req["done"]:req["done"] + n], req["done"], req["done"] + n == len(req["prompt"]))
                    req["done"] += n
                else:
                    n = 1
                    add(req, [req["out"][-1]], len(req["prompt"]) + len(req["out"]) - 1, True)
                budget -= n
            while budget > 0 and waiting and free_seqs:  # then admit new requests
                req = waiting.pop()
                req["seq"] = free_seqs.pop()
                running.append(req)
                n = min(len(req["prompt"]), budget)
                add(req, req["prompt"][:n], 0, n == len(req["prompt"]))
                req["done"] = n
                budget -= n
            if llama_cpp.llama_decode(self.ctx, b) != 0:
                raise RuntimeError("llama_decode failed (KV cache full?)")
            for req, row in sampled:
                logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(self.ctx, row), shape=(self.vocab,))
                req["out"].append(int(logits.argmax()))
                output_tokens += 1
                if len(req["out"]) == req["max_tokens"]:
                    llama_cpp.llama_memory_seq_rm(memory, req["seq"], -1, -1)
                    free_seqs.append(req["seq"])
                    running.remove(req)
        return time.perf_counter() - start, output_tokens, [r["out"] for r in states]


def folio_once(folio, model, args):
    out = subprocess.run([folio, "bench", "batch", "-m", model, "--workloads", "mixed", "--scale", str(args.scale),
                          "--num-requests", str(args.num_requests), "--corpus", args.corpus, "-t", str(args.threads),
                          "--json"], check=True, capture_output=True, text=True).stdout
    rows = {json.loads(line)["serving"]: json.loads(line) for line in out.splitlines() if line.strip()}
    return rows["continuous batching"]["output_tps_median"], rows["one at a time"]["output_tps_median"]


def describe(values):
    if len(values) == 1:
        return f"{values[0]:.1f}"
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default=os.path.expanduser("~/.cache/folio/models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    p.add_argument("--folio", default=os.path.join(ROOT, "build", "folio"))
    p.add_argument("--corpus", default=os.path.join(ROOT, "tests", "data", "perplexity.txt"))
    p.add_argument("--reps", type=int, default=1)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--scale", type=float, default=1.0)
    p.add_argument("--num-requests", type=int, default=64)
    p.add_argument("--n-batch", type=int, default=512)
    # per-sequence: one KV stream per sequence, llama.cpp's advice when sequences share no
    # prefix; unified: one buffer for all, whose attention spans every cell of every sequence
    # (masked), several times slower here.
    p.add_argument("--kv-modes", default="per-sequence")
    args = p.parse_args()
    modes = args.kv_modes.split(",")

    requests = load_workload(args.folio, args.model, args)
    longest = max(len(r["prompt"]) + r["max_tokens"] for r in requests)
    n_seq = min(64, len(requests))
    # Per-sequence context rounded up to 256; a unified cache gets the same total.
    results = {"folio": [], "folio_one": [], **{mode: [] for mode in modes}}
    for rep in range(args.reps):
        for mode in modes:
            # One llama.cpp context at a time: an idle context's threads still poll for work
            # and would slow the one being measured.
            server = LlamaServer(args.model, args.threads, n_seq, (longest + 255) // 256 * 256, args.n_batch,
                                 mode == "unified")
            server.serve(requests[:4])  # warm-up, untimed
            seconds, n_out, _ = server.serve(requests)
            server.close()
            results[mode].append(n_out / seconds)
            print(f"rep {rep + 1}/{args.reps}: llama.cpp {mode} KV {n_out / seconds:.1f} output tok/s", file=sys.stderr)
        batched, one = folio_once(args.folio, args.model, args)
        results["folio"].append(batched)
        results["folio_one"].append(one)
        print(f"rep {rep + 1}/{args.reps}: folio batched {batched:.1f}, one at a time {one:.1f} output tok/s",
              file=sys.stderr)

    folio = statistics.median(results["folio"])
    print("| engine | serving | output tok/s | folio batched / this |")
    print("|---|---|---|---|")
    print(f"| folio | continuous batching | {describe(results['folio'])} | 1.00 |")
    print(f"| folio | one at a time | {describe(results['folio_one'])} | "
          f"{folio / statistics.median(results['folio_one']):.2f} |")
    for mode in modes:
        print(f"| llama.cpp | parallel decoding, {n_seq} sequences, n_batch {args.n_batch}, {mode} KV | "
              f"{describe(results[mode])} | {folio / statistics.median(results[mode]):.2f} |")
    print(f"\n{len(requests)} requests, scale {args.scale}, {args.threads} threads, {args.reps} repetition(s), "
          f"llama-cpp-python {llama_cpp.__version__}")


if __name__ == "__main__":
    main()
