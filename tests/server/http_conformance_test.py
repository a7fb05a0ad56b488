#!/usr/bin/env python3
"""HTTP/1.1 message framing of `folio serve`, over raw sockets (RFC 9112): Content-Length and
chunked bodies, Transfer-Encoding that is not exactly chunked (400 and close: request
smuggling), Transfer-Encoding with Content-Length, malformed lengths, HEAD (a header and no
body, the connection still in step), pipelining, half-close after a request, Expect:
100-continue, an early 401 before an unread body, NUL bytes after JSON, HTTP/1.0, oversized
headers and bodies. Each case says the status it expects and whether the connection must close;
the server must still answer /health at the end and hold no KV block."""
import json
import socket
import sys
import time

from folio_server import Checks, FolioServer

KEY = "conformance-key"


class Connection:
    def __init__(self, port, timeout=30):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buffer = b""

    def send(self, data):
        self.sock.sendall(data if isinstance(data, bytes) else data.encode())

    def _fill(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            return False
        self.buffer += chunk
        return True

    def response(self):
        """One response: (status, headers dict with lowercase names, body bytes); None on EOF."""
        while b"\r\n\r\n" not in self.buffer:
            if not self._fill():
                return None
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        return status, headers, b""

    def body(self, headers, head_request=False):
        if head_request or "content-length" not in headers and "chunked" not in headers.get("transfer-encoding", ""):
            return b""
        if "chunked" in headers.get("transfer-encoding", ""):
            out = b""
            while True:
                while b"\r\n" not in self.buffer:
                    if not self._fill():
                        return out
                size_line, self.buffer = self.buffer.split(b"\r\n", 1)
                size = int(size_line.split(b";")[0], 16)
                while len(self.buffer) < size + 2:
                    if not self._fill():
                        return out
                out += self.buffer[:size]
                self.buffer = self.buffer[size + 2:]
                if size == 0:
                    return out
        length = int(headers["content-length"])
        while len(self.buffer) < length:
            if not self._fill():
                break
        out, self.buffer = self.buffer[:length], self.buffer[length:]
        return out

    def exchange(self, data, head_request=False):
        self.send(data)
        r = self.response()
        if r is None:
            return None
        status, headers, _ = r
        return status, headers, self.body(headers, head_request)

    def closed(self, wait=5.0):
        """True once the server has closed the connection (EOF) with nothing more to read."""
        self.sock.settimeout(wait)
        try:
            while True:
                chunk = self.sock.recv(65536)
                if not chunk:
                    return True
                self.buffer += chunk
        except (socket.timeout, TimeoutError):
            return False
        except ConnectionResetError:
            return True

    def close(self):
        self.sock.close()


def post(path, body, extra="", key=True, version="1.1"):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    auth = f"Authorization: Bearer {KEY}\r\n" if key else ""
    return (f"POST {path} HTTP/{version}\r\nHost: x\r\n{auth}Content-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\n{extra}\r\n").encode() + data


def get(path, method="GET", extra="", key=True):
    auth = f"Authorization: Bearer {KEY}\r\n" if key else ""
    return f"{method} {path} HTTP/1.1\r\nHost: x\r\n{auth}{extra}\r\n".encode()


COMPLETION = {"prompt": "The capital of France is", "max_tokens": 4, "temperature": 0}


def main():
    folio = sys.argv[1]
    t = Checks("http conformance")
    server = FolioServer(folio, "--max-num-seqs", "8", api_key=KEY)
    port = server.port
    try:
        # Content-Length body, then a second request on the same connection.
        c = Connection(port)
        r = c.exchange(post("/v1/completions", COMPLETION))
        t.check("Content-Length body: 200", r and r[0] == 200, r and r[:2])
        r2 = c.exchange(get("/health"))
        t.check("keep-alive: a second request on the connection", r2 and r2[0] == 200, r2)
        c.close()

        # A chunked body.
        data = json.dumps(COMPLETION).encode()
        chunked = (f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
                   f"Transfer-Encoding: chunked\r\n\r\n{len(data[:10]):x}\r\n").encode() + data[:10] + \
                  f"\r\n{len(data[10:]):x}\r\n".encode() + data[10:] + b"\r\n0\r\n\r\n"
        c = Connection(port)
        r = c.exchange(chunked)
        t.check("chunked body: 200", r and r[0] == 200, r and r[:2])
        c.close()

        # Transfer-Encoding that is not exactly chunked: 400, and the connection closes, so
        # the body is never read as a second request (request smuggling).
        smuggled = post("/health", b"")  # what would be served if the body were parsed as a request
        for te in ["identity", "gzip", "chunked, identity", "xchunked", "chunked, chunked"]:
            body = smuggled
            raw = (f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
                   f"Transfer-Encoding: {te}\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body
            c = Connection(port)
            r = c.exchange(raw)
            t.check(f"Transfer-Encoding '{te}' with Content-Length: 400", r and r[0] == 400, r and r[:2])
            t.check(f"Transfer-Encoding '{te}': Connection: close", r and r[1].get("connection") == "close",
                    r and r[1])
            t.check(f"Transfer-Encoding '{te}': the connection closes, the body is not a request",
                    c.closed() and b"HTTP/1.1 200" not in c.buffer, c.buffer[:80])
            c.close()
        for te in ["gzip", "chunked, gzip"]:
            raw = (f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
                   f"Transfer-Encoding: {te}\r\n\r\n").encode() + b"5\r\nhello\r\n0\r\n\r\n"
            c = Connection(port)
            r = c.exchange(raw)
            t.check(f"Transfer-Encoding '{te}' alone: 400 and close", r and r[0] == 400 and c.closed(), r and r[:2])
            c.close()
        raw = (f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
               f"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n").encode() + b"0\r\n\r\n"
        c = Connection(port)
        r = c.exchange(raw)
        t.check("chunked with Content-Length: 400 and close", r and r[0] == 400 and c.closed(), r and r[:2])
        c.close()

        # Malformed Content-Length: 400 and close.
        for value in ["abc", "-1", "5, 6", "1e3"]:
            raw = (f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
                   f"Content-Length: {value}\r\n\r\n{{}}").encode()
            c = Connection(port)
            r = c.exchange(raw)
            t.check(f"Content-Length '{value}': 400 and close", r and r[0] == 400 and c.closed(), r and r[:2])
            c.close()

        # HEAD: the header GET would send, no body; the next response on the connection is whole.
        c = Connection(port)
        g = c.exchange(get("/v1/models"))
        h = c.exchange(get("/v1/models", method="HEAD"), head_request=True)
        t.check("HEAD /v1/models: 200", h and h[0] == 200, h and h[:2])
        t.check("HEAD: Content-Length of the GET body, no body", h and g and
                h[1].get("content-length") == str(len(g[2])) and h[2] == b"", h and h[1])
        after = c.exchange(get("/health"))
        t.check("HEAD: the next response starts cleanly", after and after[0] == 200 and not c.buffer, after)
        hp = c.exchange(get("/v1/completions", method="HEAD"), head_request=True)
        t.check("HEAD on a POST route: 405", hp and hp[0] == 405, hp and hp[:2])
        c.close()

        # Pipelining: three requests in one write, three responses in order.
        c = Connection(port)
        c.send(get("/health") + post("/v1/completions", COMPLETION) + get("/v1/models"))
        statuses = []
        for _ in range(3):
            r = c.response()
            if r is None:
                break
            statuses.append(r[0])
            body = c.body(r[1])
            if r[0] == 200 and len(statuses) == 2:
                t.check("pipelined completion has its JSON", b"choices" in body, body[:80])
        t.check("pipelining: three responses in order", statuses == [200, 200, 200], statuses)
        c.close()

        # Half-close right after a complete request: the response still comes, then EOF.
        for stream in [False, True]:
            c = Connection(port)
            c.send(post("/v1/completions", {**COMPLETION, "stream": stream}))
            c.sock.shutdown(socket.SHUT_WR)
            r = c.response()
            body = c.body(r[1]) if r else b""
            t.check(f"half-close ({'stream' if stream else 'whole'}): the response arrives",
                    r is not None and r[0] == 200 and (b"[DONE]" in body if stream else b"choices" in body),
                    r and r[:2])
            t.check(f"half-close ({'stream' if stream else 'whole'}): then the connection closes", c.closed(), "")
            c.close()

        # Expect: 100-continue: the interim response, then the body, then 200.
        data = json.dumps(COMPLETION).encode()
        c = Connection(port)
        c.send((f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
                f"Expect: 100-continue\r\nContent-Length: {len(data)}\r\n\r\n").encode())
        interim = c.response()
        t.check("Expect: 100-continue gets 100 before the body", interim and interim[0] == 100, interim)
        c.send(data)
        r = c.response()
        t.check("then 200", r and r[0] == 200, r and r[:2])
        c.body(r[1]) if r else None
        c.close()
        # Unauthorized with Expect: the final answer at once, no 100, and close.
        c = Connection(port)
        c.send((f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                f"Content-Length: {len(data)}\r\n\r\n").encode())
        r = c.response()
        t.check("Expect without a key: 401 at once, no 100", r and r[0] == 401, r and r[:2])
        t.check("Expect without a key: Connection: close", r and r[1].get("connection") == "close", r and r[1])
        c.close()

        # Without a key, an 8 MB body is not read: 401 right after the header, and close.
        c = Connection(port)
        start = time.time()
        c.send(f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: {8 << 20}\r\n\r\n".encode())
        r = c.response()
        t.check("early 401 before an unread 8 MB body", r and r[0] == 401 and time.time() - start < 5, r and r[:2])
        t.check("early 401: Connection: close", r and r[1].get("connection") == "close", r and r[1])
        c.close()
        # The same for an unknown path and a wrong method with a body.
        for raw, want in [(post("/nowhere", b"{}"), 404), (post("/v1/models", b"{}"), 405)]:
            c = Connection(port)
            r = c.exchange(raw)
            t.check(f"early {want} with a body: Connection: close", r and r[0] == want and
                    r[1].get("connection") == "close", r and r[:2])
            c.close()

        # A body is one JSON value: bytes after a NUL are not ignored.
        c = Connection(port)
        r = c.exchange(post("/v1/completions", json.dumps(COMPLETION).encode() + b"\x00garbage"))
        t.check("NUL after the JSON: 400", r and r[0] == 400 and b"NUL" in r[2], r and (r[0], r[2][:120]))
        c.close()

        # HTTP/1.0: answered, then closed (no keep-alive asked for).
        c = Connection(port)
        r = c.exchange(post("/v1/completions", COMPLETION, version="1.0"))
        t.check("HTTP/1.0: 200 then close", r and r[0] == 200 and c.closed(), r and r[:2])
        c.close()
        # Connection: close on HTTP/1.1 is honoured.
        c = Connection(port)
        r = c.exchange(get("/health", extra="Connection: close\r\n"))
        t.check("Connection: close: 200 then close", r and r[0] == 200 and c.closed(), r and r[:2])
        c.close()

        # Garbage request line, oversized header, oversized body.
        c = Connection(port)
        r = c.exchange(b"HELLO\r\n\r\n")
        t.check("garbage request line: 400 and close", r and r[0] == 400 and c.closed(), r and r[:2])
        c.close()
        c = Connection(port)
        r = c.exchange(get("/health", extra="X-Big: " + "a" * (80 << 10) + "\r\n"))
        t.check("80 KB header: 431 and close", r and r[0] == 431 and c.closed(), r and r[:2])
        c.close()
        c = Connection(port)
        c.send((f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
                f"Content-Length: {9 << 20}\r\n\r\n").encode())
        r = c.response()
        t.check("body over --max-body-bytes: 413 and close", r and r[0] == 413, r and r[:2])
        c.close()

        t.check("still healthy after all of it", server.request("GET", "/health")[0] == 200)
        t.check("no KV block held", server.wait_idle() == 0.0)
    finally:
        code, stderr = server.stop()
        t.check("SIGTERM exits 0", code == 0, stderr[-2000:])
    t.exit()


if __name__ == "__main__":
    main()
