#!/usr/bin/env python3
"""Makes the end-to-end goldens for Gemma 3 270M (Q4_K_M, `scripts/fetch-model gemma3`) with the
two independent references that make-model-goldens.py uses for the default model, on the same
GGUF file:

- llama.cpp through llama-cpp-python (PyPI), default settings (f16 KV cache, activations
  quantized to 8 bits for the quantized matmuls, as folio's default CPU path does);
- reference_gemma3.py: a float64 numpy forward over weights dequantized by the PyPI `gguf`
  package, K/V rounded to fp16 as folio's cache stores them.

Prompts: plain, chat (Gemma 3's published template, tests/golden/chat/gemma-3-it.jinja, as
transformers renders it), code, German, and two longer than the 512-token window of the local
layers (so that the window decides the logits).

  python3 -m venv /tmp/refvenv && /tmp/refvenv/bin/pip install llama-cpp-python==0.3.36 jinja2 numpy gguf
  /tmp/refvenv/bin/python scripts/make-gemma3-goldens.py

Writes tests/golden/model/gemma3_270m_q4_k_m.json (prompts, llama.cpp's prompt ids, 48 greedy
tokens of each reference with its top1-top2 margin at every step), the last prompt position's
logits of each reference (gemma3_270m_q4_k_m.<name>.logits.f32 for llama.cpp, .f64.logits.f32
for float64; little-endian float32) and gemma3_perplexity.json (llama.cpp's perplexity on
tests/data/perplexity.txt in chunks of 1024 tokens, so that the window matters, scored as
make-model-goldens.py scores them).
"""
import json
import math
import os
import sys

import jinja2
import jinja2.sandbox
import llama_cpp
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_gemma3 import ReferenceGemma3  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.environ.get("FOLIO_MODELS_DIR", os.path.expanduser("~/.cache/folio/models"))
MODEL = os.path.join(MODELS, "gemma-3-270m-q4_k_m.gguf")
MODEL_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
OUT = os.path.join(ROOT, "tests", "golden", "model")
PREFIX = "gemma3_270m_q4_k_m"
GENERATED = 48
PPL_CTX = 1024


def render_chat(messages):
    """Gemma 3's template rendered as Hugging Face's apply_chat_template renders it."""
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    template = open(os.path.join(ROOT, "tests", "golden", "chat", "gemma-3-it.jinja"), encoding="utf-8").read()
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    return env.from_string(template).render(messages=messages, add_generation_prompt=True, bos_token="<bos>",
                                            eos_token="<eos>")


def prompts():
    apache = open("/usr/share/common-licenses/Apache-2.0", encoding="utf-8").read()
    gpl = open("/usr/share/common-licenses/GPL-3", encoding="utf-8").read()
    return [
        ("plain", "The three most important inventions of the twentieth century were", False),
        ("chat", render_chat([{"role": "user", "content": "What is the capital of France? Answer in one sentence."}]),
         True),
        ("code", "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n", False),
        ("german", "Der Rhein ist einer der längsten Flüsse Europas. Er entspringt in den Alpen und", False),
        ("long", apache[:4000] + "\n\nIn summary, this license", False),
        ("longer", gpl[:9000] + "\n\nTo put it briefly, this license", False),
    ]


def margin(logits):
    top2 = np.sort(np.asarray(logits, dtype=np.float64))[-2:]
    return float(top2[1] - top2[0])


def greedy(first_logits, step):
    generated, margins, logits = [], [], first_logits
    for _ in range(GENERATED):
        token = int(np.argmax(logits))  # ties: lowest id, as folio's greedy sampler
        generated.append(token)
        margins.append(margin(logits))
        logits = step(token)
    return generated, margins


def main():
    reference = ReferenceGemma3(MODEL)
    llm = llama_cpp.Llama(model_path=MODEL, n_ctx=4096, n_batch=512, n_threads=os.cpu_count(), logits_all=True,
                          verbose=False, seed=0)
    cases = []
    for name, text, special in prompts():
        # The chat text starts with <bos> itself.
        ids = llm.tokenize(text.encode("utf-8"), add_bos=not special, special=special)
        llm.reset()
        llm.eval(ids)
        last = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
        last.tofile(os.path.join(OUT, f"{PREFIX}.{name}.logits.f32"))

        def llama_step(token):
            llm.eval([token])
            return np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)

        generated, margins = greedy(last, llama_step)

        cache = reference.new_cache()
        ref_logits = reference.forward(ids, cache)[-1]
        ref_logits.astype(np.float32).tofile(os.path.join(OUT, f"{PREFIX}.{name}.f64.logits.f32"))
        ref_generated, ref_margins = greedy(ref_logits, lambda token: reference.forward([token], cache)[-1])
        cases.append({"name": name, "text": text, "chat": special, "prompt_ids": ids, "generated_ids": generated,
                      "generated_margins": margins, "f64_generated_ids": ref_generated,
                      "f64_generated_margins": ref_margins})
        agree = next((i for i, (a, b) in enumerate(zip(generated, ref_generated)) if a != b), GENERATED)
        print(f"{name}: {len(ids)} prompt tokens; llama.cpp and float64 agree on {agree} tokens; "
              f"float64 continuation: {llm.detokenize(ref_generated)[:80]!r}", file=sys.stderr)
    assert sum(len(c["prompt_ids"]) > 1024 for c in cases) >= 1, "a prompt must pass twice the window"
    with open(os.path.join(OUT, f"{PREFIX}.json"), "w", encoding="utf-8") as f:
        json.dump({"reference": f"llama.cpp via llama-cpp-python {llama_cpp.__version__}, n_threads "
                                f"{os.cpu_count()}, f16 KV cache", "model_sha256": MODEL_SHA256, "cases": cases},
                  f, ensure_ascii=False, indent=1)

    text = open(os.path.join(ROOT, "tests", "data", "perplexity.txt"), "rb").read()
    tokens = llm.tokenize(text, add_bos=True, special=False)
    chunks = len(tokens) // PPL_CTX
    bos = llm.token_bos()
    nll, scored = 0.0, 0
    for c in range(chunks):
        window = tokens[c * PPL_CTX:(c + 1) * PPL_CTX]
        window[0] = bos
        llm.reset()
        llm.eval(window)
        scores = np.array(llm.scores[:PPL_CTX], dtype=np.float64)
        for j in range(PPL_CTX // 2, PPL_CTX - 1):
            row = scores[j]
            m = row.max()
            nll += math.log(np.exp(row - m).sum()) - (row[tokens[c * PPL_CTX + j + 1]] - m)
            scored += 1
    ppl = math.exp(nll / scored)
    print(f"perplexity {ppl:.4f} over {scored} tokens ({len(tokens)} tokens, {chunks} chunks)", file=sys.stderr)
    with open(os.path.join(OUT, "gemma3_perplexity.json"), "w") as f:
        json.dump({"ctx": PPL_CTX, "perplexity": ppl, "scored_tokens": scored, "text_tokens": len(tokens),
                   "chunks": chunks}, f, indent=1)


if __name__ == "__main__":
    main()
