#include "cli/importance_matrix.h"

#include <chrono>
#include <cstdio>

#include "backend/cpu/cpu_executor.h"
#include "cli/calibration_text.h"
#include "cli/model_session.h"
#include "engine/perplexity.h"
#include "executor/kv_pool_sizing.h"

namespace folio::cli {
namespace {

constexpr int32_t kChunk = kCalibrationChunk;

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

Expected<std::unique_ptr<cpu::ActivationStats>> collect_importance(const std::string& model_path,
                                                                   const std::string& text_path, int32_t tokens,
                                                                   int threads, bool quiet, bool gram) {
  Expected<CalibrationText> text = read_calibration_text(text_path);
  if (!text) return text.status();
  Expected<ModelSession> session = open_model_session(model_path, threads, true, "cpu");
  if (!session) return session.status();
  const Tokenizer& tokenizer = *session->tokenizer;
  Expected<std::vector<int32_t>> ids = calibration_tokens(*text, tokenizer, tokens, "--imatrix-tokens");
  if (!ids) return ids.status();
  const ModelConfig& config = session->weights->config();
  KvCacheOptions kv;
  kv.kv_cache_bytes = kv_bytes_for_tokens(config, kv, kChunk);
  kv.max_num_seqs = 1;
  cpu::CpuExecutor executor(*session->weights, *session->backend, kv);
  auto stats = std::make_unique<cpu::ActivationStats>(config, gram);
  executor.set_activation_stats(stats.get());
  SequenceRunner runner(executor, kChunk, kChunk);
  const std::optional<int32_t> bos = chunk_bos(tokenizer);
  const auto start = std::chrono::steady_clock::now();
  auto progress = [&](int64_t done, int64_t total, double perplexity) {
    if (quiet) return;
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "importance matrix: chunk %lld/%lld (perplexity so far %.3f, %.1f s)\n",
                 static_cast<long long>(done), static_cast<long long>(total), perplexity, seconds);
  };
  const std::span<const int32_t> used(ids->data(), ids->size());
  Expected<PerplexityResult> result = compute_perplexity(runner, used, kChunk, bos, 0, progress);
  if (!result) return result.status();
  if (stats->tokens(cpu::MatrixInput::kAttention, 0) == 0) {
    return Status::error("the calibration text gave no whole chunk of " + std::to_string(kChunk) + " tokens");
  }
  return stats;
}

ImportanceFn importance_of(const cpu::ActivationStats& stats) {
  return [&stats](const std::string& name) -> std::vector<float> {
    if (name.rfind("blk.", 0) != 0) return {};
    const size_t dot = name.find('.', 4);
    if (dot == std::string::npos) return {};
    const int32_t layer = std::stoi(name.substr(4, dot - 4));
    cpu::MatrixInput input;
    if (ends_with(name, ".attn_q.weight") || ends_with(name, ".attn_k.weight") || ends_with(name, ".attn_v.weight")) {
      input = cpu::MatrixInput::kAttention;
    } else if (ends_with(name, ".attn_output.weight")) {
      input = cpu::MatrixInput::kAttentionOutput;
    } else if (ends_with(name, ".ffn_gate.weight") || ends_with(name, ".ffn_up.weight")) {
      input = cpu::MatrixInput::kFfn;
    } else if (ends_with(name, ".ffn_down.weight")) {
      input = cpu::MatrixInput::kFfnHidden;
    } else {
      return {};
    }
    return stats.mean_squares(input, layer);
  };
}

}  // namespace folio::cli
