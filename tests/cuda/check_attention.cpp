// Attention checks: every kernel (the dispatcher, decode under several split policies,
// prefill, the reference kernel) on random paged problems, against the CUDA reference kernel
// on ALL rows and against the CPU's float64 reference on sampled rows (outputs are
// NaN-poisoned first, so an unwritten row fails); then batch invariance: the same sequences'
// outputs bit-identical alone, in a batch of 64 decodes, under a graph-sized launch, and in a
// mixed prefill+decode batch.
//
// Shape classes of the default run (--full adds block sizes 8 and 64 everywhere and the large
// cases on every head shape): batch 1..256, contexts 1..32k, GQA ratios 1/2/3/4/8/12, head_dim
// 64/128, block sizes 16/32, partial blocks, chunked prefill over existing context, mixed
// prefill+decode batches (with split decode rows).
//
// Tolerances: outputs are bf16 (2^-9 relative rounding) of a convex combination of V values
// in [-1, 1]; the fast kernels also round P to fp16 (2^-11 relative per weight) and accumulate
// in fp32 in a different order. vs float64: atol 2e-3, rtol 2^-7 (two bf16 ulps). Fast vs
// CUDA reference (both rounded to bf16): atol 4e-3, rtol 2^-6.
#include <algorithm>
#include <future>
#include <optional>
#include <set>

#include "attention_fixture.h"
#include "check_util.h"

