#!/usr/bin/env python3
"""Tiny random-weight models of the Llama-family variants folio's default model does not
exercise, with float64 goldens, so their forward paths are checked end to end in CI:

- tiny-llama3: Llama-3 style, GQA 4/2, rope_freqs (Llama-3 rope scaling), untied output;
- tiny-qwen2: Qwen2 style, QKV biases, NeoX (rotate-half) rope, tied output;
- tiny-mistral: architecture "mistral", Q8_0 and F16 weights.

  /tmp/refvenv/bin/pip install gguf numpy && /tmp/refvenv/bin/python scripts/make-tiny-model-goldens.py

Writes tests/golden/tiny/<name>.gguf and <name>.json: a prompt, the float64 reference's
(reference_forward.py, K/V rounded to fp16) last logits and 16 greedy tokens.
"""
import json
import os
import sys

import numpy as np
from gguf import GGUFWriter, GGMLQuantizationType
from gguf.quants import quantize

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_forward import ReferenceLlama  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "tiny")
VOCAB, HIDDEN, FFN, LAYERS, HEADS, KV_HEADS = 320, 64, 160, 2, 4, 2
HEAD_DIM = HIDDEN // HEADS


def make(name, arch, rope_freqs, qkv_bias, tied, weight_type, seed):
    rng = np.random.default_rng(seed)
    path = os.path.join(OUT, f"{name}.gguf")
    w = GGUFWriter(path, arch)
    w.add_name(name)
    w.add_block_count(LAYERS)
    w.add_context_length(256)
    w.add_embedding_length(HIDDEN)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_rope_dimension_count(HEAD_DIM)
    w.add_rope_freq_base(500000.0 if rope_freqs else 10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(VOCAB)

    def tensor(tname, shape, scale, kind=None):
        data = (rng.standard_normal(shape) * scale).astype(np.float32)
        kind = kind or weight_type
        if kind == GGMLQuantizationType.F32 or len(shape) == 1:
            w.add_tensor(tname, data)
        elif kind == GGMLQuantizationType.F16:
            w.add_tensor(tname, data.astype(np.float16))
        else:
            w.add_tensor(tname, quantize(data, kind), raw_dtype=kind)

    tensor("token_embd.weight", (VOCAB, HIDDEN), 0.5)
    tensor("output_norm.weight", (HIDDEN,), 0.1, GGMLQuantizationType.F32)
    if not tied:
        tensor("output.weight", (VOCAB, HIDDEN), 0.2)
    if rope_freqs:
        w.add_tensor("rope_freqs.weight", np.array([1.0] * 2 + [2.0, 4.0] * 1 + [8.0] * 4, dtype=np.float32))
    for i in range(LAYERS):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", (1.0 + 0.1 * rng.standard_normal(HIDDEN)).astype(np.float32))
        w.add_tensor(p + "ffn_norm.weight", (1.0 + 0.1 * rng.standard_normal(HIDDEN)).astype(np.float32))
        tensor(p + "attn_q.weight", (HEADS * HEAD_DIM, HIDDEN), 0.15)
        tensor(p + "attn_k.weight", (KV_HEADS * HEAD_DIM, HIDDEN), 0.15)
        tensor(p + "attn_v.weight", (KV_HEADS * HEAD_DIM, HIDDEN), 0.15)
        tensor(p + "attn_output.weight", (HIDDEN, HEADS * HEAD_DIM), 0.15)
        tensor(p + "ffn_gate.weight", (FFN, HIDDEN), 0.15)
        tensor(p + "ffn_up.weight", (FFN, HIDDEN), 0.15)
        tensor(p + "ffn_down.weight", (HIDDEN, FFN), 0.1)
        if qkv_bias:
            for t, n in (("q", HEADS), ("k", KV_HEADS), ("v", KV_HEADS)):
                w.add_tensor(p + f"attn_{t}.bias", (0.1 * rng.standard_normal(n * HEAD_DIM)).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    reference = ReferenceLlama(path)
    prompt = [int(t) for t in rng.integers(0, VOCAB, 40)]
    cache = reference.new_cache()
    logits = reference.forward(prompt, cache)[-1]
    last = logits.copy()
    generated, margins = [], []
    for _ in range(16):
        token = int(np.argmax(logits))
        generated.append(token)
        top = np.sort(logits)[-2:]
        margins.append(float(top[1] - top[0]))
        logits = reference.forward([token], cache)[-1]
    top2 = np.sort(last)[-2:]
    with open(os.path.join(OUT, f"{name}.json"), "w") as f:
        json.dump({"architecture": arch, "prompt_ids": prompt, "generated_ids": generated, "generated_margins": margins,
                   "last_logits": [float(x) for x in last]}, f)
    print(f"{name}: {os.path.getsize(path)} bytes, top-2 margin {top2[1] - top2[0]:.4f}", file=sys.stderr)


def main():
    os.makedirs(OUT, exist_ok=True)
    make("tiny-llama3", "llama", rope_freqs=True, qkv_bias=False, tied=False,
         weight_type=GGMLQuantizationType.F32, seed=1)
    make("tiny-qwen2", "qwen2", rope_freqs=False, qkv_bias=True, tied=True,
         weight_type=GGMLQuantizationType.F32, seed=2)
    make("tiny-mistral", "mistral", rope_freqs=False, qkv_bias=False, tied=False,
         weight_type=GGMLQuantizationType.Q8_0, seed=3)


if __name__ == "__main__":
    main()
