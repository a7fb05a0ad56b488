#!/usr/bin/env python3
"""`folio serve` end to end, with the standard library only: start it on a free loopback port,
wait for /health, then check a greedy completion against `folio run`, a streamed chat
completion, errors (malformed JSON 400, unknown route 404), a client that leaves mid-stream,
and that SIGTERM ends the server with exit code 0."""
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time

folio = sys.argv[1]
failures = []


def check(name, condition, detail=""):
    if not condition:
        failures.append(name)
        print(f"FAIL: {name} {detail}")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(port, method, path, body=None, timeout=120):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    data = body if isinstance(body, (bytes, str)) or body is None else json.dumps(body)
    conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    payload = response.read().decode("utf-8")
    conn.close()
    return response.status, response.getheader("Content-Type", ""), payload


port = free_port()
server = subprocess.Popen([folio, "serve", "--port", str(port), "-q"], stderr=subprocess.PIPE, text=True)
try:
    deadline = time.time() + 60
    healthy = False
    while time.time() < deadline and server.poll() is None:
        try:
            healthy = request(port, "GET", "/health", timeout=2)[0] == 200
            if healthy:
                break
        except OSError:
            time.sleep(0.2)
    check("the server answers /health", healthy)
    if not healthy:
        raise SystemExit(1)

    prompt, n = "The capital of France is", 12
    status, _, body = request(port, "POST", "/v1/completions",
                              {"prompt": prompt, "max_tokens": n, "temperature": 0})
    check("greedy completion succeeds", status == 200, body)
    reply = json.loads(body)
    expected = subprocess.run([folio, "run", "-p", prompt, "--temp", "0", "-n", str(n), "-q"],
                              capture_output=True, text=True).stdout
    # `folio run` ends the text with a newline of its own.
    check("greedy completion equals folio run", reply["choices"][0]["text"] == expected[:-1],
          f"{reply['choices'][0]['text']!r} vs {expected!r}")
    check("completion has usage", reply["usage"]["completion_tokens"] == n, body)
    check("completion is shaped as OpenAI's", reply["object"] == "text_completion" and
          reply["id"].startswith("cmpl-") and "system_fingerprint" in reply, body)

    status, content_type, body = request(port, "POST", "/v1/chat/completions", {
        "messages": [{"role": "user", "content": "What is 2+2?"}], "max_tokens": 16, "temperature": 0,
        "stream": True, "stream_options": {"include_usage": True}})
    check("streamed chat succeeds", status == 200 and content_type.startswith("text/event-stream"), body)
    events = [e for e in body.split("\n\n") if e]
    check("every event is an SSE data line", all(e.startswith("data: ") for e in events), body)
    check("the stream ends with [DONE]", events and events[-1] == "data: [DONE]", body)
    chunks = [json.loads(e[6:]) for e in events[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    check("the chat answer streams", len(chunks) > 2 and "4" in text, text)
    check("the first chunk names the role", chunks[0]["choices"][0]["delta"].get("role") == "assistant")
    check("the last chunk carries usage", chunks[-1]["usage"]["completion_tokens"] > 0, body)

    status, _, body = request(port, "POST", "/v1/completions", '{"prompt": "hi", ')
    check("malformed JSON is a 400", status == 400 and json.loads(body)["error"]["code"] == 400, body)
    status, _, body = request(port, "POST", "/v1/completions", {"prompt": "hi", "max_tokens": -3})
    check("a negative max_tokens is a 400", status == 400, body)
    status, _, body = request(port, "GET", "/v1/nothing")
    check("an unknown route is a 404", status == 404 and "error" in json.loads(body), body)
    status, _, body = request(port, "GET", "/v1/models")
    check("/v1/models lists the model", status == 200 and json.loads(body)["data"][0]["object"] == "model", body)

    # A client that leaves mid-stream: its request is aborted and its blocks freed.
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("POST", "/v1/completions", body=json.dumps(
        {"prompt": "Once upon a time", "max_tokens": 4000, "ignore_eos": True, "stream": True}))
    response = conn.getresponse()
    response.fp.readline()
    conn.sock.shutdown(socket.SHUT_RDWR)
    conn.close()
    metrics = ""
    for _ in range(50):
        time.sleep(0.1)
        metrics = request(port, "GET", "/metrics")[2]
        if 'folio:request_aborted_total{model_name="SmolLM2-135M-Instruct.Q4_1"} 1' in metrics:
            break
    check("a vanished client's request is aborted", "request_aborted_total" in metrics and
          'folio:request_aborted_total{model_name="SmolLM2-135M-Instruct.Q4_1"} 1' in metrics, metrics)
    check("its KV blocks are freed", 'folio:kv_cache_usage_perc{model_name="SmolLM2-135M-Instruct.Q4_1"} 0\n' in metrics)
    check("/metrics names the device", 'folio:device_info{model_name="SmolLM2-135M-Instruct.Q4_1",device="cpu' in metrics,
          metrics)
finally:
    server.send_signal(signal.SIGTERM)
    try:
        code = server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
        code = "timeout"
    check("SIGTERM exits 0", code == 0, f"exit {code}: {server.stderr.read()}")

print(f"serve e2e: {len(failures)} failed")
sys.exit(1 if failures else 0)
