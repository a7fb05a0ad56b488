#!/usr/bin/env python3
"""Speculative decoding through `folio run` and `folio serve` on the default model: greedy text
with n-gram lookup and with a draft model (the default model drafting for itself) equals the text
without speculation, streamed or not, while the spec_decode metrics show proposals accepted; a
client leaving mid-stream frees the blocks; options that do not fit together fail before loading."""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from folio_server import Checks, FolioServer  # noqa: E402

folio = sys.argv[1]
model = os.path.join(os.environ.get("FOLIO_MODELS_DIR", os.path.expanduser("~/.cache/folio/models")),
                     "SmolLM2-135M-Instruct.Q4_1.gguf")
t = Checks("serve speculative")

# Input-grounded: the answer copies from the prompt, where prompt lookup shines.
TEXT = ("The quick brown fox jumps over the lazy dog. The quick brown fox jumps over the lazy dog. "
        "Paged attention stores keys and values in fixed-size blocks.")
PROMPT = f"Repeat this text exactly: {TEXT}\nText: {TEXT}\nRepeat:"
N = 48


def run(*extra):
    result = subprocess.run([folio, "run", "-p", PROMPT, "--temp", "0", "-n", str(N), "-q", *extra],
                            capture_output=True, text=True)
    return result.returncode, result.stdout, result.stderr


code, plain, err = run()
t.check("folio run without speculation", code == 0, err)
for extra in (["--speculative", "ngram"], ["--speculative-model", model, "--num-speculative-tokens", "3"]):
    code, text, err = run(*extra)
    t.check(f"folio run {' '.join(extra[:2])} gives the same text", code == 0 and text == plain, f"{text!r} vs {plain!r} {err}")

for extra, why in ((["--speculative", "draft"], "draft without a model"),
                   (["--num-speculative-tokens", "3"], "k without speculation"),
                   (["--speculative", "ngram", "--ngram-min", "5", "--ngram-max", "2"], "min above max")):
    code, _, err = run(*extra)
    t.check(f"{why} is a usage error", code == 2 and ("speculat" in err or "ngram" in err), f"{code} {err}")
code, _, err = run("--speculative-model", "/nonexistent.gguf")
t.check("a missing draft model is a clear error", code != 0 and "--speculative-model" in err, err)

# The draft case with a fixed k: the model drafting for itself costs as much as it saves, and the
# adaptive controller rightly declines to use it.
for extra in (["--speculative", "ngram"], ["--speculative-model", model, "--no-adaptive-speculation"]):
    server = FolioServer(folio, "-m", model, *extra)
    try:
        status, body = server.request("POST", "/v1/completions",
                                      {"prompt": PROMPT, "max_tokens": N, "temperature": 0})
        t.check(f"{extra[0]}: completion succeeds", status == 200, body)
        reply = json.loads(body)
        t.check(f"{extra[0]}: completion equals folio run", reply["choices"][0]["text"] == plain[:-1],
                f"{reply['choices'][0]['text']!r} vs {plain!r}")
        t.check(f"{extra[0]}: usage counts every token", reply["usage"]["completion_tokens"] == N, body)
        status, body = server.request("POST", "/v1/completions",
                                      {"prompt": PROMPT, "max_tokens": N, "temperature": 0, "stream": True})
        events = [e for e in body.split("\n\n") if e and e != "data: [DONE]"]
        streamed = "".join(json.loads(e[6:])["choices"][0]["text"] for e in events if json.loads(e[6:])["choices"])
        t.check(f"{extra[0]}: the stream carries the same text", status == 200 and streamed == plain[:-1],
                f"{streamed!r}")
        drafts, accepted = server.metrics("folio:spec_decode_num_draft_tokens_total",
                                          "folio:spec_decode_num_accepted_tokens_total")
        t.check(f"{extra[0]}: proposals were made and accepted", drafts and accepted and 0 < accepted <= drafts,
                f"{drafts} {accepted}")
        length = server.metric("folio:spec_decode_mean_acceptance_length")
        t.check(f"{extra[0]}: mean acceptance length above 1", length is not None and length > 1.0, length)
        # A client that leaves mid-stream: aborted, its blocks (the draft's too) freed.
        import http.client
        import socket
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        conn.request("POST", "/v1/completions", body=json.dumps(
            {"prompt": PROMPT, "max_tokens": 2000, "ignore_eos": True, "stream": True}),
            headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        response.fp.readline()
        conn.sock.shutdown(socket.SHUT_RDWR)
        conn.close()
        usage = None
        for _ in range(100):
            time.sleep(0.1)
            if server.metric("folio:request_aborted_total") == 1:
                usage = server.wait_idle()
                break
        t.check(f"{extra[0]}: a vanished client's blocks are freed", usage == 0, usage)
    finally:
        code, err = server.stop()
        t.check(f"{extra[0]}: SIGTERM exits 0", code == 0, err)
t.exit()
