#!/usr/bin/env python3
"""The chat page (GET /) in a real browser: Playwright drives Debian's chromium, headless,
against `folio serve --api-key` on a free loopback port. It checks that the page is public while
the API is not, that a server error is shown from its JSON, that an answer streams (grows in
several steps) and matches a direct greedy API call turn for turn, that Stop ends an answer early
and the server lets the request go, and the narrow layout; then saves a screenshot to
$FOLIO_SCREENSHOT_DIR (default: the folio binary's folder).

Needs the test venv (scripts/setup-test-venv) and chromium (scripts/setup-deps); without them it
fails, it never skips. Usage: chat_page_test.py path/to/folio"""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

folio = os.path.abspath(sys.argv[1])
chromium = os.environ.get("FOLIO_CHROMIUM", "/usr/bin/chromium")
api_key = "chat-page-test-key"
failures = []


def check(name, condition, detail=""):
    if not condition:
        failures.append(name)
        print(f"FAIL: {name} {detail}", flush=True)
    return condition


try:
    from playwright.sync_api import sync_playwright
except ImportError as e:
    print(f"FAIL: Playwright is missing from {sys.executable} ({e}); run scripts/setup-test-venv and "
          "configure with -DFOLIO_TEST_PYTHON=<the python it prints>")
    sys.exit(1)
if not os.access(chromium, os.X_OK):
    print(f"FAIL: no chromium at {chromium}; install Debian's chromium (scripts/setup-deps)")
    sys.exit(1)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(port, method, path, body=None, key=None, timeout=120):
    """(status, content type, text) of one request; error statuses are answers too."""
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as response:
            return response.status, response.headers.get("Content-Type", ""), response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read().decode()


def metric(text, name):
    match = re.search(rf"^{re.escape(name)}\{{[^}}]*\}} (\S+)$", text, re.MULTILINE)
    return float(match.group(1)) if match else None


# The last assistant bubble, as the page marks it: data-state streaming/done/stopped/error.
LAST_ANSWER = "[...document.querySelectorAll('#messages .message.assistant')].pop()"

# Records the last answer's state and length at every DOM change, so that growth is seen however
# fast the tokens come (polling from Python could miss the steps between two looks).
RECORDER = f"""() => {{
  window.__growth = [];
  new MutationObserver(() => {{
    const answer = {LAST_ANSWER};
    if (answer) window.__growth.push([answer.dataset.state, answer.querySelector('.content').textContent.length]);
  }}).observe(document.getElementById('messages'),
              {{childList: true, subtree: true, characterData: true, attributes: true}});
}}"""


def ask(page, text, press_enter=True, timeout_ms=120_000):
    """Sends `text` from the page; returns (state, answer text, growth record) once it ends."""
    page.evaluate("() => { window.__growth = []; }")
    page.fill("#prompt", text)
    if press_enter:
        page.press("#prompt", "Enter")
    else:
        page.click("#send")
    page.wait_for_function(f"() => {{ const a = {LAST_ANSWER}; return a && a.dataset.state !== 'streaming'; }}",
                           timeout=timeout_ms)
    answer = page.locator("#messages .message.assistant").last
    return (answer.get_attribute("data-state"), answer.locator(".content").text_content(),
            page.evaluate("() => window.__growth"))


def streamed(growth):
    """Distinct non-empty lengths seen while the answer was streaming."""
    return sorted({length for state, length in growth if state == "streaming" and length > 0})


def direct_answer(port, messages, settings):
    status, _, body = http(port, "POST", "/v1/chat/completions", {"messages": messages, **settings}, key=api_key)
    check("the direct API call succeeds", status == 200, body)
    return json.loads(body)["choices"][0]["message"]["content"] if status == 200 else None


