// --bench: kernel timings after warm-up with CUDA events, against the device-to-device copy
// bandwidth measured in the same run (memory-bound kernels) or counted FLOPs (prefill).
#include <cstdio>

#include "attention_fixture.h"
#include "check_util.h"

namespace folio::cuda::check {

void run_benchmarks(const Options& opt, std::mt19937_64& rng) {
  std::printf("\n== benchmarks (after 5 warm-up launches, mean of 20) ==\n");
  std::printf("%-44s %10s %12s %10s\n", "kernel", "ms", "GB/s|TFLOP/s", "% copy");
  const size_t copy_bytes = size_t{1} << 30;
  DeviceBuffer<unsigned char> a(copy_bytes), b(copy_bytes);
  FOLIO_CUDA_OK(cudaMemset(a.get(), 1, copy_bytes));
  const double copy_ms = time_ms([&] { cudaMemcpyAsync(b.get(), a.get(), copy_bytes, cudaMemcpyDeviceToDevice); }, 3, 20);
  const double copy_gbs = 2.0 * copy_bytes / (copy_ms * 1e6);  // read + write
  std::printf("%-44s %10.3f %12.1f %10s\n", "cudaMemcpy D2D 1 GiB (read+write)", copy_ms, copy_gbs, "100");

  auto decode = [&](const char* label, int batch, int ctx, int heads, int kv_heads, int dim, int forced_splits) {
    AttentionProblem p;
    p.head_dim = dim;
    p.num_heads = heads;
    p.num_kv_heads = kv_heads;
    p.block_size = 16;
    for (int s = 0; s < batch; ++s) p.seqs.push_back({1, ctx});
    p.build(rng, /*fill_values=*/false);
    const PagedAttentionArgs args = p.args();
    const int splits = forced_splits > 0 ? forced_splits : plan_decode_splits(batch, kv_heads, ctx, opt.sm_count);
    DeviceBuffer<unsigned char> ws(std::max<size_t>(1, decode_workspace_layout(batch, heads, dim, splits).total_bytes));
    const double ms = time_ms([&] { paged_attention_decode_splits(args, {ws.get(), ws.size()}, splits, nullptr); }, 5, 20);
    const double gbs = p.kv_bytes_read() / (ms * 1e6);
    char name[128];
    std::snprintf(name, sizeof name, "%s splits=%d", label, splits);
    std::printf("%-44s %10.3f %12.1f %10.1f\n", name, ms, gbs, 100.0 * gbs / copy_gbs);
  };
  decode("decode B=64 ctx=4k h32/8 d128", 64, 4096, 32, 8, 128, 0);
  decode("decode B=64 ctx=4k h32/8 d128", 64, 4096, 32, 8, 128, 1);
  decode("decode B=1 ctx=32k h32/8 d128", 1, 32768, 32, 8, 128, 0);
  decode("decode B=1 ctx=32k h32/8 d128", 1, 32768, 32, 8, 128, 1);
  decode("decode B=256 ctx=1k h32/8 d128", 256, 1024, 32, 8, 128, 0);
  decode("decode B=64 ctx=4k h9/3 d64 (SmolLM2)", 64, 4096, 9, 3, 64, 0);

  auto prefill = [&](const char* label, int batch, int seq_len, int heads, int kv_heads, int dim) {
    AttentionProblem p;
    p.head_dim = dim;
    p.num_heads = heads;
    p.num_kv_heads = kv_heads;
    p.block_size = 16;
    for (int s = 0; s < batch; ++s) p.seqs.push_back({seq_len, seq_len});
    p.build(rng, false);
    const PagedAttentionArgs args = p.args();
    const double ms = time_ms([&] { paged_attention_prefill(args, nullptr); }, 2, 10);
    const double flops = 4.0 * batch * heads * static_cast<double>(seq_len) * seq_len * dim / 2;
    std::printf("%-44s %10.3f %12.1f %10s\n", label, ms, flops / (ms * 1e9), "-");
  };
  prefill("prefill causal B=4 S=8k h32/8 d128 (TFLOP/s)", 4, 8192, 32, 8, 128);
  prefill("prefill causal B=16 S=1k h9/3 d64 (TFLOP/s)", 16, 1024, 9, 3, 64);

  {
    const int64_t n = 4096, dim = 4096;
    DeviceBuffer<float> x(n * dim), add(n * dim), w(dim);
    DeviceBuffer<uint16_t> out(n * dim);
    FOLIO_CUDA_OK(cudaMemset(x.get(), 0, x.size() * 4));
    FOLIO_CUDA_OK(cudaMemset(add.get(), 0, add.size() * 4));
    FOLIO_CUDA_OK(cudaMemset(w.get(), 0, w.size() * 4));
    const double ms = time_ms([&] { rms_norm(x.get(), add.get(), w.get(), out.get(), n, dim, 1e-5f, nullptr); }, 3, 20);
    const double bytes = n * dim * (4.0 * 3 + 2.0);
    std::printf("%-44s %10.3f %12.1f %10.1f\n", "rms_norm+add 4096x4096 -> bf16", ms, bytes / (ms * 1e6), 100.0 * bytes / (ms * 1e6) / copy_gbs);
  }
  {
    const int64_t n = 4096, ffn = 14336;
    DeviceBuffer<float> gu(n * 2 * ffn);
    DeviceBuffer<uint16_t> out(n * ffn);
    FOLIO_CUDA_OK(cudaMemset(gu.get(), 0, gu.size() * 4));
    const double ms = time_ms([&] { swiglu(gu.get(), n, ffn, out.get(), nullptr); }, 3, 20);
    const double bytes = n * ffn * (8.0 + 2.0);
    std::printf("%-44s %10.3f %12.1f %10.1f\n", "swiglu 4096x14336 -> bf16", ms, bytes / (ms * 1e6), 100.0 * bytes / (ms * 1e6) / copy_gbs);
  }
  {
    const int rows = 64, vocab = 128256;
    DeviceBuffer<float> logits(static_cast<size_t>(rows) * vocab);
    std::vector<float> host(logits.size());
    std::normal_distribution<float> normal(0.0f, 3.0f);
    for (float& x : host) x = normal(rng);
    for (int mode = 0; mode < 2; ++mode) {
      std::vector<SampleRowParams> params(rows);
      for (SampleRowParams& sp : params) {
        sp.temperature = mode == 0 ? 0.0f : 0.8f;
        sp.top_k = mode == 0 ? -1 : 50;
        sp.top_p = mode == 0 ? 1.0f : 0.9f;
      }
      DeviceBuffer<SampleRowParams> d_params(params);
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
      std::printf("%-44s %10.3f %12s %10s\n", mode == 0 ? "sample greedy 64x128256" : "sample T=.8 k=50 p=.9 64x128256", ms, "-", "-");
    }
  }
  sync_or_die("benchmarks");
}

}  // namespace folio::cuda::check
