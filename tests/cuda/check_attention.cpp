// Attention checks: every kernel (decode with planned and forced split counts, prefill, the
// reference kernel) on random paged problems, against the CPU's float64 reference on sampled
// query rows and against the CUDA reference kernel on all rows (outputs are NaN-poisoned
// first, so an unwritten row fails).
//
// Tolerances: outputs are bf16 (2^-9 relative rounding) of a convex combination of V values
// in [-1, 1]; the fast kernels also round P to fp16 (2^-11 relative per weight) and accumulate
// in fp32 in a different order. vs float64: atol 2e-3, rtol 2^-7 (two bf16 ulps). Fast vs
// CUDA reference (both rounded to bf16): atol 4e-3, rtol 2^-6.
#include <algorithm>
#include <set>

#include "attention_fixture.h"
#include "check_util.h"

namespace folio::cuda::check {
namespace {

constexpr double kAtolRef = 2e-3, kRtolRef = 1.0 / 128;
constexpr double kAtolPair = 4e-3, kRtolPair = 1.0 / 64;

std::vector<double> rows_of(const std::vector<uint16_t>& out_bf16, const AttentionProblem& p,
                            const std::vector<int32_t>& tokens) {
  const size_t row_elems = static_cast<size_t>(p.num_heads) * p.head_dim;
  std::vector<double> rows;
  rows.reserve(tokens.size() * row_elems);
  for (int32_t t : tokens) {
    for (size_t e = 0; e < row_elems; ++e) rows.push_back(from_bf16(out_bf16[t * row_elems + e]));
  }
  return rows;
}

std::vector<double> all_rows(const std::vector<uint16_t>& out_bf16) {
  std::vector<double> rows(out_bf16.size());
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = from_bf16(out_bf16[i]);
  return rows;
}

// Query rows compared with float64: all when few, else the first and last of every sequence
// plus random ones, capped so the host reference stays cheap.
std::vector<int32_t> sample_tokens_for_reference(const AttentionProblem& p, std::mt19937_64& rng) {
  size_t work = 0;
  for (const SeqSpec& s : p.seqs) work += static_cast<size_t>(s.query_len) * s.context_len;
  std::set<int32_t> picked;
  if (work * p.num_heads * p.head_dim <= 200'000'000ull) {
    for (int32_t t = 0; t < p.num_tokens; ++t) picked.insert(t);
  } else {
    for (size_t s = 0; s < p.seqs.size() && picked.size() < 32; ++s) {
      picked.insert(p.cu_query_starts[s]);
      picked.insert(p.cu_query_starts[s + 1] - 1);
    }
    std::uniform_int_distribution<int32_t> any(0, p.num_tokens - 1);
    for (int i = 0; i < 16; ++i) picked.insert(any(rng));
  }
  return std::vector<int32_t>(picked.begin(), picked.end());
}

enum class Kernel { kDispatch, kDecodeSplits, kPrefill, kReference };

void run_case(const std::string& label, AttentionProblem& p, std::mt19937_64& rng,
              const Options& opt, const std::vector<int>& forced_splits) {
  p.build(rng);
  const PagedAttentionArgs args = p.args();
  const std::string shape = p.describe();
  const std::vector<int32_t> sampled = sample_tokens_for_reference(p, rng);
  const std::vector<double> ref = reference_rows(p, sampled);

  // The CUDA reference kernel first: it is the second opinion for every fast kernel.
  p.d_out.poison();
  const double ref_ms = time_ms([&] { paged_attention_reference(args, nullptr); }, 0, 1);
  sync_or_die("paged_attention_reference");
  const std::vector<uint16_t> gpu_ref = p.d_out.download();
  report(outcome_of(label + ".reference", shape, rows_of(gpu_ref, p, sampled), ref, kAtolRef, kRtolRef, ref_ms));
  const std::vector<double> gpu_ref_rows = all_rows(gpu_ref);

  size_t workspace_bytes = attention_workspace_bytes(static_cast<int32_t>(p.seqs.size()), p.num_heads,
                                                     p.num_kv_heads, p.head_dim, p.max_context_len, opt.sm_count);
  for (int s : forced_splits) {
    workspace_bytes = std::max(workspace_bytes,
        decode_workspace_layout(static_cast<int32_t>(p.seqs.size()), p.num_heads, p.head_dim, s).total_bytes);
  }
  DeviceBuffer<unsigned char> workspace(workspace_bytes);
  const Workspace ws{workspace.get(), workspace.size()};

  auto run_kernel = [&](const std::string& name, const std::function<void()>& launch, const std::string& note) {
    p.d_out.poison();
    const double ms = time_ms(launch, 0, 1);
    sync_or_die(name.c_str());
    const std::vector<uint16_t> out = p.d_out.download();
    Outcome vs_ref = outcome_of(label + "." + name, shape, rows_of(out, p, sampled), ref, kAtolRef, kRtolRef, ms);
    vs_ref.note = note + " vs float64 (" + std::to_string(sampled.size()) + " rows)";
    report(vs_ref);
    Outcome vs_gpu = outcome_of(label + "." + name, shape, all_rows(out), gpu_ref_rows, kAtolPair, kRtolPair);
    vs_gpu.note = note + " vs cuda reference (all rows)";
    report(vs_gpu);
  };

  const int planned = plan_decode_splits(static_cast<int32_t>(p.seqs.size()), p.num_kv_heads, p.max_context_len, opt.sm_count);
  run_kernel("dispatch", [&] { paged_attention(args, ws, opt.sm_count, nullptr); },
             p.max_query_len <= 1 ? "decode splits=" + std::to_string(planned) : "prefill");
  if (p.max_query_len <= 1) {
    for (int s : forced_splits) {
      run_kernel("decode", [&] { paged_attention_decode_splits(args, ws, s, nullptr); }, "splits=" + std::to_string(s));
    }
    run_kernel("prefill_on_decode", [&] { paged_attention_prefill(args, nullptr); }, "prefill kernel");
  }
}

struct HeadConfig {
  int32_t head_dim, num_heads, num_kv_heads;
};
constexpr HeadConfig kHeads[] = {{64, 9, 3}, {128, 32, 8}, {128, 16, 16}, {64, 8, 4}, {128, 16, 2}, {128, 12, 1}};

void check_decode(const Options& opt, std::mt19937_64& rng) {
  struct Case { int32_t batch, max_ctx; };
  std::vector<Case> cases = {{1, 1}, {3, 17}, {7, 300}, {64, 2000}, {256, 300}, {1, 32768}, {4, 9000}};
  if (opt.quick) cases = {{1, 1}, {7, 300}, {2, 5000}};
  int i = 0;
  for (const HeadConfig& h : kHeads) {
    for (int32_t block_size : {16, 32, 8}) {
      if (opt.quick && block_size == 8) continue;
      for (const Case& c : cases) {
        // The large cases only for the two model shapes, to keep the run short.
        if ((c.max_ctx > 2000 || c.batch > 64) && !(i++ % 3 == 0 || h.head_dim == 128)) continue;
        AttentionProblem p;
        p.head_dim = h.head_dim;
        p.num_heads = h.num_heads;
        p.num_kv_heads = h.num_kv_heads;
        p.block_size = block_size;
        p.q_scale = (c.batch % 2) ? 4.0f : 1.0f;
        std::uniform_int_distribution<int32_t> ctx(1, c.max_ctx);
        for (int32_t s = 0; s < c.batch; ++s) p.seqs.push_back({1, s == 0 ? c.max_ctx : ctx(rng)});
        run_case("decode", p, rng, opt, {1, 3, 17});
      }
    }
  }
}

void check_prefill(const Options& opt, std::mt19937_64& rng) {
  std::vector<std::vector<SeqSpec>> batches = {
      {{1, 1}}, {{2, 2}}, {{63, 63}}, {{64, 64}}, {{65, 65}}, {{130, 130}}, {{1000, 1000}},
      {{17, 22}}, {{64, 164}}, {{200, 1200}}, {{1, 1000}},                 // chunked prefill
      {{5, 5}, {1, 40}, {77, 300}, {1, 1}, {128, 128}, {3, 700}, {1, 64}},  // mixed varlen
      {{3000, 3000}}, {{512, 8192}}};
  if (opt.quick) batches = {{{65, 65}}, {{17, 22}}, {{5, 5}, {1, 40}, {77, 300}, {1, 1}}};
  for (const HeadConfig& h : kHeads) {
    for (int32_t block_size : {16, 32, 8, 64}) {
      if (opt.quick && block_size > 16) continue;
      for (const auto& seqs : batches) {
        if (seqs[0].context_len >= 3000 && h.head_dim == 64 && h.num_heads != 9) continue;
        AttentionProblem p;
        p.head_dim = h.head_dim;
        p.num_heads = h.num_heads;
        p.num_kv_heads = h.num_kv_heads;
        p.block_size = block_size;
        p.seqs = seqs;
        p.q_scale = block_size == 32 ? 4.0f : 1.0f;
        run_case("prefill", p, rng, opt, {});
      }
    }
  }
  // A random mixed batch of many sequences.
  for (int rep = 0; rep < (opt.quick ? 1 : 4); ++rep) {
    AttentionProblem p;
    p.head_dim = rep % 2 ? 64 : 128;
    p.num_heads = rep % 2 ? 9 : 32;
    p.num_kv_heads = rep % 2 ? 3 : 8;
    p.block_size = rep < 2 ? 16 : 32;
    std::uniform_int_distribution<int32_t> qlen(1, 150), prior(0, 600), kind(0, 2);
    for (int s = 0; s < 40; ++s) {
      const int32_t q = kind(rng) == 0 ? 1 : qlen(rng);
      p.seqs.push_back({q, q + prior(rng)});
    }
    run_case("prefill.mixed", p, rng, opt, {});
  }
}

Register r1("attention.decode", check_decode);
Register r2("attention.prefill", check_prefill);

}  // namespace
}  // namespace folio::cuda::check