def run_page_checks(port, browser, model_name, screenshot_path):
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page_errors = []
    page.on("pageerror", lambda e: page_errors.append(str(e)))
    page.goto(f"http://127.0.0.1:{port}/")
    page.evaluate(RECORDER)

    # Without the key the API refuses: the page says so and shows the server's own message.
    page.wait_for_function("() => document.getElementById('model').classList.contains('error')")
    markup = "Hello <b>there</b> & <i>you</i>"
    state, text, _ = ask(page, markup)
    check("a server error is shown", state == "error" and "API key is required" in text, f"{state}: {text!r}")
    user = page.locator("#messages .message.user").last
    check("user text is shown as text", user.locator(".content").text_content() == markup and
          user.locator("b, i").count() == 0, user.inner_html())
    check("a failed question returns to the prompt", page.input_value("#prompt") == markup)

    # With the key the model's name appears.
    page.fill("#api-key", api_key)
    page.dispatch_event("#api-key", "change")
    page.wait_for_function("name => document.getElementById('model').textContent === name", arg=model_name)
    page.click("#clear")

    system = "You are a helpful assistant. Answer in one short sentence."
    settings = {"temperature": 0, "top_p": 1, "max_tokens": 48}
    page.fill("#system-prompt", system)
    page.fill("#temperature", "0")
    page.fill("#top-p", "1")
    page.fill("#max-tokens", "48")
    page.fill("#seed", "")

    history = [{"role": "system", "content": system}]
    for question in ["What is the capital of France?", "And the capital of Italy?"]:
        state, text, growth = ask(page, question)
        steps = streamed(growth)
        check(f"'{question}' ends done and non-empty", state == "done" and text.strip(), f"{state}: {text!r}")
        check(f"'{question}' streams", len(steps) >= 2 and steps[-1] <= len(text), f"lengths seen: {steps}")
        print(f"'{question}': {len(text)} characters, seen at lengths {steps}", flush=True)
        history.append({"role": "user", "content": question})
        expected = direct_answer(port, history, settings)
        check(f"'{question}' at temperature 0 equals the API's answer", text == expected, f"{text!r} vs {expected!r}")
        history.append({"role": "assistant", "content": text})
    stats = page.text_content("#stats")
    check("the last answer's speed is shown", "tokens/s" in stats, repr(stats))
    page.screenshot(path=screenshot_path)

    # Stop: a long answer, stopped once it has begun.
    page.click("#clear")
    page.fill("#max-tokens", "1500")
    page.evaluate("() => { window.__growth = []; }")
    page.fill("#prompt", "Count from 1 to 1000, separated by commas.")
    page.click("#send")
    page.wait_for_function(f"() => {{ const a = {LAST_ANSWER}; return a && a.textContent.length > 20; }}",
                           timeout=60_000)
    page.click("#stop")
    page.wait_for_function(f"() => {LAST_ANSWER}.dataset.state !== 'streaming'", timeout=10_000)
    answer = page.locator("#messages .message.assistant").last
    stopped_text = answer.locator(".content").text_content()
    print(f"stopped after {len(stopped_text)} characters", flush=True)
    check("Stop ends the answer", answer.get_attribute("data-state") == "stopped", answer.get_attribute("data-state"))
    check("Send is back after Stop", page.is_visible("#send") and not page.is_visible("#stop"))
    time.sleep(0.5)
    check("a stopped answer grows no more", answer.locator(".content").text_content() == stopped_text)
    running = waiting = aborted = None
    for _ in range(50):
        metrics = http(port, "GET", "/metrics", key=api_key)[2]
        running = metric(metrics, "folio:num_requests_running")
        waiting = metric(metrics, "folio:num_requests_waiting")
        aborted = metric(metrics, "folio:request_aborted_total")
        if running == 0 and waiting in (0, None) and aborted:
            break
        time.sleep(0.1)
    check("the stopped request leaves the server", running == 0 and waiting in (0, None),
          f"running {running}, waiting {waiting}")
    check("the server counts it aborted", aborted is not None and aborted >= 1, f"aborted {aborted}")

    # Narrow screens: settings hide behind their button.
    page.set_viewport_size({"width": 420, "height": 800})
    check("narrow: settings start hidden", not page.is_visible("#settings"))
    page.click("#settings-toggle")
    check("narrow: the button shows settings", page.is_visible("#settings"))
    check("no script errors on the page", not page_errors, str(page_errors))
    page.close()


def main():
    port = free_port()
    server = subprocess.Popen([folio, "serve", "--port", str(port), "--api-key", api_key, "-q"],
                              stderr=subprocess.PIPE, text=True)
    started = time.time()
    try:
        deadline = time.time() + 60
        healthy = False
        while time.time() < deadline and server.poll() is None and not healthy:
            try:
                healthy = http(port, "GET", "/health", timeout=2)[0] == 200
            except OSError:
                time.sleep(0.2)
        if not check("the server answers /health", healthy):
            return

        for path in ["/", "/index.html"]:
            status, content_type, body = http(port, "GET", path)
            check(f"GET {path} serves the page without a key",
                  status == 200 and content_type == "text/html; charset=utf-8" and 'id="prompt"' in body,
                  f"{status} {content_type}")
        check("the API still needs the key", http(port, "GET", "/v1/models")[0] == 401)
        status, _, body = http(port, "GET", "/v1/models", key=api_key)
        model_name = json.loads(body)["data"][0]["id"]

        directory = os.environ.get("FOLIO_SCREENSHOT_DIR") or os.path.dirname(folio)
        os.makedirs(directory, exist_ok=True)
        screenshot_path = os.path.join(directory, "chat_page.png")
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium, headless=True)
            try:
                run_page_checks(port, browser, model_name, screenshot_path)
            finally:
                browser.close()
        print(f"chat page: screenshot at {screenshot_path}")
    except Exception as e:  # a Playwright timeout or the like: report it as a failure, with the rest
        check("the browser session runs through", False, f"{type(e).__name__}: {e}")
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            code = server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            code = "timeout"
        check("SIGTERM exits 0", code == 0, f"exit {code}: {server.stderr.read()}")
    print(f"chat page e2e: {len(failures)} failed in {time.time() - started:.1f} s")


main()
sys.exit(1 if failures else 0)
