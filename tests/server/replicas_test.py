#!/usr/bin/env python3
"""Replicas behind a load balancer (issue 19, item 4), on loopback: three `folio serve`
processes behind nginx running deploy/nginx/folio-replicas.conf as shipped (only its ports
changed). Checks that
  - conversations spread over the replicas, and each conversation's second turn reaches the
    replica that served its first (the X-Session-ID header, consistent hashing);
  - that replica's prefix cache serves the second turn: its folio:prefix_cache_hits_total grows
    by at least the first turn's whole blocks, the others' not at all;
  - a replica killed (SIGKILL) mid-stream loses only the streams it was serving: every other
    stream finishes, and every later request, its conversations' included, is answered (nginx
    takes the dead replica out and rehashes only its conversations)."""
import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from folio_server import FolioServer, free_port  # noqa: E402

folio = sys.argv[1]
source = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
failures = []
BLOCK = 16  # folio's default KV block size: prefix hits count whole blocks


def check(name, condition, detail=""):
    print(("ok    " if condition else "FAIL  ") + name + (f" ({detail})" if detail and not condition else ""))
    if not condition:
        failures.append(name)


nginx = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)
if nginx is None:
    print("FAIL: nginx is not installed (scripts/setup-deps installs nginx-light)")
    sys.exit(1)


