#!/usr/bin/env python3
"""The official `openai` Python client (PyPI) against a live `folio serve`: completions and chat,
streaming and not, n > 1, stop strings, logprobs, echo, errors. Greedy outputs must equal
`folio run`'s, and a stream must add up to the same answer as the whole response.
Run with the test venv's python: tests/server/openai_client_test.py FOLIO_BINARY."""
import math
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import openai  # noqa: E402
from folio_server import Checks, FolioServer  # noqa: E402

folio = sys.argv[1]
t = Checks("openai client")
server = FolioServer(folio, "--served-model-name", "smol", api_key="sk-test")
try:
    client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="sk-test", max_retries=0, timeout=300)

    models = client.models.list()
    t.check("models lists the served name", [m.id for m in models.data] == ["smol"], models)

    # Completions, greedy: equal to `folio run` on the same prompt.
    prompt, n = "The three primary colors are", 16
    done = client.completions.create(model="smol", prompt=prompt, max_tokens=n, temperature=0)
    expected = subprocess.run([folio, "run", "-p", prompt, "--temp", "0", "-n", str(n), "-q"],
                              capture_output=True, text=True, check=True).stdout[:-1]
    t.check("greedy completion equals folio run", done.choices[0].text == expected,
            f"{done.choices[0].text!r} vs {expected!r}")
    t.check("usage counts the tokens", done.usage.completion_tokens == n and done.usage.prompt_tokens > 0, done.usage)
    t.check("finish_reason length", done.choices[0].finish_reason == "length", done)
    t.check("ids and fingerprint as OpenAI's", done.id.startswith("cmpl-") and done.system_fingerprint and
            done.created > 0 and done.model == "smol", done)

    streamed = client.completions.create(model="smol", prompt=prompt, max_tokens=n, temperature=0, stream=True,
                                         stream_options={"include_usage": True})
    pieces, usage = [], None
    for chunk in streamed:
        if chunk.choices:
            pieces.append(chunk.choices[0].text)
        if chunk.usage:
            usage = chunk.usage
    t.check("a streamed completion adds up to the whole one", "".join(pieces) == expected, pieces)
    t.check("the stream ends with usage", usage is not None and usage.completion_tokens == n, usage)

    # Chat, greedy, whole and streamed.
    messages = [{"role": "system", "content": "You answer briefly."},
                {"role": "user", "content": "Name a fruit that is yellow."}]
    chat = client.chat.completions.create(model="smol", messages=messages, max_tokens=24, temperature=0)
    answer = chat.choices[0].message.content
    t.check("chat answers", chat.choices[0].message.role == "assistant" and len(answer) > 0 and
            chat.id.startswith("chatcmpl-"), chat)
    expected_chat = subprocess.run([folio, "run", "--chat", "--system", "You answer briefly.", "-p",
                                    "Name a fruit that is yellow.", "--temp", "0", "-n", "24", "-q"],
                                   capture_output=True, text=True).stdout
    if expected_chat:  # `folio run --system` exists: the same answer through the CLI
        t.check("greedy chat equals folio run --chat", answer == expected_chat.rstrip("\n"),
                f"{answer!r} vs {expected_chat!r}")
    stream = client.chat.completions.create(model="smol", messages=messages, max_tokens=24, temperature=0, stream=True)
    deltas = [c.choices[0].delta.content or "" for c in stream if c.choices]
    t.check("a streamed chat adds up to the whole one", "".join(deltas) == answer, deltas)
    t.check("the chat streams in several chunks", len([d for d in deltas if d]) > 3, deltas)

    # n > 1 with a seed: n different samples, each reproducible.
    many = client.chat.completions.create(model="smol", messages=messages, max_tokens=12, temperature=1.0, n=3, seed=7)
    t.check("n=3 gives three choices", sorted(c.index for c in many.choices) == [0, 1, 2], many)
    again = client.chat.completions.create(model="smol", messages=messages, max_tokens=12, temperature=1.0, n=3, seed=7)
    t.check("a seed makes n samples reproducible",
            [c.message.content for c in many.choices] == [c.message.content for c in again.choices])
    fixed = client.completions.create(model="smol", prompt=prompt, max_tokens=12, temperature=1.0, n=3, seed=1,
                                      extra_body={"ignore_eos": True})
    t.check("usage sums the n samples", fixed.usage.completion_tokens == 36 and
            all(c.finish_reason == "length" for c in fixed.choices), fixed.usage)

    # Several prompts in one request: choices numbered prompt * n + sample, each as if alone.
    prompts = ["The capital of Italy is", "Water boils at"]
    batch = client.completions.create(model="smol", prompt=prompts, max_tokens=6, temperature=0, n=2)
    alone = [client.completions.create(model="smol", prompt=p, max_tokens=6, temperature=0).choices[0].text
             for p in prompts]
    t.check("a list of prompts gives prompts x n choices, each equal to its prompt alone",
            sorted(c.index for c in batch.choices) == [0, 1, 2, 3] and
            all(c.text == alone[c.index // 2] for c in batch.choices), (batch.choices, alone))

    # Stop strings: the text ends before the stop string, finish_reason is stop.
    full = client.completions.create(model="smol", prompt="1, 2, 3, 4,", max_tokens=20, temperature=0).choices[0].text
    stop_at = full.find("7")
    if stop_at > 0:
        cut = client.completions.create(model="smol", prompt="1, 2, 3, 4,", max_tokens=20, temperature=0, stop=["7"])
        t.check("a stop string ends the text before it", cut.choices[0].text == full[:stop_at] and
                cut.choices[0].finish_reason == "stop", (cut.choices[0].text, full))
    else:
        t.check("the counting prompt reaches 7", False, full)

    # Logprobs: completions (legacy shape) and chat (per-token objects).
    lp = client.completions.create(model="smol", prompt=prompt, max_tokens=6, temperature=0, logprobs=3)
    info = lp.choices[0].logprobs
    t.check("completion logprobs cover every token", len(info.tokens) == 6 and len(info.token_logprobs) == 6 and
            "".join(info.tokens) == lp.choices[0].text, info)
    t.check("greedy picks the most likely token",
            all(abs(max(top.values()) - chosen) < 1e-6 for top, chosen in zip(info.top_logprobs, info.token_logprobs)),
            info)
    t.check("top_logprobs hold 3 tokens with probabilities <= 1",
            all(len(top) == 3 and all(v <= 0 for v in top.values()) for top in info.top_logprobs), info)
    t.check("text offsets advance with the tokens",
            info.text_offset == [sum(len(x) for x in info.tokens[:i]) for i in range(6)], info.text_offset)
    clp = client.chat.completions.create(model="smol", messages=messages, max_tokens=5, temperature=0,
                                         logprobs=True, top_logprobs=2)
    content = clp.choices[0].logprobs.content
    t.check("chat logprobs cover every token", len(content) == 5 and
            "".join(c.token for c in content) == clp.choices[0].message.content, content)
    t.check("chat top_logprobs are sorted and include the greedy token",
            all(len(c.top_logprobs) == 2 and c.top_logprobs[0].logprob >= c.top_logprobs[1].logprob and
                c.top_logprobs[0].token == c.token and math.isclose(c.top_logprobs[0].logprob, c.logprob)
                for c in content), content)
    t.check("chat logprobs carry the token's UTF-8 bytes",
            all(bytes(c.bytes).decode("utf-8", errors="replace") == c.token for c in content), content)

    echoed = client.completions.create(model="smol", prompt=prompt, max_tokens=4, temperature=0, echo=True)
    t.check("echo starts the text with the prompt", echoed.choices[0].text.startswith(prompt) and
            echoed.choices[0].text[len(prompt):] == expected[:len(echoed.choices[0].text) - len(prompt)], echoed)

    # Errors arrive as the client's exception types.
    for what, call, error in [
        ("a bad value is a BadRequestError", lambda: client.completions.create(model="smol", prompt="x", temperature=5),
         openai.BadRequestError),
        ("an unknown model is a NotFoundError", lambda: client.completions.create(model="gpt-9", prompt="x"),
         openai.NotFoundError),
        ("a too-long prompt is a BadRequestError",
         lambda: client.completions.create(model="smol", prompt="word " * 20000, max_tokens=4), openai.BadRequestError),
        ("a wrong API key is an AuthenticationError",
         lambda: openai.OpenAI(base_url=server.base_url + "/v1", api_key="wrong", max_retries=0).models.list(),
         openai.AuthenticationError),
    ]:
        try:
            call()
            t.check(what, False, "no error")
        except error as e:
            t.check(what, "message" in str(e) or len(str(e)) > 0)
        except Exception as e:  # noqa: BLE001
            t.check(what, False, repr(e))
    t.check("the KV pool is empty afterwards", server.wait_idle() == 0)
finally:
    code, stderr = server.stop()
    t.check("SIGTERM exits 0", code == 0, stderr)
t.exit()
