// --bench (benchmarks only, no checks): kernel timings after warm-up with CUDA events, against
// the device-to-device copy bandwidth measured in the same run (memory-bound kernels) or
// counted FLOPs (prefill). One `RESULT name key=value ...` line per benchmark.
#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>

#include "attention_fixture.h"
#include "check_util.h"

namespace folio::cuda::check {

static void prefill_benchmarks(std::mt19937_64& rng) {
  // Causal FLOPs exactly as bench/gpu_vs_transformers.py counts torch SDPA's:
  // 4 * B * H * S * S * D / 2 (QK^T and PV, half the score matrix).
  // Each prefill kernel shape; the dispatcher's (kDefaultPrefillKernel) keeps the plain name.
  auto prefill = [&](const char* base_name, int batch, int seq_len, int heads, int kv_heads, int dim,
                     PrefillKernel kernel, KvFormat format = KvFormat::kFp16) {
    const bool is_default = kernel == kDefaultPrefillKernel;
    const char* kernel_name = prefill_kernel_name(kernel);
    const std::string name = is_default ? std::string(base_name) : std::string(base_name) + "_" + kernel_name;
    AttentionProblem p;
    p.format = format;
    p.head_dim = dim;
    p.num_heads = heads;
    p.num_kv_heads = kv_heads;
    p.block_size = kv_default_block_size(format);  // the residual formats' 128-token windows
    for (int s = 0; s < batch; ++s) p.seqs.push_back({seq_len, seq_len});
    p.build(rng, false);
    const PagedAttentionArgs args = p.args();
    const double ms = time_ms([&] { paged_attention_prefill(args, nullptr, PrefillRows::kAll, kernel); }, 2, 10);
    const double flops = 4.0 * batch * heads * static_cast<double>(seq_len) * seq_len * dim / 2;
    std::printf("RESULT %s ms=%.3f tflops=%.0f kernel=%s%s\n", name.c_str(), ms, flops / (ms * 1e9), kernel_name,
                is_default ? " (default)" : "");
    std::fflush(stdout);
  };
  for (const PrefillKernel kernel : kPrefillKernels) {
    prefill("attn_prefill_causal_8k_b4", 4, 8192, 32, 8, 128, kernel);
    prefill("attn_prefill_causal_2k_b16", 16, 2048, 32, 8, 128, kernel);
    // wgmma has no head_dim 64 form (it would run the 128-row kernel).
    if (kernel != PrefillKernel::kWgmma) {
      prefill("attn_prefill_causal_1k_b16_smollm_h9_3_d64", 16, 1024, 9, 3, 64, kernel);
    }
  }
  // Quantized caches prefill in the 64-row kernel, dequantizing tiles (a whole prompt: KIVI
  // reads it staged, prefix hits and later chunks read sealed blocks).
  prefill("attn_prefill_causal_8k_b4_fp8", 4, 8192, 32, 8, 128, PrefillKernel::kRows64, KvFormat::kFp8E4M3);
  prefill("attn_prefill_causal_8k_b4_kivi2", 4, 8192, 32, 8, 128, PrefillKernel::kRows64, KvFormat::kKivi2);
}

void run_benchmarks(const Options& opt, std::mt19937_64& rng) {
  // --bench --filter prefill: the prefill attention kernels only; --filter decode: the copy
  // roofline and the decode kernels only.
  if (opt.filter == "prefill") return prefill_benchmarks(rng);
  std::printf("\n== benchmarks (CUDA events after warm-up; RESULT lines for scripts/gpu-check) ==\n");
  const size_t copy_bytes = size_t{1} << 30;
  DeviceBuffer<unsigned char> a(copy_bytes), b(copy_bytes);
  FOLIO_CUDA_OK(cudaMemset(a.get(), 1, copy_bytes));
  // The roofline: a 16-byte vectorized copy kernel (cudaMemcpyAsync's device-to-device path
  // reaches about half of it; printed for comparison only).
  const double copy_ms = time_ms([&] { copy_kernel_16(b.get(), a.get(), copy_bytes, opt.sm_count, nullptr); }, 3, 20);
  const double copy_gbs = 2.0 * copy_bytes / (copy_ms * 1e6);  // read + write
  const double memcpy_ms =
      time_ms([&] { cudaMemcpyAsync(b.get(), a.get(), copy_bytes, cudaMemcpyDeviceToDevice); }, 3, 20);
  std::printf(
      "RESULT cuda_copy_d2d bytes=1GiB ms=%.3f gb_per_s=%.0f (read+write, 16-byte copy kernel; pct_of_copy below is "
      "against this)\n",
      copy_ms, copy_gbs);
  std::printf(
      "RESULT cuda_memcpy_d2d bytes=1GiB ms=%.3f gb_per_s=%.0f (read+write, cudaMemcpyAsync, not used as the "
      "roofline)\n",
      memcpy_ms, 2.0 * copy_bytes / (memcpy_ms * 1e6));
  std::fflush(stdout);

  // Decode through the dispatcher (the batch-invariant split plan, reduce included); GB/s
  // counts the K/V bytes attention must read (reads only), % against the copy kernel's
  // read+write rate (a read-only stream can beat 100%).
  // policy == nullptr: the dispatcher; else paged_attention_decode_policy (tuning sweeps).
  auto decode = [&](const char* name, int batch, int ctx, int heads, int kv_heads, int dim,
                    const DecodeSplitPolicy* policy, KvFormat format = KvFormat::kFp16,
                    DecodeKernel kernel = DecodeKernel::kDefault) {
    AttentionProblem p;
    p.format = format;
    p.head_dim = dim;
    p.num_heads = heads;
    p.num_kv_heads = kv_heads;
    p.block_size = kv_default_block_size(format);  // the residual formats' 128-token windows
    for (int s = 0; s < batch; ++s) p.seqs.push_back({1, ctx});
    p.build(rng, /*fill_values=*/false);
    const PagedAttentionArgs args = p.args();
    const DecodeSplitPolicy used = policy != nullptr ? *policy : DecodeSplitPolicy{};
    if (kernel != DecodeKernel::kDefault) policy = &used;
    const size_t ws_bytes = decode_workspace_layout(batch, heads, dim, decode_grid_splits(ctx, used)).total_bytes;
    DeviceBuffer<unsigned char> ws(std::max<size_t>(1, ws_bytes));
    const Workspace workspace{ws.get(), ws.size()};
    const double ms =
        policy != nullptr
            ? time_ms([&] { paged_attention_decode_policy(args, workspace, used, nullptr, kernel); }, 5, 20)
            : time_ms([&] { paged_attention(args, workspace, opt.sm_count, nullptr); }, 5, 20);
    const double gbs = p.kv_bytes_read() / (ms * 1e6);
    std::printf(
        "RESULT %s ms=%.4f gb_per_s=%.0f pct_of_copy=%.1f splits=%d split_tokens=%d kv_mb=%.1f (kv reads vs copy "
        "read+write)\n",
        name, ms, gbs, 100.0 * gbs / copy_gbs, decode_num_splits(ctx, used), decode_split_tokens(ctx, used),
        p.kv_bytes_read() / 1e6);
    std::fflush(stdout);
  };
  decode("attn_decode_b64_ctx4k", 64, 4096, 32, 8, 128, nullptr);
  decode("attn_decode_b1_ctx32k", 1, 32768, 32, 8, 128, nullptr);
  decode("attn_decode_b256_ctx1k", 256, 1024, 32, 8, 128, nullptr);
  decode("attn_decode_b64_ctx4k_smollm_h9_3_d64", 64, 4096, 9, 3, 64, nullptr);
  // The quantized caches (issue 12): the same batch, half the bytes (plus 4 per row for scales).
  decode("attn_decode_b64_ctx4k_fp8", 64, 4096, 32, 8, 128, nullptr, KvFormat::kFp8E4M3);
  decode("attn_decode_b64_ctx4k_int8", 64, 4096, 32, 8, 128, nullptr, KvFormat::kInt8);
  decode("attn_decode_b64_ctx4k_smollm_h9_3_d64_fp8", 64, 4096, 9, 3, 64, nullptr, KvFormat::kFp8E4M3);
  // KIVI (blocks of 128, its residual): 4 and 2 bits a value plus fp16 scale and minimum per 32.
  decode("attn_decode_b64_ctx4k_kivi4", 64, 4096, 32, 8, 128, nullptr, KvFormat::kKivi4);
  decode("attn_decode_b64_ctx4k_kivi2", 64, 4096, 32, 8, 128, nullptr, KvFormat::kKivi2);
  decode("attn_decode_b64_ctx4k_smollm_h9_3_d64_kivi2", 64, 4096, 9, 3, 64, nullptr, KvFormat::kKivi2);
  // fp16 on the CUDA-core kernel it used before the tensor-core one (attention_decode_tc_direct.cu).
  decode("attn_decode_b64_ctx4k_cuda_cores", 64, 4096, 32, 8, 128, nullptr, KvFormat::kFp16, DecodeKernel::kCudaCores);
  decode("attn_decode_b1_ctx32k_cuda_cores", 1, 32768, 32, 8, 128, nullptr, KvFormat::kFp16, DecodeKernel::kCudaCores);
  decode("attn_decode_b256_ctx1k_cuda_cores", 256, 1024, 32, 8, 128, nullptr, KvFormat::kFp16,
         DecodeKernel::kCudaCores);
  decode("attn_decode_b64_ctx4k_smollm_h9_3_d64_cuda_cores", 64, 4096, 9, 3, 64, nullptr, KvFormat::kFp16,
         DecodeKernel::kCudaCores);
  decode("attn_decode_b64_ctx4k_bf16", 64, 4096, 32, 8, 128, nullptr, KvFormat::kBf16);
  decode("attn_decode_b256_ctx1k_fp8", 256, 1024, 32, 8, 128, nullptr, KvFormat::kFp8E4M3);
  decode("attn_decode_b1_ctx32k_fp8", 1, 32768, 32, 8, 128, nullptr, KvFormat::kFp8E4M3);
  // The same on the CUDA-core kernel the quantized formats used before the tensor-core one
  // (fp8 has none since its residual).
  decode("attn_decode_b64_ctx4k_int8_cuda_cores", 64, 4096, 32, 8, 128, nullptr, KvFormat::kInt8,
         DecodeKernel::kCudaCores);
  decode("attn_decode_b64_ctx4k_kivi2_cuda_cores", 64, 4096, 32, 8, 128, nullptr, KvFormat::kKivi2,
         DecodeKernel::kCudaCores);
  decode("attn_decode_b256_ctx1k_kivi4", 256, 1024, 32, 8, 128, nullptr, KvFormat::kKivi4);
  decode("attn_decode_b256_ctx1k_kivi2", 256, 1024, 32, 8, 128, nullptr, KvFormat::kKivi2);
  decode("attn_decode_b1_ctx32k_kivi2", 1, 32768, 32, 8, 128, nullptr, KvFormat::kKivi2);
  // Split-granularity sweep for tuning kDecodeSplitTokens / kMaxDecodeSplits.
  const DecodeSplitPolicy unsplit{1 << 30, 1}, t256{256, 128}, t1024{1024, 64}, t2048{2048, 64};
  decode("sweep_decode_b64_ctx4k_unsplit", 64, 4096, 32, 8, 128, &unsplit);
  decode("sweep_decode_b64_ctx4k_split256", 64, 4096, 32, 8, 128, &t256);
  decode("sweep_decode_b64_ctx4k_split1024", 64, 4096, 32, 8, 128, &t1024);
  decode("sweep_decode_b64_ctx4k_split2048", 64, 4096, 32, 8, 128, &t2048);
  decode("sweep_decode_b1_ctx32k_split256", 1, 32768, 32, 8, 128, &t256);
  decode("sweep_decode_b1_ctx32k_split1024", 1, 32768, 32, 8, 128, &t1024);
  // At most 49 splits (47 of 704 tokens) x 8 = 376 CTAs: one wave at 3 resident CTAs per SM.
  const DecodeSplitPolicy one_wave{kDecodeTileTokens, 49};
  decode("sweep_decode_b1_ctx32k_49splits", 1, 32768, 32, 8, 128, &one_wave);
  const DecodeSplitPolicy cap64{kDecodeSplitTokens, 64};  // the default before the cap of 40
  decode("sweep_decode_b1_ctx32k_cap64", 1, 32768, 32, 8, 128, &cap64);
  // The tensor-core kernels read fewer bytes per CTA (fp8, KIVI) or faster (fp16): their best
  // split may be longer.
  const DecodeSplitPolicy t4096{4096, 64};
  for (const auto& [suffix, split] :
       {std::pair{"split1024", &t1024}, std::pair{"split2048", &t2048}, std::pair{"split4096", &t4096}}) {
    const std::string tail = std::string("_") + suffix;
    decode(("sweep_decode_b64_ctx4k_tc" + tail).c_str(), 64, 4096, 32, 8, 128, split, KvFormat::kFp16);
    decode(("sweep_decode_b64_ctx4k_fp8" + tail).c_str(), 64, 4096, 32, 8, 128, split, KvFormat::kFp8E4M3);
    decode(("sweep_decode_b64_ctx4k_kivi2" + tail).c_str(), 64, 4096, 32, 8, 128, split, KvFormat::kKivi2);
    decode(("sweep_decode_b256_ctx1k_fp8" + tail).c_str(), 256, 1024, 32, 8, 128, split, KvFormat::kFp8E4M3);
  }
  // What a longer split costs a single sequence (the plan is the same at every batch): b1 at 8k
  // and 32k, each quantized format at 1024 and 2048 tokens a split (and kivi4 at b64 x 4k).
  for (const auto& [suffix, split] : {std::pair{"split1024", &t1024}, std::pair{"split2048", &t2048}}) {
    const std::string tail = std::string("_") + suffix;
    for (const auto& [name, format] : {std::pair{"fp8", KvFormat::kFp8E4M3}, std::pair{"kivi4", KvFormat::kKivi4},
                                       std::pair{"kivi2", KvFormat::kKivi2}}) {
      decode(("sweep_decode_b1_ctx32k_" + std::string(name) + tail).c_str(), 1, 32768, 32, 8, 128, split, format);
      decode(("sweep_decode_b1_ctx8k_" + std::string(name) + tail).c_str(), 1, 8192, 32, 8, 128, split, format);
    }
    decode(("sweep_decode_b64_ctx4k_kivi4" + tail).c_str(), 64, 4096, 32, 8, 128, split, KvFormat::kKivi4);
    decode(("sweep_decode_b512_ctx1536_kivi2" + tail).c_str(), 512, 1536, 32, 8, 128, split, KvFormat::kKivi2);
    decode(("sweep_decode_b512_ctx1536_fp8" + tail).c_str(), 512, 1536, 32, 8, 128, split, KvFormat::kFp8E4M3);
    decode(("sweep_decode_b512_ctx1536_tc" + tail).c_str(), 512, 1536, 32, 8, 128, split, KvFormat::kFp16);
  }
  // The walk (DecodeWalk): the default splits spread over 1, 2 or 4 CTAs a row (walk4: one CTA
  // a split, as before the walk). The dispatcher's own choice is the attn_decode_* line.
  for (const int ctas : {1, 2, 4}) {
    DecodeSplitPolicy walk;
    walk.ctas_per_row = ctas;
    const std::string tail = "_walk" + std::to_string(ctas);
    for (const auto& [name, format] : {std::pair{"tc", KvFormat::kFp16}, std::pair{"fp8", KvFormat::kFp8E4M3},
                                       std::pair{"kivi4", KvFormat::kKivi4}, std::pair{"kivi2", KvFormat::kKivi2}}) {
      decode((std::string("sweep_decode_b64_ctx4k_") + name + tail).c_str(), 64, 4096, 32, 8, 128, &walk, format);
    }
  }
  decode("attn_decode_b16_ctx4k", 16, 4096, 32, 8, 128, nullptr);
  decode("attn_decode_b16_ctx4k_kivi2", 16, 4096, 32, 8, 128, nullptr, KvFormat::kKivi2);
  decode("attn_decode_b128_ctx2k", 128, 2048, 32, 8, 128, nullptr);
  decode("attn_decode_b128_ctx2k_kivi2", 128, 2048, 32, 8, 128, nullptr, KvFormat::kKivi2);
  if (opt.filter == "decode") return;  // the decode kernels alone

  prefill_benchmarks(rng);

  {
    const int64_t n = 4096, dim = 4096;
    DeviceBuffer<float> x(n * dim), add(n * dim), w(dim);
    DeviceBuffer<uint16_t> out(n * dim);
    FOLIO_CUDA_OK(cudaMemset(x.get(), 0, x.size() * 4));
    FOLIO_CUDA_OK(cudaMemset(add.get(), 0, add.size() * 4));
    FOLIO_CUDA_OK(cudaMemset(w.get(), 0, w.size() * 4));
    const double ms = time_ms([&] { rms_norm(x.get(), add.get(), w.get(), out.get(), n, dim, 1e-5f, nullptr); }, 3, 20);
    const double bytes = n * dim * (4.0 * 3 + 2.0);
    std::printf("RESULT rms_norm_add_4096x4096 ms=%.4f gb_per_s=%.0f pct_of_copy=%.1f\n", ms, bytes / (ms * 1e6),
                100.0 * bytes / (ms * 1e6) / copy_gbs);
  }
  {
    const int64_t n = 4096, ffn = 14336;
    DeviceBuffer<float> gu(n * 2 * ffn);
    DeviceBuffer<uint16_t> out(n * ffn);
    FOLIO_CUDA_OK(cudaMemset(gu.get(), 0, gu.size() * 4));
    const double ms = time_ms([&] { swiglu(gu.get(), n, ffn, out.get(), nullptr); }, 3, 20);
    const double bytes = n * ffn * (8.0 + 2.0);
    std::printf("RESULT swiglu_4096x14336 ms=%.4f gb_per_s=%.0f pct_of_copy=%.1f\n", ms, bytes / (ms * 1e6),
                100.0 * bytes / (ms * 1e6) / copy_gbs);
  }
  {
    const int rows = 64, vocab = 128256;
    DeviceBuffer<float> logits(static_cast<size_t>(rows) * vocab);
    std::vector<float> host(logits.size());
    std::normal_distribution<float> normal(0.0f, 3.0f);
    for (float& x : host) x = normal(rng);
    for (int mode = 0; mode < 2; ++mode) {
      std::vector<RowSampling> params(rows);
      for (RowSampling& sp : params) {
        sp.temperature = mode == 0 ? 0.0f : 0.8f;
        sp.top_k = mode == 0 ? -1 : 50;
        sp.top_p = mode == 0 ? 1.0f : 0.9f;
      }
      DeviceBuffer<RowSampling> d_params(params);
      DeviceBuffer<int32_t> tokens(rows);
      DeviceBuffer<float> logprobs(rows);
      DeviceBuffer<int32_t> dummy(1);
      DeviceBuffer<float> scratch(1);
      SampleArgs args;
      args.logits = logits.get();
      args.rows = rows;
      args.vocab = vocab;
      args.params = d_params.get();
      args.penalty_tokens = dummy.get();
      args.penalty_counts = dummy.get();
      args.penalty_scratch = scratch.get();
      args.out_tokens = tokens.get();
      args.out_logprobs = logprobs.get();
      logits.upload(host);
      const double ms = time_ms([&] { sample_tokens(args, nullptr); }, 3, 20);
      std::printf("RESULT %s ms=%.4f\n", mode == 0 ? "sample_greedy_64x128256" : "sample_t08_k50_p09_64x128256", ms);
    }
  }
  sync_or_die("benchmarks");
  std::fflush(stdout);
}

}  // namespace folio::cuda::check
