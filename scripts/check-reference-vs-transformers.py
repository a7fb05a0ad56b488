#!/usr/bin/env python3
"""Checks the float64 reference (reference_forward.py) against Hugging Face transformers
loading the same GGUF file, so that the reference folio's goldens come from is itself
checked against the ecosystem's implementation of Llama.

  /tmp/refvenv/bin/pip install torch transformers gguf numpy
  /tmp/refvenv/bin/python scripts/check-reference-vs-transformers.py

transformers dequantizes the GGUF to float32 and keeps its KV cache in float32, so the
reference runs here with kv_fp16=False, in float64. For each golden prompt it reports the
last-position logits' max |difference| and how many of 64 greedy tokens agree, and writes
tests/golden/model/reference_vs_transformers.json.
"""
import json
import os
import sys

import numpy as np
import torch
from transformers import AutoModelForCausalLM

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_forward import ReferenceLlama  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.environ.get("FOLIO_MODELS_DIR", os.path.expanduser("~/.cache/folio/models"))
NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
STEPS = 64


def main():
    torch.set_grad_enabled(False)
    hf = AutoModelForCausalLM.from_pretrained(MODELS, gguf_file=NAME, torch_dtype=torch.float32)
    hf.eval()
    reference = ReferenceLlama(os.path.join(MODELS, NAME), kv_fp16=False)
    goldens = json.load(open(os.path.join(ROOT, "tests", "golden", "model", "smollm2_q4_1.json")))
    rows = []
    for case in goldens["cases"]:
        ids = case["prompt_ids"]
        out = hf.generate(torch.tensor([ids]), max_new_tokens=STEPS, do_sample=False, min_new_tokens=STEPS,
                          output_logits=True, return_dict_in_generate=True, eos_token_id=None, pad_token_id=0)
        hf_tokens = out.sequences[0, len(ids):].tolist()
        hf_last = out.logits[0][0].double().numpy()
        cache = reference.new_cache()
        logits = reference.forward(ids, cache)[-1]
        ref_last = logits
        ref_tokens = []
        for _ in range(STEPS):
            token = int(np.argmax(logits))
            ref_tokens.append(token)
            logits = reference.forward([token], cache)[-1]
        agree = next((i for i, (a, b) in enumerate(zip(hf_tokens, ref_tokens)) if a != b), STEPS)
        row = {"name": case["name"], "prompt_tokens": len(ids), "greedy_tokens_equal": agree,
               "last_logits_max_abs_diff": float(np.abs(hf_last - ref_last).max())}
        print(row, file=sys.stderr)
        rows.append(row)
    with open(os.path.join(ROOT, "tests", "golden", "model", "reference_vs_transformers.json"), "w") as f:
        json.dump({"transformers": __import__("transformers").__version__, "torch": torch.__version__,
                   "cases": rows}, f, indent=1)


if __name__ == "__main__":
    main()
