#!/usr/bin/env python3
"""Builds AWQ and GPTQ test directories from the default model (numpy and safetensors only):

  OUT/smollm2-awq/             AutoAWQ's "gemm" layout, 4-bit, group 64, zero points
  OUT/smollm2-gptq/            the same 4-bit values in GPTQ's layout (format v1: zeros stored
                               minus one; settings in quantize_config.json, AutoGPTQ's file)
  OUT/smollm2-gptq-actorder/   GPTQ symmetric with desc_act: a shuffled g_idx
  OUT/smollm2-int4-reference/  for each of the two value sets, every quantized layer dequantized
                               (w = s * (q - z)) in float32: what a loader must reproduce
  OUT/smollm2-awq-dequantized/ the first value set as a float32 model: what the AWQ and GPTQ
                               directories must compute
  OUT/smollm2-gptq-actorder-dequantized/  the act-order values as a float32 model
  OUT/smollm2-fp8/             FP8 E4M3 layers as llm-compressor writes them (compressed-tensors,
                               float-quantized): attention with one weight_scale per tensor, the
                               MLP's gate / up with one per output row ([out, 1]), down with
                               weight_scale_inv per 128 x 128 block (transformers' fine-grained
                               FP8; 576 and 1536 leave partial blocks); layers 0 and 29's values in
                               smollm2-int4-reference/layers.safetensors as "fp8.<name>"

The layouts are the ones AutoAWQ (WQLinear_GEMM: qweight (in, out / 8) with outputs
0, 2, 4, 6, 1, 3, 5, 7 in a word's nibbles from the lowest up; qzeros the same; fp16 scales
(groups, out)) and AutoGPTQ (QuantLinear v1: qweight (in / 8, out), inputs in nibble order;
qzeros (groups, out / 8) holding zero - 1; g_idx (in,)) write. The values are round-to-nearest
per group (the 4-bit codes are what matters to a loader, not how they were searched), from
OUT/smollm2-f32 (scripts/hf_test_models.py). Zeros are kept in 1..15 so that format v1 can store
them.

    python scripts/hf_quantized_test_models.py [--out DIR]
"""

import argparse
import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np

MODELS = Path(os.environ.get("FOLIO_MODELS_DIR") or Path.home() / ".cache" / "folio" / "models")
GROUP = 64  # SmolLM2's widths (576, 1536) are multiples of 64, not of 128
AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)
SHARED_INPUT = {"self_attn.q_proj": ("self_attn.k_proj", "self_attn.v_proj"), "mlp.gate_proj": ("mlp.up_proj",)}
LINEARS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
           "mlp.up_proj", "mlp.down_proj")


def log(message):
    print(f"hf_quantized_test_models: {message}", file=sys.stderr, flush=True)


def quantize_asym(w):
    """w (out, in) float32 -> q (out, in), z (out, groups), s (out, groups) fp16: per group of
    GROUP inputs, s = (max - min) / 15, z = round(-min / s) in 1..15, q = round(w / s) + z."""
    n, k = w.shape
    g = w.reshape(n, k // GROUP, GROUP)
    lo, hi = g.min(axis=2), g.max(axis=2)
    s = np.maximum((hi - lo) / 15.0, 1e-8).astype(np.float16)
    sf = s.astype(np.float32)
    z = np.clip(np.round(-lo / sf), 1, 15).astype(np.int64)
    q = np.clip(np.round(g / sf[:, :, None]) + z[:, :, None], 0, 15).astype(np.int64).reshape(n, k)
    return q, z, s


def quantize_sym_shuffled(w, g_idx):
    """GPTQ symmetric 4-bit with act-order groups: column k belongs to group g_idx[k]; z = 8,
    s = max |w| / 7 over the group, q = round(w / s) + 8 in 1..15."""
    n, k = w.shape
    groups = k // GROUP
    s = np.zeros((n, groups), np.float16)
    for g in range(groups):
        cols = np.nonzero(g_idx == g)[0]
        s[:, g] = np.maximum(np.abs(w[:, cols]).max(axis=1) / 7.0, 1e-8).astype(np.float16)
    sf = s.astype(np.float32)[:, g_idx]
    q = np.clip(np.round(w / sf) + 8, 1, 15).astype(np.int64)
    z = np.full((n, groups), 8, np.int64)
    return q, z, s


def e4m3_table():
    """The 127 non-negative finite E4M3 values (codes 0..126) in code order, which is also
    value order: exponent bias 7, 3 mantissa bits, subnormals at exponent 0, 0x7f NaN."""
    values = []
    for code in range(127):
        e, m = code >> 3, code & 7
        values.append(m / 8 * 2.0 ** -6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7))
    return np.array(values, np.float64)


E4M3 = e4m3_table()


