"""Starts `folio serve` on a free loopback port for a test and talks to it with the standard
library: plain requests, metrics read back as numbers, and a clean SIGTERM at the end."""
import http.client
import json
import re
import signal
import socket
import subprocess
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class FolioServer:
    def __init__(self, folio, *args, api_key=None):
        self.port = free_port()
        self.auth = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        if api_key:
            args = (*args, "--api-key", api_key)
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen([folio, "serve", "--port", str(self.port), "-q", *args],
                                        stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 60
        while time.time() < deadline and self.process.poll() is None:
            try:
                if self.request("GET", "/health", timeout=2)[0] == 200:
                    return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"folio serve did not come up: {self.stop()}")

    def request(self, method, path, body=None, timeout=300, headers=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        data = body if isinstance(body, (bytes, str)) or body is None else json.dumps(body)
        conn.request(method, path, body=data,
                     headers={"Content-Type": "application/json", **self.auth, **(headers or {})})
        response = conn.getresponse()
        payload = response.read().decode("utf-8", errors="replace")
        conn.close()
        return response.status, payload

    def metric(self, name):
        """The value of an unlabelled-but-for-model metric, e.g. folio:kv_cache_usage_perc."""
        return self.metrics(name)[0]

    def metrics(self, *names):
        """Several metrics from one scrape: values that must agree with each other (accepted <=
        proposed) come from the same snapshot, as the engine publishes a new one after each step
        (a response can end before the snapshot of its last step is out)."""
        text = self.request("GET", "/metrics")[1]
        values = []
        for name in names:
            match = re.search(r"^" + re.escape(name) + r"\{[^}]*\} (\S+)$", text, re.M)
            values.append(float(match.group(1)) if match else None)
        return values

    def wait_idle(self, timeout=60):
        """Until nothing runs or waits; returns the KV cache usage then."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            # One scrape: the three values come from one snapshot of the engine.
            running, waiting, swapped, usage = self.metrics(
                "folio:num_requests_running", "folio:num_requests_waiting", "folio:num_requests_swapped",
                "folio:kv_cache_usage_perc")
            if running == 0 and waiting == 0 and swapped == 0:
                return usage
            time.sleep(0.1)
        return None

    def stop(self):
        """SIGTERM; returns (exit code, stderr)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = "timeout"
        return code, self.process.stderr.read()


class Checks:
    def __init__(self, name):
        self.name = name
        self.failures = []
        self.passed = 0

    def check(self, what, condition, detail=""):
        if condition:
            self.passed += 1
        else:
            self.failures.append(what)
            print(f"FAIL: {what} {str(detail)[:2000]}", flush=True)

    def exit(self):
        print(f"{self.name}: {self.passed} passed, {len(self.failures)} failed", flush=True)
        raise SystemExit(1 if self.failures else 0)
