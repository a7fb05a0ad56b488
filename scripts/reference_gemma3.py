#!/usr/bin/env python3
"""An independent float64 forward pass of a Gemma 3 GGUF model, in numpy.

Gemma 3's differences from reference_forward.py's Llama, written from the model's definition
(transformers' Gemma3 modeling code and the Gemma 3 report), not from folio's code: q and k
RMS-normed per head before RoPE, RMS norms after attention and after the MLP, a tanh-GELU gated
MLP, embeddings multiplied by sqrt(hidden), NeoX-style RoPE with base 10000 on the local layers
and the file's base on the global ones, and local layers (five of every six) that attend to the
last `sliding_window` tokens only. The GGUF's norm weights already hold Gemma's (1 + w).
K/V are rounded to float16 as folio's cache stores them. Used by make-gemma3-goldens.py.
"""
import numpy as np

from reference_forward import ReferenceLlama


class ReferenceGemma3(ReferenceLlama):
    def __init__(self, path, kv_fp16=True):
        super().__init__(path, kv_fp16)
        get = lambda key, default=None: self.field(f"gemma3.{key}", default)
        self.head_dim = int(get("attention.key_length"))
        self.rope_dim = self.head_dim
        self.neox = True
        self.window = int(get("attention.sliding_window"))
        self.pattern = 6
        self.local_base = 10000.0
        self.global_base = float(get("rope.freq_base", 1000000.0))
        # query_pre_attn_scalar: head_dim for every Gemma 3 size but the 27B (62 layers).
        self.scale = (self.hidden / self.n_heads if self.n_layers == 62 else self.head_dim) ** -0.5

    def is_local(self, layer):
        return layer % self.pattern != self.pattern - 1

    def forward(self, tokens, cache):
        """Appends tokens to the cache; returns float64 logits of the last appended token, as a row
        (a 262k vocabulary's logits for every token of a long prompt would not fit)."""
        n = len(tokens)
        start = cache[0][0].shape[0]
        positions = np.arange(start, start + n)
        x = self.w["token_embd.weight"][np.asarray(tokens)] * np.sqrt(self.hidden)
        group = self.n_heads // self.n_kv_heads
        for i in range(self.n_layers):
            p = f"blk.{i}."
            local = self.is_local(i)
            self.rope_base = self.local_base if local else self.global_base
            h = self.norm(x, self.w[p + "attn_norm.weight"])
            q = (h @ self.w[p + "attn_q.weight"].T).reshape(n, self.n_heads, self.head_dim)
            k = (h @ self.w[p + "attn_k.weight"].T).reshape(n, self.n_kv_heads, self.head_dim)
            v = (h @ self.w[p + "attn_v.weight"].T).reshape(n, self.n_kv_heads, self.head_dim)
            q = self.rope(self.norm(q, self.w[p + "attn_q_norm.weight"]), positions)
            k = self.rope(self.norm(k, self.w[p + "attn_k_norm.weight"]), positions)
            if self.kv_fp16:
                k = k.astype(np.float16).astype(np.float64)
                v = v.astype(np.float16).astype(np.float64)
            keys = np.concatenate([cache[i][0], k])
            values = np.concatenate([cache[i][1], v])
            cache[i] = (keys, values)
            total = keys.shape[0]
            kh = np.repeat(keys, group, axis=1)
            vh = np.repeat(values, group, axis=1)
            scores = np.einsum("nhd,thd->hnt", q, kh) * self.scale
            key_pos = np.arange(total)[None, :]
            mask = positions[:, None] < key_pos
            if local:
                mask |= positions[:, None] - key_pos >= self.window
            scores[:, mask] = -np.inf
            scores -= scores.max(axis=-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(axis=-1, keepdims=True)
            attn = np.einsum("hnt,thd->nhd", probs, vh).reshape(n, self.n_heads * self.head_dim)
            x = x + self.norm(attn @ self.w[p + "attn_output.weight"].T, self.w[p + "post_attention_norm.weight"])
            h = self.norm(x, self.w[p + "ffn_norm.weight"])
            gate = h @ self.w[p + "ffn_gate.weight"].T
            up = h @ self.w[p + "ffn_up.weight"].T
            gelu = 0.5 * gate * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (gate + 0.044715 * gate**3)))
            x = x + self.norm((gelu * up) @ self.w[p + "ffn_down.weight"].T, self.w[p + "post_ffw_norm.weight"])
        return self.norm(x[-1:], self.w["output_norm.weight"]) @ self.output.T
