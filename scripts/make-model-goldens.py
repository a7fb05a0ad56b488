#!/usr/bin/env python3
"""Makes the end-to-end goldens for the default model with two independent references that run
the same GGUF file:

- llama.cpp through llama-cpp-python (PyPI), default settings (f16 KV cache, activations
  quantized to 8 bits for the quantized matmuls, as folio's default CPU path does);
- reference_forward.py: a float64 numpy forward over weights dequantized by the PyPI `gguf`
  package, K/V rounded to fp16 as folio's cache stores them. folio's float-activation mode
  must follow it token for token.

  python3 -m venv /tmp/refvenv && /tmp/refvenv/bin/pip install llama-cpp-python==0.3.36 jinja2 numpy gguf
  /tmp/refvenv/bin/python scripts/make-model-goldens.py

Writes tests/golden/model/smollm2_q4_1.json (prompts, llama.cpp's prompt token ids, 64 greedy tokens
of each reference with the reference's top1-top2 logit margin at every step), the full logits at
the last prompt position of each reference (smollm2_q4_1.<name>.logits.f32 for llama.cpp,
smollm2_q4_1.<name>.f64.logits.f32 for the float64 reference; little-endian float32), and
perplexity.json (llama.cpp's perplexity on tests/data/perplexity.txt with folio's chunking:
non-overlapping chunks of ctx tokens, first token replaced by BOS when the model adds one,
second half of each chunk scored).
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
from reference_forward import ReferenceLlama  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.environ.get("FOLIO_MODELS_DIR", os.path.expanduser("~/.cache/folio/models"))
MODEL = os.path.join(MODELS, "SmolLM2-135M-Instruct.Q4_1.gguf")
OUT = os.path.join(ROOT, "tests", "golden", "model")
GENERATED = 64
PPL_CTX = 512


def render_chat(template, messages):
    """Renders a chat template the way Hugging Face's apply_chat_template does."""
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    env.filters["tojson"] = lambda x, indent=None: json.dumps(x, ensure_ascii=False, indent=indent)
    return env.from_string(template).render(messages=messages, add_generation_prompt=True,
                                            bos_token="<|im_start|>", eos_token="<|im_end|>")


def prompts(chat_template):
    apache = open("/usr/share/common-licenses/Apache-2.0", encoding="utf-8").read()
    return [
        ("plain", "The three most important inventions of the twentieth century were", False),
        ("chat", render_chat(chat_template, [
            {"role": "user", "content": "What is the capital of France? Answer in one sentence."}]), True),
        ("code", "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n", False),
        ("french", "La tour Eiffel est un monument de Paris construit pour l'Exposition universelle de 1889. Elle", False),
        ("long", apache[:6000] + "\n\nIn summary, this license", False),
    ]


def margin(logits):
    top2 = np.sort(np.asarray(logits, dtype=np.float64))[-2:]
    return float(top2[1] - top2[0])


def main():
    reference = ReferenceLlama(MODEL)
    llm = llama_cpp.Llama(model_path=MODEL, n_ctx=2048, n_batch=512, n_threads=os.cpu_count(),
                          logits_all=True, verbose=False, seed=0)
    add_bos = llm.metadata.get("tokenizer.ggml.add_bos_token", "false") == "true"
    template = llm.metadata["tokenizer.chat_template"]
    cases = []
    for name, text, special in prompts(template):
        ids = llm.tokenize(text.encode("utf-8"), add_bos=add_bos and not special, special=special)
        llm.reset()
        llm.eval(ids)
        last = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
        last.tofile(os.path.join(OUT, f"smollm2_q4_1.{name}.logits.f32"))
        generated, margins = [], []
        logits = last
        for _ in range(GENERATED):
            token = int(np.argmax(logits))  # ties: lowest id, as folio's greedy sampler
            generated.append(token)
            margins.append(margin(logits))
            llm.eval([token])
            logits = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)

        cache = reference.new_cache()
        ref_logits = reference.forward(ids, cache)[-1]
        ref_logits.astype(np.float32).tofile(os.path.join(OUT, f"smollm2_q4_1.{name}.f64.logits.f32"))
        ref_generated, ref_margins = [], []
        for _ in range(GENERATED):
            token = int(np.argmax(ref_logits))
            ref_generated.append(token)
            ref_margins.append(margin(ref_logits))
            ref_logits = reference.forward([token], cache)[-1]
        cases.append({"name": name, "text": text, "chat": special, "prompt_ids": ids,
                      "generated_ids": generated, "generated_margins": margins,
                      "f64_generated_ids": ref_generated, "f64_generated_margins": ref_margins,
                      "last_top5": [int(i) for i in np.argsort(-last, kind="stable")[:5]]})
        agree = next((i for i, (a, b) in enumerate(zip(generated, ref_generated)) if a != b), GENERATED)
        print(f"{name}: {len(ids)} prompt tokens; llama.cpp and float64 agree on {agree} tokens; "
              f"float64 continuation: {llm.detokenize(ref_generated)[:80]!r}", file=sys.stderr)
    assert any(len(c["prompt_ids"]) > 1000 for c in cases), "the long prompt must exceed 1000 tokens"
    with open(os.path.join(OUT, "smollm2_q4_1.json"), "w", encoding="utf-8") as f:
        json.dump({"reference": f"llama.cpp via llama-cpp-python {llama_cpp.__version__}, n_threads "
                                f"{os.cpu_count()}, f16 KV cache", "model_sha256":
                   "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
                   "cases": cases}, f, ensure_ascii=False, indent=1)

    text = open(os.path.join(ROOT, "tests", "data", "perplexity.txt"), "rb").read()
    tokens = llm.tokenize(text, add_bos=add_bos, special=False)
    chunks = len(tokens) // PPL_CTX
    bos = llm.token_bos()
    nll, scored = 0.0, 0
    for c in range(chunks):
        window = tokens[c * PPL_CTX:(c + 1) * PPL_CTX]
        if add_bos:
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
    with open(os.path.join(OUT, "perplexity.json"), "w") as f:
        json.dump({"ctx": PPL_CTX, "perplexity": ppl, "scored_tokens": scored,
                   "text_tokens": len(tokens), "chunks": chunks}, f, indent=1)


if __name__ == "__main__":
    main()
