#!/usr/bin/env python3
"""Issue 4's serving benchmark: `folio serve` vs llama.cpp's OpenAI-compatible server
(llama-cpp-python's `llama_cpp.server`), both driven by `folio bench serve`.

  /tmp/refvenv/bin/python bench/serve_vs_llamacpp.py [--folio build/folio] [--rates 0.25,0.5,1,2,inf]
                                                     [--num-prompts 20] [--scale 0.5] [--keep DIR]

About 5 minutes on a quiet 2-vCPU machine with the defaults; more when other work competes for
the cores (the load average is recorded per row). --keep keeps every run's JSON and server log.

Same GGUF, same thread count, same prompts (ShareGPT-like lengths from a fixed seed, texts built
with the model's tokenizer), same Poisson arrival times per rate, greedy, every request
generating exactly its max_tokens. For each rate the two servers run one after the other (the
order alternates from rate to rate, so that drift on a shared machine hits both), each started
fresh and stopped before the other starts: never both running during a measurement.

Making both generate the asked lengths: folio takes "ignore_eos": true. llama-cpp-python's
server (0.3.36) has no ignore_eos and ignores unknown fields; its `min_tokens` only holds back
the single EOS id, while its generation loop stops on every end-of-generation token. So it gets
"logit_bias" -100 on every end-of-generation id of the tokenizer (`--eos-logit-bias`), which
folio refuses and therefore does not get. It also gets "repeat_penalty": 1.0, since its server
defaults to 1.1 where folio (and OpenAI) default to no penalty.

llama-cpp-python's server configured as fairly as its options allow: it serves one request at a
time (a global lock around the model; 0.3.36 has no n_parallel or batching across requests);
--interrupt_requests false, since by default a newly arrived request cuts the running stream
short; n_threads and n_threads_batch as folio's --threads; n_batch 512 as folio's default
token budget per step; n_ctx large enough for the longest request; verbose off.
"""
import argparse
import datetime
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_MODEL = os.path.join(os.environ.get("FOLIO_MODELS_DIR", os.path.expanduser("~/.cache/folio/models")),
                             "SmolLM2-135M-Instruct.Q4_1.gguf")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def load_average():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def commit():
    try:
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return head + (" + uncommitted changes" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


class Server:
    """One server process; started, waited for, stopped."""

    def __init__(self, name, argv, port, log_path):
        self.name, self.port = name, port
        self.log = open(log_path, "w")
        self.process = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)

    def wait_ready(self, timeout_s=180):
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.process.returncode}; see {self.log.name}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/v1/models", timeout=5) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.3)
        raise RuntimeError(f"{self.name} did not answer /v1/models within {timeout_s} s; see {self.log.name}")

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()


def start_folio(args, port, log_path):
    argv = [args.folio, "serve", "-m", args.model, "--port", str(port), "-t", str(args.threads), "-q",
            "--served-model-name", "model"]
    return Server("folio", argv, port, log_path)


def start_llamacpp(args, port, log_path):
    argv = [args.python, "-m", "llama_cpp.server", "--model", args.model, "--model_alias", "model",
            "--host", "127.0.0.1", "--port", str(port),
            "--n_threads", str(args.threads), "--n_threads_batch", str(args.threads),
            "--n_ctx", str(args.llama_n_ctx), "--n_batch", "512", "--n_ubatch", "512",
            "--interrupt_requests", "false", "--verbose", "false"]
    return Server("llama.cpp", argv, port, log_path)


def bench(args, server_name, port, rate, json_path):
    argv = [args.folio, "bench", "serve", "--base-url", f"http://127.0.0.1:{port}", "--model", "model",
            "--tokenizer-model", args.model, "--dataset", "sharegpt-like", "--scale", str(args.scale),
            "--num-prompts", str(args.num_prompts), "--seed", str(args.seed), "--request-rate", rate,
            "--ignore-eos", "--timeout", "1800", "--json", json_path]
    if server_name == "llama.cpp":
        argv += ["--eos-logit-bias", "--extra-body", json.dumps({"repeat_penalty": 1.0})]
    result = subprocess.run(argv, capture_output=True, text=True)
    if result.returncode != 0 and not os.path.exists(json_path):
        raise RuntimeError(f"folio bench serve failed against {server_name}:\n{result.stderr}\n{result.stdout}")
    with open(json_path) as f:
        return json.load(f), argv


def measure(args, server_name, rate, tmp):
    port = free_port()
    log_path = os.path.join(tmp, f"{server_name}-{rate}.log")
    server = (start_folio if server_name == "folio" else start_llamacpp)(args, port, log_path)
    try:
        server.wait_ready()
        load_before = load_average()
        started = time.time()
        report, argv = bench(args, server_name, port, rate, os.path.join(tmp, f"{server_name}-{rate}.json"))
        report["load_before"], report["load_after"] = load_before, load_average()
        report["wall_s"] = time.time() - started
        report["argv"] = argv
    finally:
        server.stop()
    print(f"  {server_name:9s} rate {rate:>4s}: {report['completed']} done, {report['failed']} failed, "
          f"{report['output_throughput']:.1f} output tok/s, TTFT median {report['ttft']['median_ms']:.0f} ms, "
          f"TPOT median {report['tpot']['median_ms']:.1f} ms ({report['wall_s']:.0f} s, load "
          f"{report['load_before']:.1f} -> {report['load_after']:.1f})", file=sys.stderr, flush=True)
    return report