namespace folio::cuda::check {
namespace {

constexpr double kAtolRef = 2e-3, kRtolRef = 1.0 / 128;
constexpr double kAtolPair = 4e-3, kRtolPair = 1.0 / 64;
// float64 work (multiply-adds) per case beyond which rows are sampled: ~10 ms on 16 threads.
constexpr double kFloat64BudgetMacs = 64e6;

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

// Query rows compared with float64: all when the work is small, else the first and last row
// of every sequence (the longest contexts, the sequence edges) and random rows, until the
// budget is spent; at least the first sequence's last row.
std::vector<int32_t> sample_tokens_for_reference(const AttentionProblem& p, std::mt19937_64& rng) {
  const double per_position = static_cast<double>(p.num_heads) * p.head_dim;
  std::vector<double> cost(p.num_tokens);
  double total = 0.0;
  for (size_t s = 0; s < p.seqs.size(); ++s) {
    for (int32_t t = p.cu_query_starts[s]; t < p.cu_query_starts[s + 1]; ++t) {
      const int32_t position = p.context_lens[s] - p.seqs[s].query_len + (t - p.cu_query_starts[s]);
      cost[t] = (position + 1) * per_position;
      total += cost[t];
    }
  }
  std::set<int32_t> picked;
  if (total <= kFloat64BudgetMacs) {
    for (int32_t t = 0; t < p.num_tokens; ++t) picked.insert(t);
    return std::vector<int32_t>(picked.begin(), picked.end());
  }
  double spent = 0.0;
  auto take = [&](int32_t t) {
    if (picked.count(t) != 0 || (spent + cost[t] > kFloat64BudgetMacs && !picked.empty())) return;
    picked.insert(t);
    spent += cost[t];
  };
  take(p.cu_query_starts[1] - 1);
  for (size_t s = 0; s < p.seqs.size() && picked.size() < 24; ++s) {
    take(p.cu_query_starts[s]);
    take(p.cu_query_starts[s + 1] - 1);
  }
  std::uniform_int_distribution<int32_t> any(0, p.num_tokens - 1);
  for (int i = 0; i < 16; ++i) take(any(rng));
  return std::vector<int32_t>(picked.begin(), picked.end());
}

// A decode split policy the check forces besides the dispatcher's.
struct ForcedPolicy {
  const char* name;
  DecodeSplitPolicy policy;
};
const ForcedPolicy kForcedPolicies[] = {
    {"split64", {kDecodeTileTokens, 1 << 20}},  // a split per tile: most partials, partial tiles
    {"cap3", {3 * kDecodeTileTokens, 3}},       // the cap: splits grow past 3 x 192 tokens
    {"unsplit", {1 << 30, 1}},                  // one CTA streams the whole context
};

void run_case(const std::string& label, AttentionProblem& p, std::mt19937_64& rng, const Options& opt) {
  p.build(rng);
  const PagedAttentionArgs args = p.args();
  const std::string shape = p.describe();
  const std::vector<int32_t> sampled = sample_tokens_for_reference(p, rng);
  // The float64 rows are computed on host threads while the GPU runs.
  std::future<std::vector<double>> ref_future =
      std::async(std::launch::async, [&p, &sampled] { return reference_rows(p, sampled); });

  // The CUDA reference kernel first: it is the second opinion for every fast kernel.
  p.d_out.poison();
  const double ref_ms = time_ms([&] { paged_attention_reference(args, nullptr); }, 0, 1);
  sync_or_die("paged_attention_reference");
  const std::vector<uint16_t> gpu_ref = p.d_out.download();
  const std::vector<double> gpu_ref_rows = all_rows(gpu_ref);

  const bool decode_only = p.max_query_len <= 1;
  const int32_t num_seqs = static_cast<int32_t>(p.seqs.size());
  size_t workspace_bytes =
      attention_workspace_bytes(num_seqs, p.num_heads, p.num_kv_heads, p.head_dim, p.max_context_len, opt.sm_count);
  if (decode_only) {
    for (const ForcedPolicy& f : kForcedPolicies) {
      workspace_bytes = std::max(
          workspace_bytes,
          decode_workspace_layout(num_seqs, p.num_heads, p.head_dim, decode_grid_splits(p.max_context_len, f.policy))
              .total_bytes);
    }
  }
  DeviceBuffer<unsigned char> workspace(workspace_bytes);
  const Workspace ws{workspace.get(), workspace.size()};

  struct Run {
    std::string name, note;
    std::vector<uint16_t> out;
    double ms;
  };
  std::vector<Run> runs;
  auto run_kernel = [&](const std::string& name, const std::function<void()>& launch, const std::string& note) {
    p.d_out.poison();
    const double ms = time_ms(launch, 0, 1);
    sync_or_die(name.c_str());
    runs.push_back({name, note, p.d_out.download(), ms});
    Outcome vs_gpu =
        outcome_of(label + "." + name, shape, all_rows(runs.back().out), gpu_ref_rows, kAtolPair, kRtolPair, ms);
    vs_gpu.note = note + " vs cuda reference (all rows)";
    report(vs_gpu);
  };

  {
    const int32_t most_splits = decode_num_splits(p.max_context_len);
    run_kernel(
        "dispatch", [&] { paged_attention(args, ws, opt.sm_count, nullptr); },
        decode_only ? "decode splits<=" + std::to_string(most_splits) : "prefill+decode");
    if (decode_only) {
      for (const ForcedPolicy& f : kForcedPolicies) {
        run_kernel(
            std::string("decode.") + f.name, [&] { paged_attention_decode_policy(args, ws, f.policy, nullptr); },
            "splits<=" + std::to_string(decode_grid_splits(p.max_context_len, f.policy)));
      }
      run_kernel(
          "prefill_on_decode", [&] { paged_attention_prefill(args, nullptr); }, "prefill kernel");
      // The other fp16 prefill kernels on decode rows too (the default ran just above).
      for (const PrefillKernel kernel : {PrefillKernel::kRows128, PrefillKernel::kWgmma}) {
        if (kernel == kDefaultPrefillKernel) continue;
        run_kernel(
            std::string("prefill_") + prefill_kernel_name(kernel) + "_on_decode",
            [&] { paged_attention_prefill(args, nullptr, PrefillRows::kAll, kernel); },
            std::string(prefill_kernel_name(kernel)) + " prefill kernel");
      }
    } else {
      if (opt.full) {
        run_kernel(
            "prefill_all_rows", [&] { paged_attention_prefill(args, nullptr); }, "prefill kernel, decode rows too");
      }
      // Both prefill shapes on every prefill case, whichever one the dispatcher uses.
      for (const PrefillKernel kernel : kPrefillKernels) {
        run_kernel(
            std::string("prefill_") + prefill_kernel_name(kernel) + "_all_rows",
            [&] { paged_attention_prefill(args, nullptr, PrefillRows::kAll, kernel); },
            std::string(prefill_kernel_name(kernel)) + " prefill kernel, decode rows too");
      }
    }
  }

  const std::vector<double> ref = ref_future.get();
  const std::string rows_note = " vs float64 (" + std::to_string(sampled.size()) + " rows)";
  report(outcome_of(label + ".reference", shape, rows_of(gpu_ref, p, sampled), ref, kAtolRef, kRtolRef, ref_ms));
  for (const Run& r : runs) {
    Outcome vs_ref = outcome_of(label + "." + r.name, shape, rows_of(r.out, p, sampled), ref, kAtolRef, kRtolRef, r.ms);
    vs_ref.note = r.note + rows_note;
    report(vs_ref);
  }
}

struct HeadConfig {
  int32_t head_dim, num_heads, num_kv_heads;
};
// GQA ratios 3, 4, 1, 2, 8, 12; index 1 is Llama-3-8B's shape, index 0 SmolLM2's.
constexpr HeadConfig kHeads[] = {{64, 9, 3}, {128, 32, 8}, {128, 16, 16}, {64, 8, 4}, {128, 16, 2}, {128, 12, 1}};
constexpr int kNumHeads = static_cast<int>(sizeof(kHeads) / sizeof(kHeads[0]));

AttentionProblem problem_for(const HeadConfig& h, int32_t block_size) {
  AttentionProblem p;
  p.head_dim = h.head_dim;
  p.num_heads = h.num_heads;
  p.num_kv_heads = h.num_kv_heads;
  p.block_size = block_size;
  return p;
}

struct DecodeCase {
  int32_t batch, max_ctx;
};
// Runs a random decode batch: sequence 0 at max_ctx, the others uniform in [1, max_ctx].
void decode_case(const HeadConfig& h, int32_t block_size, DecodeCase c, std::mt19937_64& rng, const Options& opt) {
  AttentionProblem p = problem_for(h, block_size);
  p.q_scale = (c.batch % 2) ? 4.0f : 1.0f;
  std::uniform_int_distribution<int32_t> ctx(1, c.max_ctx);
  for (int32_t s = 0; s < c.batch; ++s) p.seqs.push_back({1, s == 0 ? c.max_ctx : ctx(rng)});
  run_case("decode", p, rng, opt);
}

void check_decode(const Options& opt, std::mt19937_64& rng) {
  // Small cases: every head shape and block size. 1100 and 1500 split (512-token splits) with
  // partial last splits and partial blocks.
  std::vector<DecodeCase> small = {{1, 1}, {3, 17}, {7, 300}, {5, 1500}};
  if (opt.quick) small = {{1, 1}, {7, 300}, {2, 1100}};
  std::vector<int32_t> block_sizes = {16, 32};
  if (opt.full) block_sizes.push_back(8);
  for (const HeadConfig& h : kHeads) {
    for (int32_t bs : block_sizes) {
      for (const DecodeCase& c : small) decode_case(h, bs, c, rng, opt);
    }
  }
  if (opt.quick) return;
  // Large cases: batch 64 / 256, contexts 4k-32k. By default each on a few head shapes and
  // block sizes (the model shape always); --full: everywhere.
  struct Large {
    DecodeCase c;
    std::vector<std::pair<int, int32_t>> where;  // (head config index, block size)
  };
  const std::vector<Large> large = {
      {{64, 2000}, {{1, 16}, {4, 32}}}, {{256, 300}, {{1, 32}, {0, 16}, {3, 16}}},
      {{1, 32768}, {{1, 16}, {4, 32}}}, {{4, 9000}, {{1, 32}, {0, 16}, {5, 16}}},
      {{16, 4096}, {{2, 32}, {1, 16}}},
  };
  for (const Large& l : large) {
    if (opt.full) {
      for (int hi = 0; hi < kNumHeads; ++hi) {
        for (int32_t bs : block_sizes) decode_case(kHeads[hi], bs, l.c, rng, opt);
      }
    } else {
      for (const auto& [hi, bs] : l.where) decode_case(kHeads[hi], bs, l.c, rng, opt);
    }
  }
}

void check_prefill(const Options& opt, std::mt19937_64& rng) {
  std::vector<std::vector<SeqSpec>> batches = {
      {{1, 1}},
      {{2, 2}},
      {{63, 63}},
      {{64, 64}},
      {{65, 65}},
      {{130, 130}},
      {{1000, 1000}},
      {{17, 22}},
      {{64, 164}},
      {{200, 1200}},
      {{1, 1000}},                                                          // chunked prefill
      {{5, 5}, {1, 40}, {77, 300}, {1, 1}, {128, 128}, {3, 700}, {1, 64}},  // mixed varlen
      {{1, 5000}, {300, 300}, {1, 700}, {64, 2000}, {2, 2}, {1, 1}},        // mixed, split decode rows
  };
  if (opt.quick) batches = {{{65, 65}}, {{17, 22}}, {{5, 5}, {1, 40}, {77, 300}, {1, 1}}};
  std::vector<int32_t> block_sizes = {16, 32};
  if (opt.full) block_sizes = {16, 32, 8, 64};
  for (int hi = 0; hi < kNumHeads; ++hi) {
    for (int32_t bs : block_sizes) {
      for (size_t bi = 0; bi < batches.size(); ++bi) {
        // Default: the model shape on every block size; the other shapes take each batch on
        // one block size, 16 and 32 alternating (and swapping between shapes).
        const bool take = opt.full || opt.quick || hi == 1 || static_cast<int>((bi + hi) % 2) == (bs == 16 ? 0 : 1);
        if (!take) continue;
        AttentionProblem p = problem_for(kHeads[hi], bs);
        p.seqs = batches[bi];
        p.q_scale = bs == 32 ? 4.0f : 1.0f;
        run_case("prefill", p, rng, opt);
      }
    }
  }
  if (!opt.quick) {
    // Long prompts, and a chunk of 512 over 7.7k of existing context.
    const std::vector<std::vector<SeqSpec>> long_batches = {{{3000, 3000}}, {{512, 8192}}};
    const std::vector<std::pair<int, int32_t>> where =
        opt.full ? std::vector<std::pair<int, int32_t>>{{0, 16}, {1, 16}, {1, 32}, {4, 16}, {5, 32}}
                 : std::vector<std::pair<int, int32_t>>{{1, 16}, {0, 32}};
    for (const auto& seqs : long_batches) {
      for (const auto& [hi, bs] : where) {
        AttentionProblem p = problem_for(kHeads[hi], bs);
        p.seqs = seqs;
        run_case("prefill", p, rng, opt);
      }
    }
  }
  // Random mixed batches of many sequences: decode rows, fresh prompts, chunks over context.
  for (int rep = 0; rep < (opt.quick ? 1 : 4); ++rep) {
    AttentionProblem p = problem_for(rep % 2 ? kHeads[0] : kHeads[1], rep < 2 ? 16 : 32);
    std::uniform_int_distribution<int32_t> qlen(1, 150), prior(0, 600), kind(0, 2);
    for (int s = 0; s < 40; ++s) {
      const int32_t q = kind(rng) == 0 ? 1 : qlen(rng);
      p.seqs.push_back({q, q + prior(rng) + (s == 7 ? 2000 : 0)});
    }
    run_case("prefill.mixed", p, rng, opt);
  }
}

// --- batch invariance ------------------------------------------------------------------

// Runs the dispatcher over a sub-batch of p's sequences (in the given order, K/V shared with
// p), plus `padding` executor-style padding sequences (query 1, context 1), with
// max_context_len raised to at least `graph_max_context` as a captured graph would pass.
// With `prefill_only`, only that prefill kernel's half of the dispatcher runs (the rows of
// query_len == 1 sequences stay poisoned). Returns each listed sequence's output rows (bf16
// bits), indexed like `order`.
std::vector<std::vector<uint16_t>> run_sub_batch(const AttentionProblem& p, const std::vector<int32_t>& order,
                                                 int32_t padding, int32_t graph_max_context, const Options& opt,
                                                 std::optional<PrefillKernel> prefill_only = std::nullopt) {
  const size_t row_elems = static_cast<size_t>(p.num_heads) * p.head_dim;
  std::vector<int32_t> cu = {0}, ctx, tables;
  std::vector<uint16_t> q;
  int32_t max_q = 0, max_ctx = 0;
  auto add = [&](int32_t query_len, int32_t context_len, const int32_t* table_row, const uint16_t* q_rows) {
    cu.push_back(cu.back() + query_len);
    ctx.push_back(context_len);
    tables.insert(tables.end(), table_row, table_row + p.max_blocks_per_seq);
    q.insert(q.end(), q_rows, q_rows + query_len * row_elems);
    max_q = std::max(max_q, query_len);
    max_ctx = std::max(max_ctx, context_len);
  };
  for (int32_t s : order) {
    add(p.seqs[s].query_len, p.seqs[s].context_len, &p.block_tables[static_cast<size_t>(s) * p.max_blocks_per_seq],
        &p.q[static_cast<size_t>(p.cu_query_starts[s]) * row_elems]);
  }
  for (int32_t i = 0; i < padding; ++i) add(1, 1, &p.block_tables[0], &p.q[0]);
  DeviceBuffer<uint16_t> d_q(q), d_out(q.size());
  DeviceBuffer<int32_t> d_cu(cu), d_ctx(ctx), d_tables(tables);
  PagedAttentionArgs a = p.args();
  a.q = d_q.get();
  a.out = d_out.get();
  a.cu_query_starts = d_cu.get();
  a.context_lens = d_ctx.get();
  a.block_tables = d_tables.get();
  a.num_seqs = static_cast<int32_t>(ctx.size());
  a.num_tokens = cu.back();
  a.max_query_len = max_q;
  a.max_context_len = std::max(max_ctx, graph_max_context);
  DeviceBuffer<unsigned char> workspace(
      attention_workspace_bytes(a.num_seqs, p.num_heads, p.num_kv_heads, p.head_dim, a.max_context_len, opt.sm_count));
  d_out.poison();
  if (prefill_only) {
    paged_attention_prefill(a, nullptr, PrefillRows::kMultiTokenOnly, *prefill_only);
  } else {
    paged_attention(a, Workspace{workspace.get(), workspace.size()}, opt.sm_count, nullptr);
  }
  sync_or_die("paged_attention (invariance)");
  const std::vector<uint16_t> out = d_out.download();
  std::vector<std::vector<uint16_t>> per_seq;
  for (size_t i = 0; i < order.size(); ++i) {
    per_seq.emplace_back(out.begin() + static_cast<size_t>(cu[i]) * row_elems,
                         out.begin() + static_cast<size_t>(cu[i + 1]) * row_elems);
  }
  return per_seq;
}

void check_invariance(const Options& opt, std::mt19937_64& rng) {
  const std::pair<int, int32_t> shapes[] = {{1, 16}, {0, 32}};  // (head config, block size)
  for (const auto& [hi, bs] : shapes) {
    AttentionProblem p = problem_for(kHeads[hi], bs);
    // Targets: decode rows unsplit (37), just split (513), split (3000), capped (40000); and
    // prefill rows (a fresh prompt, a chunk over existing context).
    const std::vector<int32_t> decode_targets = {0, 1, 2, 3};
    p.seqs = {{1, 37}, {1, 513}, {1, 3000}, {1, opt.quick ? 5000 : 40000}};
    const std::vector<int32_t> prefill_targets = {4, 5};
    p.seqs.push_back({100, 100});
    p.seqs.push_back({70, 2300});
    std::uniform_int_distribution<int32_t> ctx(1, 2048);
    for (int i = 0; i < 60; ++i) p.seqs.push_back({1, ctx(rng)});
    p.build(rng);
    const std::string shape = p.describe();

    std::vector<int32_t> decodes = decode_targets;  // the 64 decode sequences, shuffled
    for (int i = 0; i < 60; ++i) decodes.push_back(6 + i);
    std::shuffle(decodes.begin(), decodes.end(), rng);
    std::vector<int32_t> mixed = {4, 0, 5, 1, 2, 3};
    for (int i = 0; i < 10; ++i) mixed.push_back(6 + i);
    std::shuffle(mixed.begin(), mixed.end(), rng);

    // outputs[run][target] for the runs that contain the target.
    auto find_in = [](const std::vector<int32_t>& order, int32_t s) {
      return static_cast<size_t>(std::find(order.begin(), order.end(), s) - order.begin());
    };
    {
      const auto batch64 = run_sub_batch(p, decodes, 0, 0, opt);
      const auto graph128 = run_sub_batch(p, decodes, 64, 65536, opt);  // a 128-sequence graph bucket
      const auto mixed_out = run_sub_batch(p, mixed, 0, 0, opt);
      const auto mixed_graph = run_sub_batch(p, mixed, 3, 65536, opt);
      for (int32_t t : decode_targets) {
        const auto alone = run_sub_batch(p, {t}, 0, 0, opt);
        const auto alone_graph = run_sub_batch(p, {t}, 0, 65536, opt);  // a 1-sequence graph bucket
        const std::vector<uint16_t>& ref = alone[0];
        const bool finite = std::none_of(ref.begin(), ref.end(), [](uint16_t b) { return std::isnan(from_bf16(b)); });
        const bool same = alone_graph[0] == ref && batch64[find_in(decodes, t)] == ref &&
                          graph128[find_in(decodes, t)] == ref && mixed_out[find_in(mixed, t)] == ref &&
                          mixed_graph[find_in(mixed, t)] == ref;
        report_flag("invariance.decode", shape + " ctx=" + std::to_string(p.seqs[t].context_len), finite && same,
                    std::string("alone == alone(graph max ctx) == batch of 64 == padded 128 == mixed: ") +
                        (same ? "bit-identical" : "DIFFER") + (finite ? "" : " (NaN output)"));
      }
      for (int32_t t : prefill_targets) {
        const auto alone = run_sub_batch(p, {t}, 0, 0, opt);
        const bool finite =
            std::none_of(alone[0].begin(), alone[0].end(), [](uint16_t b) { return std::isnan(from_bf16(b)); });
        const bool same = mixed_out[find_in(mixed, t)] == alone[0] && mixed_graph[find_in(mixed, t)] == alone[0];
        report_flag(
            "invariance.prefill",
            shape + " q=" + std::to_string(p.seqs[t].query_len) + " ctx=" + std::to_string(p.seqs[t].context_len),
            finite && same,
            std::string("alone == mixed batch: ") + (same ? "bit-identical" : "DIFFER") +
                (finite ? "" : " (NaN output)"));
      }
    }
    // Each prefill kernel shape on its own (the dispatcher above uses the default one).
    for (const PrefillKernel kernel : kPrefillKernels) {
      const char* kernel_name = prefill_kernel_name(kernel);
      const auto mixed_k = run_sub_batch(p, mixed, 0, 0, opt, kernel);
      const auto mixed_graph_k = run_sub_batch(p, mixed, 3, 65536, opt, kernel);
      for (int32_t t : prefill_targets) {
        const auto alone = run_sub_batch(p, {t}, 0, 0, opt, kernel);
        const bool finite =
            std::none_of(alone[0].begin(), alone[0].end(), [](uint16_t b) { return std::isnan(from_bf16(b)); });
        const bool same = mixed_k[find_in(mixed, t)] == alone[0] && mixed_graph_k[find_in(mixed, t)] == alone[0];
        report_flag(
            std::string("invariance.prefill") + kernel_name,
            shape + " q=" + std::to_string(p.seqs[t].query_len) + " ctx=" + std::to_string(p.seqs[t].context_len),
            finite && same,
            std::string(kernel_name) + " prefill kernel alone == mixed batch: " + (same ? "bit-identical" : "DIFFER") +
                (finite ? "" : " (NaN output)"));
      }
    }
  }
}

// The walk (DecodeWalk) of a decode-only batch never changes a bit: 256-token splits spread
// over one CTA a row (which combines them itself), two (the reduce kernel combines them) and
// one CTA a split; the first also against float64.
void check_walks(AttentionProblem& p, const PagedAttentionArgs& args, const std::vector<int32_t>& sampled,
                 const std::vector<double>& ref) {
  DecodeSplitPolicy policy{256, 1 << 20};
  const int32_t grid_splits = decode_grid_splits(p.max_context_len, policy);
  DeviceBuffer<unsigned char> workspace(
      decode_workspace_layout(static_cast<int32_t>(p.seqs.size()), p.num_heads, p.head_dim, grid_splits).total_bytes);
  std::vector<std::vector<uint16_t>> outs;
  for (const int32_t ctas : {1, 2, 1 << 20}) {
    policy.ctas_per_row = ctas;
    p.d_out.poison();
    paged_attention_decode_policy(args, Workspace{workspace.get(), workspace.size()}, policy, nullptr);
    sync_or_die("paged_attention (decode walk)");
    outs.push_back(p.d_out.download());
  }
  Outcome o =
      outcome_of("kv_formats.decode_walk1", p.describe(), rows_of(outs[0], p, sampled), ref, kAtolRef, kRtolRef);
  o.note = "one CTA walks a row's " + std::to_string(grid_splits) + " splits at most, vs float64";
  report(o);
  const bool same = outs[0] == outs[1] && outs[1] == outs[2];
  report_flag("kv_formats.walk_invariance", p.describe(), same,
              std::string("1 CTA a row == 2 == 1 a split: ") + (same ? "bit-identical" : "DIFFER"));
}

// Quantized caches (fp8, int8, kivi4, kivi2): decode (split and unsplit), prefill with prefix
// hits and chunks, and mixed batches through the dispatcher, GQA shapes, partial blocks; against
// the float64 reference run on the same quantized bytes (the CUDA reference kernel reads fp16
// only). KIVI chunks span several blocks, so the residual boundary (sealed blocks before a
// row's own, its own from staging) falls inside the prefill kernel's query tiles.
void check_kv_formats(const Options& opt, std::mt19937_64& rng) {
  const std::vector<std::vector<SeqSpec>> batches = {
      {{1, 1}, {1, 17}, {1, 300}, {1, 1500}},        // decode, one split and several
      {{1, 4096}, {1, 33}, {1, 4000}},               // long decode
      {{64, 64}, {100, 357}, {1, 200}, {17, 1041}},  // prefill chunks over cached prefixes + a decode row
      {{513, 513}, {37, 38}},                        // a whole prompt, partial last block
  };
  for (KvFormat format :
       {KvFormat::kFp16, KvFormat::kBf16, KvFormat::kFp8E4M3, KvFormat::kInt8, KvFormat::kKivi4, KvFormat::kKivi2}) {
    for (int hi : {0, 1, 4}) {
      // KIVI groups 32 tokens: its blocks are multiples of 32 (128, its residual length, by
      // default); fp8's residual is a block too (multiples of 16, 128 by default).
      const std::vector<int32_t> block_sizes = kv_format_is_kivi(format)      ? std::vector<int32_t>{32, 128}
                                               : format == KvFormat::kFp8E4M3 ? std::vector<int32_t>{16, 128}
                                                                              : std::vector<int32_t>{16, 32};
      for (int32_t bs : block_sizes) {
        for (const std::vector<SeqSpec>& seqs : batches) {
          AttentionProblem p = problem_for(kHeads[hi], bs);
          p.format = format;
          p.seqs = seqs;
          p.q_scale = 2.0f;
          p.build(rng);
          const PagedAttentionArgs args = p.args();
          const std::vector<int32_t> sampled = sample_tokens_for_reference(p, rng);
          std::future<std::vector<double>> ref_future =
              std::async(std::launch::async, [&p, &sampled] { return reference_rows(p, sampled); });
          DeviceBuffer<unsigned char> workspace(attention_workspace_bytes(static_cast<int32_t>(p.seqs.size()),
                                                                          p.num_heads, p.num_kv_heads, p.head_dim,
                                                                          p.max_context_len, opt.sm_count));
          p.d_out.poison();
          const double ms = time_ms(
              [&] {
                paged_attention(args, Workspace{workspace.get(), workspace.size()}, opt.sm_count, nullptr);
              },
              0, 1);
          sync_or_die("paged_attention (quantized cache)");
          const std::vector<uint16_t> out = p.d_out.download();
          const std::vector<double> ref = ref_future.get();
          Outcome o =
              outcome_of("kv_formats.dispatch", p.describe(), rows_of(out, p, sampled), ref, kAtolRef, kRtolRef, ms);
          o.note = "vs float64 on the dequantized cache (" + std::to_string(sampled.size()) + " rows)";
          report(o);
          if (p.max_query_len <= 1) check_walks(p, args, sampled, ref);
          // The format's other decode kernel, on CUDA cores (bf16 has only that one; fp8, whose
          // own block is staged, only the tensor-core one).
          if (format != KvFormat::kBf16 && format != KvFormat::kFp8E4M3) {
            p.d_out.poison();
            paged_attention_prefill(args, nullptr, PrefillRows::kMultiTokenOnly);
            paged_attention_decode_policy(args, Workspace{workspace.get(), workspace.size()}, DecodeSplitPolicy{},
                                          nullptr, DecodeKernel::kCudaCores);
            sync_or_die("paged_attention (CUDA-core decode)");
            const std::vector<uint16_t> cores = p.d_out.download();
            Outcome c = outcome_of("kv_formats.decode_cuda_cores", p.describe(), rows_of(cores, p, sampled), ref,
                                   kAtolRef, kRtolRef);
            c.note = "prefill + the CUDA-core decode kernel vs float64";
            report(c);
          }
        }
      }
    }
  }
}

// Sliding windows (Gemma 3's local layers) and head_dim 256 through the dispatcher, which sends
// them to the reference kernel: windows of 1 token, inside a block, across blocks and longer
// than every context; decode rows, whole prompts, and chunks over cached context in one batch.
// Against float64, which applies the same window (the CPU's reference).
void check_windows(const Options& opt, std::mt19937_64& rng) {
  const HeadConfig heads[] = {{256, 4, 1}, {256, 8, 2}, {64, 9, 3}, {32, 4, 1}};
  const std::vector<SeqSpec> batch = {{1, 1}, {1, 700}, {300, 300}, {57, 1100}, {1, 9}, {16, 16}};
  for (const HeadConfig& h : heads) {
    for (int32_t bs : {16, 32}) {
      for (int32_t window : {1, 7, 16, 40, 512, 4096}) {
        AttentionProblem p = problem_for(h, bs);
        p.seqs = batch;
        p.window = window;
        p.q_scale = 2.0f;
        p.build(rng);
        const PagedAttentionArgs args = p.args();
        const std::vector<int32_t> sampled = sample_tokens_for_reference(p, rng);
        std::future<std::vector<double>> ref_future =
            std::async(std::launch::async, [&p, &sampled] { return reference_rows(p, sampled); });
        p.d_out.poison();
        const double ms = time_ms([&] { paged_attention(args, Workspace{}, opt.sm_count, nullptr); }, 0, 1);
        sync_or_die("paged_attention (window)");
        Outcome o = outcome_of("attention.window", p.describe(), rows_of(p.d_out.download(), p, sampled),
                               ref_future.get(), kAtolRef, kRtolRef, ms);
        o.note = "dispatcher (reference kernel) vs float64 (" + std::to_string(sampled.size()) + " rows)";
        report(o);
        if (opt.quick && window > 40) break;
      }
    }
  }
}

Register r1("attention.decode", check_decode);
Register r7("attention.window", check_windows);
Register r6("attention.kv_formats", check_kv_formats);
Register r2("attention.prefill", check_prefill);
Register r3("attention.invariance", check_invariance);

}  // namespace
}  // namespace folio::cuda::check
