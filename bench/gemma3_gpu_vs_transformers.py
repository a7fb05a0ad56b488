#!/usr/bin/env python3
"""pp512 / tg128 of Gemma 3 270M's shape on one GPU: folio and Hugging Face transformers side by
side, same run, same shape, bf16, random weights. Never part of folio.

  python3 bench/gemma3_gpu_vs_transformers.py --folio build-gpu/folio --model 270m-bf16.gguf [--reps 5]

folio: `folio bench --device cuda -p 512 -n 128 -r N --json` on a `folio synth --config
gemma3-270m --dtype bf16` file. transformers: Gemma3ForCausalLM built from the same shape's
config (SDPA attention, sliding window 512, bf16), measured as llama-bench measures: ppN = one
forward of N random tokens from an empty cache; tgN = N single-token forwards from an empty
cache, each reusing the cache (no sampling work beyond an argmax on the device). The two
alternate, one repetition each at a time. Prints RESULT lines and the ratios.
"""
import argparse
import json
import statistics
import subprocess
import time

import torch


def transformers_model():
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    config = Gemma3TextConfig(vocab_size=262144, hidden_size=640, intermediate_size=2048, num_hidden_layers=18,
                              num_attention_heads=4, num_key_value_heads=1, head_dim=256, sliding_window=512,
                              query_pre_attn_scalar=256, max_position_embeddings=32768,
                              layer_types=(["sliding_attention"] * 5 + ["full_attention"]) * 3)
    torch.manual_seed(0)
    model = Gemma3ForCausalLM(config).to(device="cuda", dtype=torch.bfloat16).eval()
    model.config._attn_implementation = "sdpa"
    return model


@torch.no_grad()
def transformers_pp(model, n):
    ids = torch.randint(0, 262144, (1, n), device="cuda")
    torch.cuda.synchronize()
    start = time.perf_counter()
    model(ids, use_cache=True)
    torch.cuda.synchronize()
    return n / (time.perf_counter() - start)


@torch.no_grad()
def transformers_tg(model, n):
    from transformers import DynamicCache

    cache = DynamicCache(config=model.config)
    token = torch.randint(0, 262144, (1, 1), device="cuda")
    torch.cuda.synchronize()
    start = time.perf_counter()
    for position in range(n):
        out = model(token, past_key_values=cache, use_cache=True,
                    cache_position=torch.tensor([position], device="cuda"))
        token = out.logits[:, -1:].argmax(-1)
    torch.cuda.synchronize()
    return n / (time.perf_counter() - start)


def folio(binary, model, pp, tg):
    out = subprocess.run([binary, "bench", "-m", model, "--device", "cuda", "-p", str(pp), "-n", str(tg), "-r", "1",
                          "--json"], check=True, capture_output=True, text=True).stdout
    rate = {}
    for line in out.splitlines():  # one JSON object a test
        if line.strip():
            row = json.loads(line)
            rate[row["test"]] = row["median_tps"]
    return rate


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--folio", required=True)
    parser.add_argument("--model", required=True, help="folio synth --config gemma3-270m --dtype bf16")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--pp", type=int, default=512)
    parser.add_argument("--tg", type=int, default=128)
    args = parser.parse_args()
    import transformers

    print(f"torch {torch.__version__}, transformers {transformers.__version__}, {torch.cuda.get_device_name()}",
          flush=True)
    model = transformers_model()
    transformers_pp(model, args.pp)  # warm-up: kernels and cuBLAS handles
    transformers_tg(model, 8)
    folio(args.folio, args.model, args.pp, 8)
    results = {"folio": {"pp": [], "tg": []}, "transformers": {"pp": [], "tg": []}}
    for _ in range(args.reps):
        f = folio(args.folio, args.model, args.pp, args.tg)
        results["folio"]["pp"].append(f[f"pp{args.pp}"])
        results["folio"]["tg"].append(f[f"tg{args.tg}"])
        results["transformers"]["pp"].append(transformers_pp(model, args.pp))
        results["transformers"]["tg"].append(transformers_tg(model, args.tg))
    for test, n in (("pp", args.pp), ("tg", args.tg)):
        mine, theirs = (statistics.median(results[k][test]) for k in ("folio", "transformers"))
        spread = {k: f"{min(results[k][test]):.0f}-{max(results[k][test]):.0f}" for k in results}
        print(f"RESULT gemma3_270m_shape_{test}{n} folio={mine:.0f} ({spread['folio']}) "
              f"transformers={theirs:.0f} ({spread['transformers']}) ratio={mine / theirs:.2f}", flush=True)


if __name__ == "__main__":
    main()