def busy(report, threads):
    """A mark for rows measured while other work competed for the cores (load above the server's threads)."""
    return " (busy)" if max(report["load_before"], report["load_after"]) > threads + 0.5 else ""


def table(results, rates, servers, threads):
    lines = ["| rate (req/s) | server | ok / failed | output tokens (asked) | req/s | output tok/s "
             "| TTFT mean | TTFT median | TTFT P99 | TPOT mean | TPOT median | TPOT P99 | load avg |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for rate in rates:
        for name in servers:
            r = results[(rate, name)]
            lines.append(
                f"| {rate} | {name} | {r['completed']} / {r['failed']} | {r['total_output_tokens']:,} "
                f"({r['total_requested_output_tokens']:,}) | {r['request_throughput']:.2f} | "
                f"**{r['output_throughput']:.1f}** | {r['ttft']['mean_ms']:,.0f} | {r['ttft']['median_ms']:,.0f} | "
                f"{r['ttft']['p99_ms']:,.0f} | {r['tpot']['mean_ms']:.1f} | {r['tpot']['median_ms']:.1f} | "
                f"{r['tpot']['p99_ms']:.1f} | {r['load_before']:.1f} -> {r['load_after']:.1f}{busy(r, threads)} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--folio", default=os.path.join(ROOT, "build", "folio"))
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--python", default=sys.executable, help="Python with llama-cpp-python[server]")
    parser.add_argument("--rates", default="0.25,0.5,1,2,inf")
    parser.add_argument("--num-prompts", type=int, default=20)
    parser.add_argument("--scale", type=float, default=0.5, help="ShareGPT-like length scale (1: mean ~200 in / 180 out)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--llama-n-ctx", type=int, default=2048)
    parser.add_argument("--servers", default="folio,llama.cpp")
    parser.add_argument("--keep", help="Directory to keep each run's JSON report and server log in")
    args = parser.parse_args()
    rates = args.rates.split(",")
    servers = args.servers.split(",")
    for path in (args.folio, args.model):
        if not os.path.exists(path):
            sys.exit(f"missing {path}")

    started = datetime.datetime.now(datetime.timezone.utc)
    print(f"serve_vs_llamacpp: {len(rates)} rates x {len(servers)} servers, {args.num_prompts} requests each",
          file=sys.stderr, flush=True)
    results = {}
    with tempfile.TemporaryDirectory() as scratch:
        tmp = args.keep or scratch
        os.makedirs(tmp, exist_ok=True)
        for i, rate in enumerate(rates):
            for name in (servers if i % 2 == 0 else servers[::-1]):
                results[(rate, name)] = measure(args, name, rate, tmp)
    finished = datetime.datetime.now(datetime.timezone.utc)

    first = results[(rates[0], servers[0])]
    print(f"Command: `{' '.join([sys.executable] + sys.argv)}`")
    print(f"Machine: {cpu_name()}, {os.cpu_count()} CPUs; {args.threads} threads per server; "
          f"{started:%Y-%m-%d %H:%M}-{finished:%H:%M} UTC ({(finished - started).total_seconds() / 60:.1f} min); "
          f"commit {commit()}.")
    print("The machine is shared with other sessions (builds, tests): absolute figures vary with its load "
          "(the last column, 1-minute load average before -> after each run; \"(busy)\" where it "
          "exceeded the server's threads + 0.5, i.e. other work competed for the cores); compare within a rate.")
    print(f"Workload: {first['dataset']}, {args.num_prompts} requests per rate, prompt tokens "
          f"{first['total_input_tokens'] / max(1, first['completed']):.0f} mean, output tokens asked "
          f"{first['total_requested_output_tokens'] / max(1, first['completed']):.0f} mean; greedy; "
          f"Poisson arrivals (seed {args.seed}), inf = all at once; streaming /v1/completions.")
    print("Latencies in ms. Output tokens: folio's usage counts; llama-cpp-python streams no usage, so its "
          "content chunks are counted (one per token, except a token ending inside a UTF-8 character, which "
          f"it holds back and sends with the next). req/s can exceed the rate: {args.num_prompts} Poisson "
          "arrivals are a small sample, and both servers get the same ones.")
    print()
    print(table(results, rates, servers, args.threads))
    print()
    if "folio" in servers and "llama.cpp" in servers:
        for rate in rates:
            f, l = results[(rate, "folio")], results[(rate, "llama.cpp")]
            ratio = f["output_throughput"] / l["output_throughput"] if l["output_throughput"] > 0 else float("nan")
            ttft = l["ttft"]["median_ms"] / f["ttft"]["median_ms"] if f["ttft"]["median_ms"] > 0 else float("nan")
            print(f"- rate {rate}: output tok/s folio / llama.cpp **{ratio:.2f}x**; median TTFT llama.cpp / folio "
                  f"{ttft:.2f}x")
    print()
    for name in servers:
        argv = list(results[(rates[0], name)]["argv"])
        argv[argv.index("--base-url") + 1] = "http://127.0.0.1:PORT"
        argv[argv.index("--request-rate") + 1] = "RATE"
        argv[argv.index("--json") + 1] = "FILE"
        print(f"- {name} rows: `{' '.join(argv)}`")


if __name__ == "__main__":
    main()
