#!/usr/bin/env python3
"""`folio quantize DIR OUT --type gptq | awq | int4` (issue 13, item 5), end to end on the
default model's F32 directory (scripts/hf_test_models.py):
  - the checkpoints decode with AutoGPTQ's format-v1 unpacking written here in numpy (qweight
    (in / 8, out), nibble i = input 8r + i; qzeros (groups, out / 8) holding zero - 1; fp16
    scales; g_idx), independently of folio's reader: round to nearest lands within half a step
    of every source weight, GPTQ's act-order g_idx is a shuffled grouping of the right sizes;
  - AWQ's checkpoint decodes with AutoAWQ's GEMM unpacking (qweight (in, out / 8), outputs
    0, 2, 4, 6, 1, 3, 5, 7 in a word's nibbles; qzeros likewise), and its scales are folded
    consistently: the quantized Q|K|V and gate|up columns divided by the factor the RMSNorm
    weights were divided by give back the source weights;
  - folio loads all three, and GPTQ and AWQ beat round to nearest on a text they were not
    calibrated on (perplexity and mean KL against the F32 model, `folio perplexity --kl-reference`);
  - bad input (a GGUF, an already quantized directory, an existing output, a calibration text
    shorter than asked) gets a clear error and leaves no partial output.

    test-venv/bin/python tests/cli/quantize_gptq_test.py build/folio"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np
from safetensors.numpy import load_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_int4_unpack import dequantize, unpack_awq, unpack_gptq  # noqa: E402

folio = sys.argv[1]
root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
models = os.environ.get("FOLIO_MODELS_DIR") or os.path.expanduser("~/.cache/folio/models")
source = os.path.join(models, "hf", "smollm2-f32")
GROUP = 64  # SmolLM2's widths (576, 1536) are multiples of 64, not of 128
failures = []


def check(name, condition, detail=""):
    print(("ok    " if condition else "FAIL  ") + name + (f" ({detail})" if detail and not condition else ""))
    if not condition:
        failures.append(name)


def quantize(*args):
    return subprocess.run([folio, "quantize", *args], capture_output=True, text=True)


def perplexity(model):
    done = subprocess.run([folio, "perplexity", "-m", model, "-f", os.path.join(root, "tests/data/perplexity.txt"),
                           "-c", "512", "--chunks", "2", "--kl-reference", source], capture_output=True, text=True)
    m = re.search(r"model ([\d.]+) \(([-+\d.]+)%\); mean KL ([\d.]+)", done.stdout)
    check(f"folio perplexity loads {os.path.basename(model)}", done.returncode == 0 and m is not None,
          done.stderr[-500:])
    return (float(m.group(1)), float(m.group(3))) if m else (float("inf"), float("inf"))


if not os.path.isfile(os.path.join(source, "model.safetensors")):
    print(f"missing {source}: run scripts/hf_test_models.py (make test does)")
    sys.exit(1)
work = tempfile.mkdtemp(prefix="folio-gptq-")
try:
    # Calibration: license texts, not the text perplexity is measured on.
    calibration = os.path.join(work, "calibration.txt")
    licenses = [p for p in ("/usr/share/common-licenses/GPL-2", "/usr/share/common-licenses/LGPL-2.1",
                            "/usr/share/common-licenses/Artistic") if os.path.exists(p)]
    with open(calibration, "w") as out:
        for p in licenses or [os.path.join(root, "README.md")]:
            out.write(open(p, errors="replace").read())

    rtn_dir, gptq_dir = os.path.join(work, "int4"), os.path.join(work, "gptq")
    done = quantize(source, rtn_dir, "--type", "int4", "--group-size", str(GROUP), "-q")
    check("int4 (round to nearest) succeeds", done.returncode == 0, done.stderr[-500:])
    done = quantize(source, gptq_dir, "--type", "gptq", "--group-size", str(GROUP), "--act-order",
                    "--calibration-text", calibration, "--calibration-tokens", "1024")
    check("gptq with act-order succeeds", done.returncode == 0, done.stderr[-500:])
    check("gptq shows progress per matrix", "model.layers.29.mlp.down_proj" in done.stderr)

    config = json.load(open(os.path.join(gptq_dir, "config.json")))
    q = config.get("quantization_config", {})
    check("config.json says gptq 4-bit with its settings",
          q.get("quant_method") == "gptq" and q.get("bits") == 4 and q.get("group_size") == GROUP and
          q.get("desc_act") is True and q.get("checkpoint_format") == "gptq", str(q))
    check("the tokenizer travels with the weights", os.path.isfile(os.path.join(gptq_dir, "tokenizer.json")))

    weights = load_file(os.path.join(source, "model.safetensors"))
    rtn = load_file(os.path.join(rtn_dir, "model.safetensors"))
    gptq = load_file(os.path.join(gptq_dir, "model.safetensors"))
    check("no float copy of a quantized matrix is left", not any(k.endswith("proj.weight") for k in rtn))
    worst_rtn, shuffled = 0.0, 0
    for layer in (0, 14, 29):
        for linear in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                       "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"):
            prefix = f"model.layers.{layer}.{linear}"
            w = weights[prefix + ".weight"]
            qq, z, s, g_idx = unpack_gptq(rtn, prefix)
            check(f"{prefix}: plain g_idx", np.array_equal(g_idx, np.arange(w.shape[1]) // GROUP))
            step = s[g_idx, :].T
            worst_rtn = max(worst_rtn, float(np.max(np.abs(dequantize(qq, z, s, g_idx) - w) / step)))
            qq, z, s, g_idx = unpack_gptq(gptq, prefix)
            counts = np.bincount(g_idx, minlength=w.shape[1] // GROUP)
            check(f"{prefix}: act-order groups of {GROUP}", np.all(counts == GROUP), str(counts))
            shuffled += int(not np.array_equal(g_idx, np.sort(g_idx)))
            wq = dequantize(qq, z, s, g_idx)
            rel = float(np.linalg.norm(wq - w) / np.linalg.norm(w))
            check(f"{prefix}: GPTQ weights decode near the source (relative error {rel:.3f})", rel < 0.3)
    # Half a step, and a little: the scale is rounded to fp16 before the weights are rounded against
    # it, so a group's range spans up to 15 * (1 + 2^-11) steps.
    check(f"round to nearest within half a step of every weight (worst {worst_rtn:.3f} steps)",
          worst_rtn <= 0.5 + 15 * 2**-11)
    check("act-order shuffles the groups", shuffled > 0)

    awq_dir = os.path.join(work, "awq")
    done = quantize(source, awq_dir, "--type", "awq", "--group-size", str(GROUP), "--calibration-text", calibration,
                    "--calibration-tokens", "512", "-q")
    check("awq succeeds", done.returncode == 0, done.stderr[-500:])
    q = json.load(open(os.path.join(awq_dir, "config.json"))).get("quantization_config", {})
    check("config.json says awq 4-bit gemm with zero points",
          q.get("quant_method") == "awq" and q.get("version") == "gemm" and q.get("zero_point") is True and
          q.get("group_size") == GROUP, str(q))
    awq = load_file(os.path.join(awq_dir, "model.safetensors"))
    worst = 0.0
    for layer in (0, 14, 29):
        base = f"model.layers.{layer}."
        for norm, linears in (("input_layernorm", ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj")),
                              ("post_attention_layernorm", ("mlp.gate_proj",))):
            factor = weights[base + norm + ".weight"] / awq[base + norm + ".weight"].astype(np.float32)
            check(f"{base}{norm}: folded scales are not all 1", float(np.std(np.log(factor))) > 1e-3)
            for linear in linears:
                qq, z, s = unpack_awq(awq, base + linear)
                g_idx = np.arange(qq.shape[1]) // GROUP
                w = weights[base + linear + ".weight"]
                back = dequantize(qq, z, s, g_idx) / factor[None, :]
                worst = max(worst, float(np.linalg.norm(back - w) / np.linalg.norm(w)))
    check(f"AWQ's columns over the norms' factors give back the source (worst relative error {worst:.3f})",
          worst < 0.2)

    rtn_ppl, rtn_kl = perplexity(rtn_dir)
    gptq_ppl, gptq_kl = perplexity(gptq_dir)
    awq_ppl, awq_kl = perplexity(awq_dir)
    print(f"      perplexity / mean KL vs F32: int4 {rtn_ppl:.3f} / {rtn_kl:.4f}, gptq {gptq_ppl:.3f} / {gptq_kl:.4f}, "
          f"awq {awq_ppl:.3f} / {awq_kl:.4f}")
    check("GPTQ beats round to nearest (perplexity)", gptq_ppl < rtn_ppl)
    check("GPTQ beats round to nearest (KL)", gptq_kl < rtn_kl)
    check("AWQ beats round to nearest (perplexity)", awq_ppl < rtn_ppl)
    check("AWQ beats round to nearest (KL)", awq_kl < rtn_kl)

    # Bad input: a clear message, exit 1 or 2, nothing left behind.
    def refused(name, args, said):
        before = set(os.listdir(work))
        done = quantize(*args)
        check(f"{name}: refused", done.returncode in (1, 2), f"exit {done.returncode}")
        check(f"{name}: says why", said in done.stderr, done.stderr[-300:])
        check(f"{name}: leaves nothing", set(os.listdir(work)) == before, str(set(os.listdir(work)) - before))

    gguf = os.path.join(models, "SmolLM2-135M-Instruct.Q4_1.gguf")
    refused("a GGUF input", [gguf, os.path.join(work, "x"), "--type", "gptq", "--calibration-text", calibration],
            "Hugging Face directory")
    refused("an already quantized directory", [os.path.join(models, "hf", "smollm2-gptq"), os.path.join(work, "y"),
                                               "--type", "int4", "--group-size", str(GROUP)], "already quantized")
    refused("an existing output", [source, rtn_dir, "--type", "int4", "--group-size", str(GROUP)], "exists")
    refused("a group size that does not divide the widths", [source, os.path.join(work, "z"), "--type", "int4"],
            "not a multiple of --group-size")
    refused("awq with act-order", [source, os.path.join(work, "u"), "--type", "awq", "--act-order",
                                   "--calibration-text", calibration], "act-order")
    refused("gptq without a calibration text", [source, os.path.join(work, "w"), "--type", "gptq"],
            "--calibration-text")
    refused("a calibration text too short", [source, os.path.join(work, "v"), "--type", "gptq", "--group-size",
                                             str(GROUP), "--calibration-text", calibration,
                                             "--calibration-tokens", "1000000"], "fewer than")
finally:
    shutil.rmtree(work, ignore_errors=True)

print(f"quantize_gptq: {len(failures)} failures")
sys.exit(1 if failures else 0)
