#!/usr/bin/env python3
"""`folio synth --format hf` (issue 13, item 6): random-weight Hugging Face directories.
  - BF16: the same seed gives the GGUF file's model: folio's perplexity on the directory equals
    its perplexity on the GGUF file to the last digit (the Q / K rows written in transformers'
    order and taken back into GGUF's by the loader, config.json read as the GGUF's metadata);
  - tokenizer.json loads in Hugging Face's `tokenizers` and encodes a text to the ids folio's
    own tokenizer gives, from the directory and from the GGUF file;
  - GPTQ (plain and act-order) and AWQ: each layer matrix, unpacked with AutoGPTQ's and
    AutoAWQ's layouts in numpy, is the BF16 directory's matrix rounded to nearest (within half
    a step of each group's scale), act-order's g_idx a shuffled grouping of the right sizes, and
    AWQ's values GPTQ's; folio loads all three, their perplexity within 1% of BF16's;
  - FP8: each layer matrix, decoded from E4M3 in numpy, times its row's scale, is the BF16
    directory's within E4M3's rounding; config.json names compressed-tensors float-quantized;
    its perplexity within 1% of BF16's;
  - bad input (a GGUF-only type, a Gemma shape, a group size that does not divide the widths, an
    existing output) gets a clear error and leaves nothing behind.

    test-venv/bin/python tests/cli/synth_hf_test.py build/folio"""
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
from tokenizers import Tokenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_int4_unpack import dequantize, unpack_awq, unpack_gptq  # noqa: E402

folio = sys.argv[1]
root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
text_path = os.path.join(root, "tests/data/perplexity.txt")
GROUP = 32  # tiny's widths are 64 and 128
failures = []


def check(name, condition, detail=""):
    print(("ok    " if condition else "FAIL  ") + name + (f" ({detail})" if detail and not condition else ""))
    if not condition:
        failures.append(name)


def run(*args):
    return subprocess.run([folio, *args], capture_output=True, text=True)


def read_safetensors(path):
    """name -> numpy array; BF16 widened to float32 (numpy has no bfloat16)."""
    data = open(path, "rb").read()
    length = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + length])
    kinds = {"BF16": np.uint16, "F16": np.float16, "F32": np.float32, "I32": np.int32, "F8_E4M3": np.uint8}
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        begin, end = e["data_offsets"]
        raw = np.frombuffer(data[8 + length + begin:8 + length + end], kinds[e["dtype"]]).reshape(e["shape"])
        out[name] = (raw.astype(np.uint32) << 16).view(np.float32) if e["dtype"] == "BF16" else raw
    return out


def e4m3(codes):
    """OCP FP8 E4M3 bytes -> float32: sign, 4 exponent bits (bias 7), 3 mantissa bits;
    exponent 0 is subnormal; 0x7f / 0xff are NaN (no infinities)."""
    c = codes.astype(np.int64)
    sign = np.where(c & 0x80, -1.0, 1.0)
    exponent, mantissa = (c >> 3) & 15, c & 7
    value = np.where(exponent == 0, mantissa / 8.0 * 2.0**-6, (1 + mantissa / 8.0) * 2.0 ** (exponent - 7))
    value = np.where((c & 0x7f) == 0x7f, np.nan, value)
    return (sign * value).astype(np.float32)


def perplexity(model):
    done = run("perplexity", "-m", model, "-f", text_path, "-c", "128", "--chunks", "4")
    m = re.search(r"perplexity: ([\d.]+)", done.stdout)
    check(f"folio perplexity loads {os.path.basename(model)}", done.returncode == 0 and m is not None,
          done.stderr[-400:])
    return float(m.group(1)) if m else float("nan")


