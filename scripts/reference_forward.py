#!/usr/bin/env python3
"""An independent float64 forward pass of a Llama-family GGUF model, in numpy.

Weights come from the PyPI `gguf` package's reader and dequantizers (not folio's code); every
activation is float64, and K/V are rounded to float16 before they are stored, because that is
the KV-cache format folio (and llama.cpp) use. Used by make-model-goldens.py.
"""
import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize


class ReferenceLlama:
    def __init__(self, path, kv_fp16=True):
        self.kv_fp16 = kv_fp16
        reader = GGUFReader(path)
        self.fields = {k: f for k, f in reader.fields.items()}
        arch = self.field("general.architecture")
        get = lambda key, default=None: self.field(f"{arch}.{key}", default)
        self.n_layers = int(get("block_count"))
        self.n_heads = int(get("attention.head_count"))
        self.n_kv_heads = int(get("attention.head_count_kv", self.n_heads))
        self.hidden = int(get("embedding_length"))
        self.head_dim = self.hidden // self.n_heads
        self.eps = float(get("attention.layer_norm_rms_epsilon", 1e-5))
        self.rope_base = float(get("rope.freq_base", 10000.0))
        self.rope_dim = int(get("rope.dimension_count", self.head_dim))
        self.neox = arch == "qwen2"
        self.w = {}
        for t in reader.tensors:
            shape = [int(d) for d in reversed(t.shape.tolist())]  # numpy order: rows first
            self.w[t.name] = dequantize(t.data, t.tensor_type).astype(np.float64).reshape(shape)
        self.output = self.w.get("output.weight", self.w["token_embd.weight"])

    def field(self, key, default=None):
        f = self.fields.get(key)
        if f is None:
            return default
        return f.contents()

    def rope(self, x, positions):
        # x: (n, heads, head_dim); rotate pairs (2i, 2i+1), or (i, i + d/2) for NeoX layout.
        half = self.rope_dim // 2
        inv_freq = self.rope_base ** (-2.0 * np.arange(half) / self.rope_dim)
        if "rope_freqs.weight" in self.w:  # Llama-3 scaling: per-pair frequency divisors
            inv_freq = inv_freq / self.w["rope_freqs.weight"].reshape(-1)
        theta = np.asarray(positions, dtype=np.float64)[:, None] * inv_freq[None, :]
        cos, sin = np.cos(theta)[:, None, :], np.sin(theta)[:, None, :]
        out = x.copy()
        if self.neox:
            a, b = x[..., :half], x[..., half:self.rope_dim]
            out[..., :half] = a * cos - b * sin
            out[..., half:self.rope_dim] = a * sin + b * cos
        else:
            a, b = x[..., 0:self.rope_dim:2], x[..., 1:self.rope_dim:2]
            out[..., 0:self.rope_dim:2] = a * cos - b * sin
            out[..., 1:self.rope_dim:2] = a * sin + b * cos
        return out

    def norm(self, x, weight):
        return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + self.eps) * weight

    def new_cache(self):
        return [(np.zeros((0, self.n_kv_heads, self.head_dim)), np.zeros((0, self.n_kv_heads, self.head_dim)))
                for _ in range(self.n_layers)]

    def forward(self, tokens, cache):
        """Appends tokens to the cache; returns float64 logits for every appended token."""
        n = len(tokens)
        start = cache[0][0].shape[0]
        positions = np.arange(start, start + n)
        x = self.w["token_embd.weight"][np.asarray(tokens)]
        group = self.n_heads // self.n_kv_heads
        for i in range(self.n_layers):
            p = f"blk.{i}."
            h = self.norm(x, self.w[p + "attn_norm.weight"])
            q = h @ self.w[p + "attn_q.weight"].T
            k = h @ self.w[p + "attn_k.weight"].T
            v = h @ self.w[p + "attn_v.weight"].T
            for name, t in (("q", q), ("k", k), ("v", v)):
                if p + f"attn_{name}.bias" in self.w:
                    t += self.w[p + f"attn_{name}.bias"]
            q = self.rope(q.reshape(n, self.n_heads, self.head_dim), positions)
            k = self.rope(k.reshape(n, self.n_kv_heads, self.head_dim), positions)
            v = v.reshape(n, self.n_kv_heads, self.head_dim)
            if self.kv_fp16:  # the cache's storage format
                k = k.astype(np.float16).astype(np.float64)
                v = v.astype(np.float16).astype(np.float64)
            keys = np.concatenate([cache[i][0], k])
            values = np.concatenate([cache[i][1], v])
            cache[i] = (keys, values)
            total = keys.shape[0]
            kh = np.repeat(keys, group, axis=1)     # (total, heads, d)
            vh = np.repeat(values, group, axis=1)
            scores = np.einsum("nhd,thd->hnt", q, kh) / np.sqrt(self.head_dim)
            mask = positions[:, None] < np.arange(total)[None, :]
            scores[:, mask] = -np.inf
            scores -= scores.max(axis=-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(axis=-1, keepdims=True)
            attn = np.einsum("hnt,thd->nhd", probs, vh).reshape(n, self.n_heads * self.head_dim)
            x = x + attn @ self.w[p + "attn_output.weight"].T
            h = self.norm(x, self.w[p + "ffn_norm.weight"])
            gate = h @ self.w[p + "ffn_gate.weight"].T
            up = h @ self.w[p + "ffn_up.weight"].T
            x = x + (gate / (1.0 + np.exp(-gate)) * up) @ self.w[p + "ffn_down.weight"].T
        return self.norm(x, self.w["output_norm.weight"]) @ self.output.T
