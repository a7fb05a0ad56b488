#!/usr/bin/env python3
"""Baseline for folio's GPU benchmarks: Hugging Face transformers on the same GPU, same run.

LlamaForCausalLM from a LlamaConfig of Llama-3-8B's shape (random init, bf16, SDPA attention):
single-stream greedy decode (128-token prompt, 256 new tokens) and offline generate of
512-token prompts x 128 new tokens at the largest batch that fits (256, 128, 64, ... tried in
turn). Then torch's scaled_dot_product_attention, causal, B=4, 32 heads x 128, 8k tokens: the
prefill kernel comparison (folio_cuda_check --bench reports folio's side). Never part of folio.
Prints RESULT lines that scripts/gpu-check collects.
"""
import argparse
import time

import torch


def timed(fn):
    torch.cuda.synchronize()
    start = time.perf_counter()
    out = fn()
    torch.cuda.synchronize()
    return out, time.perf_counter() - start


def sdpa_bench():
    b, h, s, d = 4, 32, 8192, 128
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    f = torch.nn.functional.scaled_dot_product_attention
    for _ in range(3):
        f(q, k, v, is_causal=True)
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    reps = 10
    for _ in range(reps):
        f(q, k, v, is_causal=True)
    stop.record()
    torch.cuda.synchronize()
    ms = start.elapsed_time(stop) / reps
    flops = 4.0 * b * h * s * s * d / 2  # causal: half the score matrix
    print(f"RESULT torch_sdpa_causal_8k_b4 ms={ms:.2f} tflops={flops / ms / 1e9:.0f}", flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--layers", type=int, default=32)
    parser.add_argument("--prompt", type=int, default=512)
    parser.add_argument("--output", type=int, default=128)
    parser.add_argument("--skip-model", action="store_true")
    args = parser.parse_args()
    import transformers
    from transformers import LlamaConfig, LlamaForCausalLM

    print(f"torch {torch.__version__}, transformers {transformers.__version__}, {torch.cuda.get_device_name()}",
          flush=True)
    sdpa_bench()
    if args.skip_model:
        return
    config = LlamaConfig(vocab_size=128256, hidden_size=4096, intermediate_size=14336,
                         num_hidden_layers=args.layers, num_attention_heads=32, num_key_value_heads=8,
                         max_position_embeddings=8192, rope_theta=500000.0, rms_norm_eps=1e-5,
                         tie_word_embeddings=False,
                         rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                       "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    start = time.perf_counter()
    with torch.device("cuda"):
        model = LlamaForCausalLM(config).to(torch.bfloat16).eval()
    torch.cuda.synchronize()
    print(f"model ready in {time.perf_counter() - start:.1f} s", flush=True)
    gen = dict(do_sample=False, pad_token_id=0)

    prompt = torch.randint(1000, 100000, (1, 128), device="cuda")
    with torch.inference_mode():
        model.generate(prompt, max_new_tokens=8, min_new_tokens=8, **gen)  # warm-up
        _, t1 = timed(lambda: model.generate(prompt, max_new_tokens=1, min_new_tokens=1, **gen))
        _, tn = timed(lambda: model.generate(prompt, max_new_tokens=257, min_new_tokens=257, **gen))
    print(f"RESULT hf_decode_single_stream tok_per_s={256 / (tn - t1):.1f}", flush=True)

    for batch in (256, 128, 64, 32, 16):
        try:
            prompts = torch.randint(1000, 100000, (batch, args.prompt), device="cuda")
            with torch.inference_mode():
                _, t = timed(lambda: model.generate(prompts, max_new_tokens=args.output,
                                                    min_new_tokens=args.output, **gen))
            print(f"RESULT hf_offline_throughput batch={batch} prompt={args.prompt} output={args.output} "
                  f"seconds={t:.2f} output_tok_per_s={batch * args.output / t:.1f}", flush=True)
            break
        except torch.cuda.OutOfMemoryError:
            print(f"batch {batch}: out of memory, trying half", flush=True)
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