def start_nginx(ports, workdir):
    """The shipped config with the replicas' ports and a free listening port; everything nginx
    writes stays in workdir."""
    conf = open(os.path.join(source, "deploy/nginx/folio-replicas.conf")).read()
    servers = re.findall(r"server 127\.0\.0\.1:\d+", conf)
    assert len(servers) == len(ports), "the shipped config names three replicas"
    for old, port in zip(servers, ports):
        conf = conf.replace(old, f"server 127.0.0.1:{port}", 1)
    listen = free_port()
    conf = re.sub(r"listen 127\.0\.0\.1:\d+;", f"listen 127.0.0.1:{listen};", conf)
    conf = conf.replace("http {", "http {\n  access_log off;\n"
                        f"  client_body_temp_path {workdir}/body;\n  proxy_temp_path {workdir}/proxy;\n"
                        f"  fastcgi_temp_path {workdir}/fcgi;\n  uwsgi_temp_path {workdir}/uwsgi;\n"
                        f"  scgi_temp_path {workdir}/scgi;", 1)
    path = os.path.join(workdir, "nginx.conf")
    with open(path, "w") as f:
        f.write(f"pid {workdir}/nginx.pid;\nerror_log {workdir}/error.log;\n" + conf)
    user = "user root;\n" if os.geteuid() == 0 else ""
    if user:
        with open(path) as f:
            text = f.read()
        with open(path, "w") as f:
            f.write(user + text)
    process = subprocess.Popen([nginx, "-p", workdir, "-c", path, "-g", "daemon off;"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 20
    while time.time() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", listen, timeout=2)
            conn.request("GET", "/health")
            if conn.getresponse().status == 200:
                return process, listen
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError("nginx did not come up: " + process.stdout.read())


def chat(port, session, messages, max_tokens=8, timeout=120):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    body = {"messages": messages, "max_tokens": max_tokens, "temperature": 0}
    conn.request("POST", "/v1/chat/completions", body=json.dumps(body),
                 headers={"Content-Type": "application/json", "X-Session-ID": session})
    response = conn.getresponse()
    payload = response.read().decode("utf-8", errors="replace")
    upstream = response.getheader("X-Folio-Upstream", "")
    conn.close()
    return response.status, upstream, payload


def system_prompt(session):
    # The session's name first: no two conversations share a block.
    return (f"{session}: you are a concise assistant for a museum of clocks. Answer in one sentence, mention "
            "the gallery number when you can, and never invent opening hours you were not told about.")


replicas = [FolioServer(folio, "-t", "1", "--http-threads", "2") for _ in range(3)]
by_address = {f"127.0.0.1:{r.port}": r for r in replicas}
workdir = tempfile.mkdtemp(prefix="folio-nginx-")
balancer = None
try:
    balancer, port = start_nginx([r.port for r in replicas], workdir)
    sessions = [f"conversation-{i:02d}" for i in range(12)]

    # Turn 1 of every conversation.
    first = {}
    for s in sessions:
        messages = [{"role": "system", "content": system_prompt(s)},
                    {"role": "user", "content": "Where are the water clocks?"}]
        status, upstream, payload = chat(port, s, messages)
        check(f"{s} turn 1 answered", status == 200, payload[:200])
        reply = json.loads(payload)
        first[s] = (upstream, messages, reply["choices"][0]["message"]["content"], reply["usage"]["prompt_tokens"])
    used = {first[s][0] for s in sessions}
    check("conversations spread over the replicas", len(used) >= 2 and used <= set(by_address), str(used))
    hits_before = {a: r.metric("folio:prefix_cache_hits_total") for a, r in by_address.items()}
    check("no prefix hits after first turns (no shared blocks)", all(h == 0 for h in hits_before.values()),
          str(hits_before))

    # Turn 2 goes back to the same replica, whose prefix cache has the first turn.
    expected_hits = {a: 0 for a in by_address}
    for s in sessions:
        upstream, messages, reply, prompt_tokens = first[s]
        messages = messages + [{"role": "assistant", "content": reply},
                               {"role": "user", "content": "And the sundials?"}]
        status, again, payload = chat(port, s, messages)
        check(f"{s} turn 2 answered", status == 200, payload[:200])
        check(f"{s} turn 2 on its first turn's replica", again == upstream, f"{again} vs {upstream}")
        expected_hits[upstream] += (prompt_tokens - 1) // BLOCK * BLOCK
    for address, replica in by_address.items():
        hits = replica.metric("folio:prefix_cache_hits_total") - hits_before[address]
        check(f"replica {address}: prefix hits {hits:.0f} >= its conversations' first turns "
              f"({expected_hits[address]} tokens)", hits >= expected_hits[address] and
              (hits > 0) == (expected_hits[address] > 0), f"{hits} vs {expected_hits[address]}")

    # A replica killed while it streams: only its streams are lost.
    results = {}

    def stream(s):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        body = {"messages": [{"role": "system", "content": system_prompt(s)},
                             {"role": "user", "content": "Describe every gallery in detail."}],
                "max_tokens": 96, "temperature": 0, "stream": True, "ignore_eos": True}
        upstream, chunks, done = "", 0, False
        try:
            conn.request("POST", "/v1/chat/completions", body=json.dumps(body),
                         headers={"Content-Type": "application/json", "X-Session-ID": s})
            response = conn.getresponse()
            upstream = response.getheader("X-Folio-Upstream", "")
            results[s] = {"upstream": upstream, "chunks": 0, "done": False, "status": response.status}
            for line in response:
                if line.startswith(b"data: [DONE]"):
                    done = True
                elif line.startswith(b"data: "):
                    chunks += 1
                    results[s]["chunks"] = chunks
        except (OSError, http.client.HTTPException):
            pass
        results.setdefault(s, {"upstream": upstream, "status": 0})
        results[s].update({"chunks": chunks, "done": done})

    threads = [threading.Thread(target=stream, args=(s,)) for s in sessions]
    for t in threads:
        t.start()
    victim_address = first[sessions[0]][0]
    victim = by_address[victim_address]
    deadline = time.time() + 60
    while time.time() < deadline and not any(
            r.get("upstream") == victim_address and r.get("chunks", 0) > 0 for r in list(results.values())):
        time.sleep(0.05)
    victim.process.kill()
    victim.process.wait()
    for t in threads:
        t.join(timeout=180)
    lost = [s for s in sessions if results.get(s, {}).get("upstream") == victim_address]
    kept = [s for s in sessions if s not in lost]
    check("the killed replica had streams in flight", len(lost) > 0)
    check("the killed replica's streams end without [DONE]", all(not results[s]["done"] for s in lost),
          str({s: results[s] for s in lost}))
    check("every other stream finishes", all(results.get(s, {}).get("done") for s in kept),
          str({s: results.get(s) for s in kept if not results.get(s, {}).get("done")}))

    # After the kill every conversation is answered, the dead replica's by the others.
    for s in sessions:
        messages = [{"role": "system", "content": system_prompt(s)}, {"role": "user", "content": "Thanks!"}]
        status, upstream, payload = chat(port, s, messages)
        check(f"{s} answered after the kill", status == 200 and upstream != victim_address and upstream != "",
              f"{status} {upstream} {payload[:120]}")
        if s in kept:
            check(f"{s} stays on its replica", upstream == first[s][0], f"{upstream} vs {first[s][0]}")
    for address, replica in by_address.items():
        if replica is victim:
            continue
        replica.wait_idle()
        check(f"replica {address} holds no KV blocks when idle",
              replica.metric("folio:kv_cache_usage_perc") == 0.0)
finally:
    if balancer is not None:
        balancer.terminate()
        balancer.wait(timeout=10)
    for r in replicas:
        r.stop()
    shutil.rmtree(workdir, ignore_errors=True)

print(f"replicas: {len(failures)} failures")
sys.exit(1 if failures else 0)
