#!/usr/bin/env python3
"""An independent reference for the quality cost of `--quantization fp8` (issue 13): SmolLM2
(the default GGUF, dequantized by the `gguf` package) run in float32 numpy, with no folio code,
three ways: as is (ref), with every layer matrix rounded to E4M3 at a scale per output row (w8),
and with the four matrix inputs also rounded per token (w8a8, what folio's FP8 GEMMs compute).
Perplexity over the first CHUNKS chunks of 512 tokens (second half scored, as `folio perplexity`
does), then the KL divergence and top-1 agreement of w8 and w8a8 against ref.

  build/folio tokenize -f tests/data/perplexity.txt > /tmp/tokens.json
  build/test-venv/bin/python scripts/fp8-weight-quality.py MODEL.gguf /tmp/tokens.json 8

About 15 s a chunk and mode on 2 cores. The figures are in docs/BENCHMARKS.md (issue 13)."""
import json
import sys

import gguf
import numpy as np
from gguf.quants import dequantize

CTX = 512


def e4m3(x):
    """Round to the nearest E4M3 value (ties to even), saturating at 448."""
    a, sign = np.abs(x), np.sign(x)
    exponent = np.maximum(np.floor(np.log2(np.maximum(a, 1e-30))), -6)  # subnormals: step 2^-9
    step = np.exp2(exponent - 3)
    return sign * np.minimum(np.round(a / step) * step, 448.0)


def per_row(x):
    """E4M3 at a scale of max|row| / 448, back to the values it stands for."""
    amax = np.abs(x).max(axis=-1, keepdims=True)
    scale = np.where(amax > 0, amax / 448.0, 1.0)
    return e4m3(x / scale) * scale


class Model:
    def __init__(self, path, mode):
        reader = gguf.GGUFReader(path)
        tensors = {t.name: t for t in reader.tensors}

        def field(name):
            f = reader.fields[name]
            return f.parts[f.data[0]][0]

        def weight(name):
            t = tensors[name]
            return dequantize(t.data, t.tensor_type).astype(np.float32)

        self.layers_n = int(field("llama.block_count"))
        self.heads = int(field("llama.attention.head_count"))
        self.kv_heads = int(field("llama.attention.head_count_kv"))
        self.head_dim = int(field("llama.embedding_length")) // self.heads
        self.eps = float(field("llama.attention.layer_norm_rms_epsilon"))
        self.base = float(field("llama.rope.freq_base"))
        self.embedding = weight("token_embd.weight")
        self.output_norm = weight("output_norm.weight")
        self.layers = []
        for layer in range(self.layers_n):
            names = dict(q="attn_q", k="attn_k", v="attn_v", o="attn_output", gate="ffn_gate", up="ffn_up",
                         down="ffn_down")
            w = {key: weight(f"blk.{layer}.{name}.weight") for key, name in names.items()}
            if mode != "ref":
                w = {key: per_row(value) for key, value in w.items()}
            w["attn_norm"] = weight(f"blk.{layer}.attn_norm.weight")
            w["ffn_norm"] = weight(f"blk.{layer}.ffn_norm.weight")
            self.layers.append(w)
        self.act = per_row if mode == "w8a8" else (lambda x: x)

    def rms(self, x, w):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + self.eps) * w

    def rope(self, x, positions):  # adjacent pairs: GGUF's Q/K row order
        inv = self.base ** (-np.arange(0, self.head_dim, 2) / self.head_dim)
        angle = positions[:, None] * inv[None, :]
        cos, sin = np.cos(angle)[:, None, :], np.sin(angle)[:, None, :]
        x0, x1 = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = x0 * cos - x1 * sin
        out[..., 1::2] = x0 * sin + x1 * cos
        return out

    def logits(self, tokens):
        n, hd = len(tokens), self.head_dim
        positions = np.arange(n, dtype=np.float64)
        x = self.embedding[tokens].astype(np.float32)
        mask = np.triu(np.full((n, n), -np.inf, np.float32), 1)
        group = self.heads // self.kv_heads
        for w in self.layers:
            h = self.act(self.rms(x, w["attn_norm"]))
            q = self.rope((h @ w["q"].T).reshape(n, self.heads, hd), positions)
            k = np.repeat(self.rope((h @ w["k"].T).reshape(n, self.kv_heads, hd), positions), group, axis=1)
            v = np.repeat((h @ w["v"].T).reshape(n, self.kv_heads, hd), group, axis=1)
            s = np.einsum("qhd,khd->hqk", q, k) / np.sqrt(hd) + mask
            p = np.exp(s - s.max(-1, keepdims=True))
            p /= p.sum(-1, keepdims=True)
            attention = np.einsum("hqk,khd->qhd", p, v).reshape(n, self.heads * hd)
            x = x + self.act(attention) @ w["o"].T
            h = self.act(self.rms(x, w["ffn_norm"]))
            gate, up = h @ w["gate"].T, h @ w["up"].T
            x = x + self.act(gate / (1 + np.exp(-gate)) * up) @ w["down"].T
        return self.rms(x, self.output_norm) @ self.embedding.T


def scored_log_probs(model, tokens, chunks):
    """Log-probabilities of the scored positions of each chunk, and the perplexity."""
    nll, count, out = 0.0, 0, []
    for c in range(chunks):
        t = np.array(tokens[c * CTX:(c + 1) * CTX])
        lp = model.logits(t).astype(np.float64)
        lp -= lp.max(-1, keepdims=True)
        lp -= np.log(np.exp(lp).sum(-1, keepdims=True))
        out.append(lp[CTX // 2:-1])
        nll -= lp[np.arange(CTX // 2, CTX - 1), t[CTX // 2 + 1:]].sum()
        count += CTX - 1 - CTX // 2
    return np.concatenate(out), float(np.exp(nll / count)), count


def main():
    path, token_file = sys.argv[1], sys.argv[2]
    chunks = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    tokens = json.load(open(token_file))
    results = {}
    for mode in ("ref", "w8", "w8a8"):
        results[mode] = scored_log_probs(Model(path, mode), tokens, chunks)
        print(f"{mode}: perplexity {results[mode][1]:.4f} over {results[mode][2]} tokens", flush=True)
    ref, ref_ppl, _ = results["ref"]
    p = np.exp(ref)
    for mode in ("w8", "w8a8"):
        lp, ppl, _ = results[mode]
        kl = (p * (ref - lp)).sum(-1)
        print(f"{mode}: perplexity {100 * (ppl / ref_ppl - 1):+.3f}%, mean KL {kl.mean():.6f} nats, "
              f"top-1 agreement {100 * (ref.argmax(-1) == lp.argmax(-1)).mean():.2f}%")


if __name__ == "__main__":
    main()