with tempfile.TemporaryDirectory() as work:
    gguf = os.path.join(work, "tiny.gguf")
    dirs = {d: os.path.join(work, d) for d in ("bf16", "gptq", "gptq-act-order", "awq", "fp8")}
    made = run("synth", "--config", "tiny", "--seed", "7", "-q", "-o", gguf)
    check("synth tiny GGUF", made.returncode == 0, made.stderr)
    for dtype, path in dirs.items():
        made = run("synth", "--config", "tiny", "--seed", "7", "--format", "hf", "--dtype", dtype, "--group-size",
                   str(GROUP), "-o", path)
        check(f"synth tiny --format hf --dtype {dtype}", made.returncode == 0, made.stderr)
        check(f"{dtype}: progress shown", "synth " in made.stderr and "%" in made.stderr, made.stderr[-300:])
        check(f"{dtype}: a directory with its files",
              all(os.path.exists(os.path.join(path, f)) for f in
                  ("config.json", "tokenizer.json", "tokenizer_config.json", "model.safetensors")))

    # The same seed, the same model.
    base = perplexity(gguf)
    bf16 = perplexity(dirs["bf16"])
    check("the BF16 directory is the GGUF file's model (same perplexity to the last digit)", base == bf16,
          f"{bf16} vs {base}")

    # tokenizer.json against Hugging Face's tokenizers and folio's tokenizer.
    text = open(text_path).read()[:2000]
    hf_ids = Tokenizer.from_file(os.path.join(dirs["bf16"], "tokenizer.json")).encode(text).ids
    for model in (dirs["bf16"], gguf):
        done = run("tokenize", "-m", model, "-p", text)
        ids = json.loads(done.stdout) if done.returncode == 0 else None
        ids = ids.get("ids", ids) if isinstance(ids, dict) else ids
        check(f"tokenizers and folio ({os.path.basename(model)}) encode alike", ids == hf_ids,
              f"{len(hf_ids)} vs {None if ids is None else len(ids)} ids; {done.stderr[-200:]}")

    # The 4-bit checkpoints: the BF16 weights rounded to nearest.
    floats = read_safetensors(os.path.join(dirs["bf16"], "model.safetensors"))
    tensors = {d: read_safetensors(os.path.join(dirs[d], "model.safetensors")) for d in ("gptq", "gptq-act-order", "awq")}
    for d in ("gptq", "gptq-act-order", "awq"):
        config = json.load(open(os.path.join(dirs[d], "config.json")))["quantization_config"]
        want = {"quant_method": "awq" if d == "awq" else "gptq", "bits": 4, "group_size": GROUP}
        check(f"{d}: config.json's quantization_config", all(config.get(k) == v for k, v in want.items()), config)
        if d != "awq":
            check(f"{d}: desc_act", config.get("desc_act") == (d == "gptq-act-order"), config)
    worst = {}
    for layer in range(2):
        for linear in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                       "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"):
            prefix = f"model.layers.{layer}.{linear}"
            w = floats[prefix + ".weight"]
            values = {}
            for d in ("gptq", "gptq-act-order"):
                q, z, s, g_idx = unpack_gptq(tensors[d], prefix)
                cols = w.shape[1]
                if d == "gptq":
                    check(f"{prefix}: plain g_idx", np.array_equal(g_idx, np.arange(cols) // GROUP))
                else:
                    check(f"{prefix}: act-order g_idx shuffles groups of {GROUP}",
                          np.array_equal(np.bincount(g_idx), np.full(cols // GROUP, GROUP)) and
                          not np.array_equal(g_idx, np.arange(cols) // GROUP))
                values[d] = dequantize(q, z, s, g_idx)
                # Round to nearest: within half a step of the weight (plus the BF16 rounding of
                # the stored float and the fp16 rounding of the scale).
                step = s[g_idx, :].T
                excess = np.abs(values[d] - w) - (0.5 * step + np.abs(w) * 2.0**-7 + 1e-6)
                worst[d] = max(worst.get(d, -1.0), float(excess.max()))
            q, z, s = unpack_awq(tensors["awq"], prefix)
            awq = dequantize(q, z, s, np.arange(w.shape[1]) // GROUP)
            check(f"{prefix}: AWQ holds GPTQ's values", np.array_equal(awq, values["gptq"]))
    # FP8: E4M3 keeps 3 mantissa bits: within 2^-4 of each value (relative), or 2^-10 of the
    # row's scale where it falls among the subnormals, plus the BF16 rounding of the float.
    fp8 = read_safetensors(os.path.join(dirs["fp8"], "model.safetensors"))
    config = json.load(open(os.path.join(dirs["fp8"], "config.json")))["quantization_config"]
    check("fp8: config.json's quantization_config", config.get("quant_method") == "compressed-tensors" and
          config.get("format") == "float-quantized", config)
    fp8_excess = -1.0
    for layer in range(2):
        for linear in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                       "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"):
            prefix = f"model.layers.{layer}.{linear}"
            w = floats[prefix + ".weight"]
            scale = fp8[prefix + ".weight_scale"]
            check(f"{prefix}: fp8 weight and [rows, 1] scale", fp8[prefix + ".weight"].shape == w.shape and
                  scale.shape == (w.shape[0], 1))
            got = e4m3(fp8[prefix + ".weight"]) * scale
            bound = np.abs(w) * (2.0**-4 + 2.0**-7) + scale * 2.0**-10 + 1e-7
            fp8_excess = max(fp8_excess, float((np.abs(got - w) - bound).max()))
    check("fp8: every weight within E4M3's rounding of the BF16 one", fp8_excess <= 0.0, f"worst excess {fp8_excess:.3g}")
    # Act-order's orders follow the inputs, as GPTQ's Hessians do: one for Q, K, V, one for
    # gate, up (so the loader gathers each input once), others for O and down.
    for layer in range(2):
        g = {lin: unpack_gptq(tensors["gptq-act-order"], f"model.layers.{layer}.{lin}")[3]
             for lin in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                         "mlp.gate_proj", "mlp.up_proj")}
        check(f"layer {layer}: Q, K, V share one act-order", np.array_equal(g["self_attn.q_proj"], g["self_attn.k_proj"])
              and np.array_equal(g["self_attn.q_proj"], g["self_attn.v_proj"]))
        check(f"layer {layer}: gate, up share one act-order", np.array_equal(g["mlp.gate_proj"], g["mlp.up_proj"]))
        check(f"layer {layer}: Q's, gate's and O's orders differ",
              not np.array_equal(g["self_attn.q_proj"], g["mlp.gate_proj"]) and
              not np.array_equal(g["self_attn.q_proj"], g["self_attn.o_proj"]))
    for d, excess in worst.items():
        check(f"{d}: every weight within half a step of the BF16 one", excess <= 0.0, f"worst excess {excess:.3g}")
    for d in ("gptq", "gptq-act-order", "awq", "fp8"):
        p = perplexity(dirs[d])
        check(f"{d}: perplexity within 1% of BF16's", abs(p / bf16 - 1) < 0.01, f"{p} vs {bf16}")

    # Bad input: a clear error, nothing left behind.
    def refused(name, args, said, target):
        before = set(os.listdir(work))
        done = run("synth", *args, "-o", target)
        check(f"{name}: refused", done.returncode != 0)
        check(f"{name}: says why", re.search(said, done.stderr) is not None, done.stderr[-300:])
        check(f"{name}: leaves nothing", set(os.listdir(work)) == before, sorted(set(os.listdir(work)) - before))

    fresh = os.path.join(work, "fresh")
    refused("a GGUF type as hf", ["--config", "tiny", "--format", "hf", "--dtype", "q4_k"], "not a Hugging Face", fresh)
    refused("gptq as GGUF", ["--config", "tiny", "--dtype", "gptq"], "not a GGUF", fresh)
    refused("a Gemma shape", ["--config", "gemma3-tiny", "--format", "hf"], "Llama-family", fresh)
    refused("a group size that does not divide", ["--config", "tiny", "--format", "hf", "--dtype", "gptq",
                                                  "--group-size", "96"], "does not divide", fresh)
    refused("an existing output", ["--config", "tiny", "--format", "hf"], "exists", dirs["bf16"])

print(f"synth_hf: {len(failures)} failures")
sys.exit(1 if failures else 0)