def e4m3_encode(x):
    """float array (|x| <= 448) -> E4M3 codes, round to nearest, ties to the even code."""
    a = np.abs(x.astype(np.float64))
    hi = np.clip(np.searchsorted(E4M3, a), 1, 126)
    lo = hi - 1
    d_lo, d_hi = a - E4M3[lo], E4M3[hi] - a
    pick_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (hi % 2 == 0))
    code = np.where(pick_hi, hi, lo)
    code = np.where(a >= E4M3[126], 126, code)
    return (code | np.where(x < 0, 0x80, 0)).astype(np.uint8)


def e4m3_decode(codes):
    v = E4M3[codes & 0x7f]
    return np.where(codes & 0x80, -v, v)


def fp8_layer(w, granularity, block=128):
    """(codes, scale tensors, dequantized float32) of w (out, in) for one scale granularity."""
    n, k = w.shape
    if granularity == "tensor":
        scale = np.float32(np.abs(w).max() / 448.0)
        expand = np.full((n, k), scale, np.float64)
        tensors = {"weight_scale": np.array(scale, np.float32)}
    elif granularity == "row":
        scale = (np.abs(w).max(axis=1, keepdims=True) / 448.0).astype(np.float32)
        expand = np.repeat(scale.astype(np.float64), k, axis=1)
        tensors = {"weight_scale": scale}
    else:
        rb, cb = -(-n // block), -(-k // block)
        scale = np.zeros((rb, cb), np.float32)
        for i in range(rb):
            for j in range(cb):
                scale[i, j] = np.abs(w[i * block:(i + 1) * block, j * block:(j + 1) * block]).max() / 448.0
        expand = np.repeat(np.repeat(scale.astype(np.float64), block, axis=0), block, axis=1)[:n, :k]
        tensors = {"weight_scale_inv": scale}
    codes = e4m3_encode(w / expand)
    return codes, tensors, (e4m3_decode(codes) * expand).astype(np.float32)


def dequantize(q, z, s, g_idx):
    sf = s.astype(np.float32)[:, g_idx]
    return (sf * (q - z[:, g_idx]).astype(np.float32)).astype(np.float32)


def pack_nibbles(values, order):
    """values (..., 8 * c) ints 0..15 -> (..., c) int32, nibble i holding values[..., 8j + order[i]]."""
    v = values.reshape(values.shape[:-1] + (values.shape[-1] // 8, 8)).astype(np.uint32)
    word = np.zeros(v.shape[:-1], np.uint32)
    for i, o in enumerate(order):
        word |= v[..., o] << np.uint32(4 * i)
    return word.view(np.int32)


def awq_tensors(prefix, q, z, s):
    return {f"{prefix}.qweight": pack_nibbles(q.T, AWQ_ORDER),  # (in, out / 8)
            f"{prefix}.qzeros": pack_nibbles(z.T, AWQ_ORDER),  # (groups, out / 8)
            f"{prefix}.scales": np.ascontiguousarray(s.T)}  # (groups, out) fp16


def gptq_tensors(prefix, q, z, s, g_idx):
    qt = q.T.astype(np.uint32)  # (in, out): 8 consecutive inputs per word, in nibble order
    qweight = np.zeros((qt.shape[0] // 8, qt.shape[1]), np.uint32)
    for i in range(8):
        qweight |= qt[i::8, :] << np.uint32(4 * i)
    qweight = qweight.view(np.int32)
    return {f"{prefix}.qweight": qweight,  # (in / 8, out)
            f"{prefix}.qzeros": pack_nibbles(z.T - 1, range(8)),  # (groups, out / 8), v1: zero - 1
            f"{prefix}.scales": np.ascontiguousarray(s.T),
            f"{prefix}.g_idx": g_idx.astype(np.int32)}


def write(path, tensors):
    from safetensors.numpy import save_file
    save_file({k: np.ascontiguousarray(v) for k, v in sorted(tensors.items())}, str(path), metadata={"format": "pt"})


def finish_dir(src, target, tensors, config_extra, side_files):
    target.mkdir(parents=True, exist_ok=True)
    log(f"writing {target}")
    write(target / "model.safetensors", tensors)
    config = json.loads((src / "config.json").read_text())
    config.update(config_extra)
    (target / "config.json").write_text(json.dumps(config, indent=2))
    for name, content in side_files.items():
        (target / name).write_text(json.dumps(content, indent=2))
    for f in src.iterdir():
        if f.name.startswith("tokenizer") or f.name in ("generation_config.json", "chat_template.jinja",
                                                        "special_tokens_map.json"):
            shutil.copy(f, target / f.name)


def write_fp8_dir(src, target, tensors):
    """safetensors.numpy has no float8 dtype: the codes are written as U8 and the header's dtype
    of each FP8 weight then set to F8_E4M3 (one byte an element either way)."""
    finish_dir(src, target, tensors,
               {"quantization_config": {"quant_method": "compressed-tensors", "format": "float-quantized",
                                        "config_groups": {"group_0": {"weights": {"num_bits": 8, "type": "float"},
                                                                      "targets": ["Linear"]}},
                                        "ignore": ["lm_head"]}}, {})
    path = target / "model.safetensors"
    data = bytearray(path.read_bytes())
    length = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + length])
    for name, entry in header.items():
        if name != "__metadata__" and name.endswith(".weight") and entry["dtype"] == "U8":
            entry["dtype"] = "F8_E4M3"
    # Data offsets count from the end of the header, so a longer header moves nothing else.
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(len(text).to_bytes(8, "little") + text + bytes(data[8 + length:]))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=MODELS / "hf")
    args = parser.parse_args()
    out = args.out
    src = out / "smollm2-f32"
    stamp = out / ".quantized-stamp"
    from safetensors.numpy import load_file
    source_bytes = (src / "model.safetensors").stat().st_size if (src / "model.safetensors").exists() else 0
    want = hashlib.sha256(Path(__file__).read_bytes() + str(source_bytes).encode()).hexdigest()
    if stamp.exists() and stamp.read_text() == want:
        log(f"{out} quantized directories are up to date")
        return
    if source_bytes == 0:
        raise SystemExit(f"hf_quantized_test_models: {src} is missing (run scripts/hf_test_models.py first)")
    base = load_file(str(src / "model.safetensors"))
    layers = sorted({int(name.split(".")[2]) for name in base if name.startswith("model.layers.")})
    rng = np.random.default_rng(13)
    plain = {k: v for k, v in base.items() if not any(f".{lin}." in k for lin in LINEARS)}
    awq, gptq, actorder, dequantized, fp8 = dict(plain), dict(plain), dict(plain), dict(plain), dict(plain)
    actorder_dequantized = dict(plain)
    reference = {}
    for layer in layers:
        orders = {}
        for lin in LINEARS:
            prefix = f"model.layers.{layer}.{lin}"
            w = base[f"{prefix}.weight"].astype(np.float32)
            k = w.shape[1]
            plain_groups = np.arange(k) // GROUP
            q, z, s = quantize_asym(w)
            awq.update(awq_tensors(prefix, q, z, s))
            gptq.update(gptq_tensors(prefix, q, z, s, plain_groups))
            reference[f"asym.{prefix}"] = dequantize(q, z, s, plain_groups)
            dequantized[f"{prefix}.weight"] = reference[f"asym.{prefix}"]
            # Act-order: GPTQ visits inputs in a data-dependent order (by decreasing Hessian
            # diagonal) and numbers groups in it. Layers that read one input share a Hessian, so
            # Q, K, V share an order, as do gate and up; the last layer draws each its own (ties
            # broken apart), which a loader must also handle.
            if lin not in orders or layer == layers[-1]:
                orders[lin] = rng.permutation(k)
                for shared in SHARED_INPUT.get(lin, ()):
                    orders[shared] = orders[lin]
            position = np.empty(k, np.int64)
            position[orders[lin]] = np.arange(k)
            g_idx = position // GROUP
            q, z, s = quantize_sym_shuffled(w, g_idx)
            actorder.update(gptq_tensors(prefix, q, z, s, g_idx))
            reference[f"actorder.{prefix}"] = dequantize(q, z, s, g_idx)
            actorder_dequantized[f"{prefix}.weight"] = reference[f"actorder.{prefix}"]
            granularity = "tensor" if "self_attn" in lin else "block" if lin == "mlp.down_proj" else "row"
            codes, scales, values = fp8_layer(w, granularity)
            fp8[f"{prefix}.weight"] = codes
            fp8.update({f"{prefix}.{name}": v for name, v in scales.items()})
            if layer in (layers[0], layers[-1]):
                reference[f"fp8.{prefix}"] = values
    finish_dir(src, out / "smollm2-awq", awq,
               {"quantization_config": {"quant_method": "awq", "bits": 4, "group_size": GROUP, "zero_point": True,
                                        "version": "gemm"}}, {})
    finish_dir(src, out / "smollm2-gptq", gptq, {},
               {"quantize_config.json": {"bits": 4, "group_size": GROUP, "desc_act": False, "sym": False,
                                         "checkpoint_format": "gptq"}})
    finish_dir(src, out / "smollm2-gptq-actorder", actorder,
               {"quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": GROUP, "desc_act": True,
                                        "sym": True}}, {})
    finish_dir(src, out / "smollm2-awq-dequantized", dequantized, {}, {})
    finish_dir(src, out / "smollm2-gptq-actorder-dequantized", actorder_dequantized, {}, {})
    write_fp8_dir(src, out / "smollm2-fp8", fp8)
    (out / "smollm2-int4-reference").mkdir(parents=True, exist_ok=True)
    write(out / "smollm2-int4-reference" / "layers.safetensors", reference)
    stamp.write_text(want)


if __name__ == "__main__":
    main()
