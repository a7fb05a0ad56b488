#!/usr/bin/env python3
"""`folio serve` under load and abuse, standard library only:
- 256 simultaneous streaming requests all complete, each stream well-formed, carrying one id
  and exactly the greedy answer of its own prompt (no interleaving between streams);
- 1,000 idle open connections do not stop a new request from being served;
- bad input: malformed and truncated JSON, wrong types, huge numbers, negative and zero
  limits, unknown fields, invalid UTF-8, a 100 MB body, a body shorter than its
  Content-Length, clients that vanish mid-stream; each gets its status and nothing crashes;
- --max-queue: requests beyond the waiting limit get 503;
and after all of it the KV pool is back to empty and SIGTERM exits 0."""
import asyncio
import json
import os
import resource
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from folio_server import Checks, FolioServer  # noqa: E402

folio = sys.argv[1]
t = Checks("serve load")

# 1,000 client sockets here and 1,000 accepted ones in the server (which inherits this limit).
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8192), hard))


async def read_response(reader):
    """Status, headers and body of one HTTP/1.1 response (chunked or Content-Length)."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:] if ":" in line)}
    if headers.get("transfer-encoding") == "chunked":
        body = b""
        while True:
            size = int((await reader.readuntil(b"\r\n")).strip(), 16)
            body += await reader.readexactly(size + 2)
            body = body[:-2]
            if size == 0:
                break
    else:
        body = await reader.readexactly(int(headers.get("content-length", "0")))
    return status, headers, body


async def post(port, path, payload, raw=None):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    body = raw if raw is not None else json.dumps(payload).encode()
    writer.write(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
    await writer.drain()
    try:
        return await read_response(reader)
    finally:
        writer.close()


def prompt_of(i):
    return f"Write the number {i % 16} in words, then"


async def concurrent_streams(server, references):
    async def one(i):
        status, headers, body = await post(server.port, "/v1/completions", {
            "prompt": prompt_of(i), "max_tokens": 8, "temperature": 0, "stream": True})
        events = [e for e in body.decode().split("\n\n") if e]
        chunks = [json.loads(e[6:]) for e in events if e.startswith("data: {")]
        return {"status": status, "done": events[-1:] == ["data: [DONE]"],
                "ids": {c["id"] for c in chunks}, "text": "".join(c["choices"][0]["text"] for c in chunks),
                "well_formed": all(e.startswith("data: ") for e in events)}
    start = time.time()
    results = await asyncio.gather(*(one(i) for i in range(256)))
    elapsed = time.time() - start
    t.check("256 concurrent streams all succeed", all(r["status"] == 200 and r["done"] for r in results),
            [r for r in results if r["status"] != 200 or not r["done"]][:3])
    t.check("every stream is well-formed SSE", all(r["well_formed"] for r in results))
    t.check("every stream carries one id, distinct from the others",
            all(len(r["ids"]) == 1 for r in results) and len({next(iter(r["ids"])) for r in results}) == 256)
    wrong = [(i, r["text"], references[i % 16]) for i, r in enumerate(results) if r["text"] != references[i % 16]]
    t.check("every stream holds exactly its own prompt's greedy answer", not wrong, wrong[:3])
    print(f"256 streams in {elapsed:.1f} s", flush=True)


async def idle_connections(server):
    sockets = []
    for i in range(1000):
        s = socket.create_connection(("127.0.0.1", server.port))
        if i % 2:
            s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")  # half a request, then silence
        sockets.append(s)
    start = time.time()
    status, _, body = await asyncio.wait_for(
        post(server.port, "/v1/completions", {"prompt": "Hello", "max_tokens": 4, "temperature": 0}), 60)
    t.check("a request is served beside 1,000 idle connections", status == 200 and
            json.loads(body)["usage"]["completion_tokens"] == 4, body)
    print(f"served beside 1,000 idle connections in {time.time() - start:.2f} s", flush=True)
    for s in sockets:
        s.close()


async def bad_input(server):
    cases = [
        ("malformed JSON", None, b'{"prompt": "hi",, }', 400),
        ("truncated JSON", None, b'{"prompt": "hi", "max_tokens": 1', 400),
        ("not an object", None, b'[1, 2, 3]', 400),
        ("empty body", None, b'', 400),
        ("prompt of the wrong type", {"prompt": {"text": "hi"}}, None, 400),
        ("max_tokens of the wrong type", {"prompt": "hi", "max_tokens": "ten"}, None, 400),
        ("temperature of the wrong type", {"prompt": "hi", "temperature": [1]}, None, 400),
        ("stream of the wrong type", {"prompt": "hi", "stream": "yes"}, None, 400),
        ("messages of the wrong type", {"messages": "hi"}, None, 400),
        ("a huge max_tokens", {"prompt": "hi", "max_tokens": 10 ** 30}, None, 400),
        ("a huge float", {"prompt": "hi", "temperature": 1e308}, None, 400),
        ("an overflowing number", None, b'{"prompt": "hi", "max_tokens": 1e999}', 400),
        ("a huge n", {"prompt": "hi", "n": 10 ** 9}, None, 400),
        ("a huge token id", {"prompt": [10 ** 12]}, None, 400),
        ("an out-of-vocabulary token id", {"prompt": [49152 * 4]}, None, 400),
        ("a negative max_tokens", {"prompt": "hi", "max_tokens": -1}, None, 400),
        ("a zero max_tokens", {"prompt": "hi", "max_tokens": 0}, None, 400),
        ("a zero n", {"prompt": "hi", "n": 0}, None, 400),
        ("a negative top_k", {"prompt": "hi", "top_k": -5}, None, 400),
        ("a zero top_p", {"prompt": "hi", "top_p": 0}, None, 400),
        ("a negative temperature", {"prompt": "hi", "temperature": -0.5}, None, 400),
        ("an empty prompt", {"prompt": ""}, None, 400),
        ("no prompt", {"max_tokens": 3}, None, 400),
        ("a prompt longer than the context", {"prompt": "word " * 40000, "max_tokens": 1}, None, 400),
        ("invalid UTF-8", None, b'{"prompt": "caf\xc3\x28 \xff\xfe", "max_tokens": 2}', 400),
        ("unknown fields are ignored", {"prompt": "hi", "max_tokens": 2, "frobnicate": {"x": 1}}, None, 200),
    ]
    for name, payload, raw, want in cases:
        status, _, body = await post(server.port, "/v1/completions", payload, raw)
        ok = status == want
        if ok and want != 200:
            error = json.loads(body).get("error", {})
            ok = error.get("code") == want and len(error.get("message", "")) > 0
        t.check(f"{name}: {want}", ok, f"got {status}: {body[:300]!r}")
    status, _, body = await post(server.port, "/v1/chat/completions", {"messages": [{"role": 5, "content": "x"}]})
    t.check("a chat message without a string role: 400", status == 400, body)

    # 100 MB: refused with 413 as soon as the limit is passed, the response read while uploading.
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    size = 100 * 1024 * 1024
    writer.write(f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: {size}\r\n\r\n".encode())
    response = asyncio.ensure_future(read_response(reader))
    try:
        chunk = b"x" * (1 << 20)
        for _ in range(100):
            if response.done():
                break
            writer.write(chunk)
            await asyncio.wait_for(writer.drain(), 10)
    except (ConnectionError, asyncio.TimeoutError):
        pass
    status = None
    try:
        status = (await asyncio.wait_for(response, 10))[0]
    except (ConnectionError, asyncio.IncompleteReadError, asyncio.TimeoutError) as e:
        status = repr(e)
    writer.close()
    t.check("a 100 MB body gets 413", status == 413, status)

    # A body shorter than its Content-Length, then the client leaves.
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n\r\n{\"prompt\": \"hi\"")
    await writer.drain()
    writer.close()

    # Clients that vanish mid-stream, several at once.
    async def vanish(i):
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        body = json.dumps({"prompt": f"Story {i}:", "max_tokens": 2000, "ignore_eos": True, "stream": True}).encode()
        writer.write(f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
        await writer.drain()
        await reader.readuntil(b"data: ")
        writer.transport.abort()
    await asyncio.gather(*(vanish(i) for i in range(8)))
    status, body = server.request("GET", "/health")
    t.check("the server is healthy after the bad input", status == 200, body)


async def queue_limit(folio):
    # This server also takes its chat template from a file (--chat-template).
    template = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "plain_chat_template.jinja")
    server = FolioServer(folio, "--max-queue", "2", "--max-num-seqs", "1", "--chat-template", template)
    try:
        status, body = server.request("POST", "/tokenize", {"messages": [
            {"role": "system", "content": "Be kind."}, {"role": "user", "content": "Hi"}]})
        tokens = json.loads(body)["tokens"]
        status, body = server.request("POST", "/detokenize", {"tokens": tokens})
        t.check("--chat-template renders the messages with the given file",
                json.loads(body)["prompt"] == "[system] Be kind.\n[user] Hi\n[assistant] ", body)

        async def one(i):
            return (await post(server.port, "/v1/completions",
                               {"prompt": f"Tell me about {i}", "max_tokens": 24, "ignore_eos": True}))[0]
        statuses = await asyncio.gather(*(one(i) for i in range(12)))
        t.check("--max-queue turns away the excess with 503", 503 in statuses and 200 in statuses and
                set(statuses) <= {200, 503}, statuses)
        t.check("the KV pool is empty after the queue test", server.wait_idle() == 0)
    finally:
        code, stderr = server.stop()
        t.check("SIGTERM exits 0 (queue server)", code == 0, stderr)


async def main():
    server = FolioServer(folio, "--max-num-seqs", "256")
    try:
        references = []
        for i in range(16):
            status, body = server.request("POST", "/v1/completions",
                                          {"prompt": prompt_of(i), "max_tokens": 8, "temperature": 0})
            references.append(json.loads(body)["choices"][0]["text"])
        await concurrent_streams(server, references)
        await idle_connections(server)
        await bad_input(server)
        usage = server.wait_idle()
        t.check("the KV pool is back to empty", usage == 0, usage)
    finally:
        code, stderr = server.stop()
        t.check("SIGTERM exits 0", code == 0, stderr)
    await queue_limit(folio)


def bad_chat_template(folio):
    import subprocess
    result = subprocess.run([folio, "serve", "--port", "0", "-q", "--chat-template", "/nonexistent/template.jinja"],
                            capture_output=True, text=True, timeout=60)
    t.check("a missing --chat-template file is a clear error", result.returncode == 1 and
            "cannot read the chat template file" in result.stderr, result.stderr)


asyncio.run(main())
bad_chat_template(folio)
t.exit()
