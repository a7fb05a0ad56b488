// Speculative decoding on the CUDA executor. With the pinned GEMM policy (--batch-invariant) a
// verification row must give the number plain decoding gives, so greedy tokens with speculation
// on must equal greedy tokens with it off, for 32 staggered requests under continuous batching
// (chunked prefill beside decodes and proposals): with n-gram lookup, a good draft (the target's
// own weights), a useless one (random weights: acceptance near zero), and n-gram over a KIVI-4
// pool; seeded sampled requests (some penalized), sampled on the device, likewise. Blocks of both models must be back in their pools at the end. Under the fast policy the
// equality counts are printed for the record (a near-tie may flip there, as without speculation).
#include <map>

#include "e2e_common.h"
#include "engine/engine.h"
#include "engine/spec/draft_model_proposer.h"
#include "engine/spec/ngram_proposer.h"
#include "model/synth_model.h"

namespace folio::e2e {
namespace {

struct Run {
  std::vector<std::vector<int32_t>> tokens;
  SpeculationMetrics speculation;
  bool pool_empty = false;
  double seconds = 0.0;
};

// Greedy, or (sampled) seeded requests at temperature 0.8 with top-p 0.9, every third with a
// repetition penalty, sampled on the device.
RequestParams params_of(size_t i, bool sampled) {
  RequestParams params;
  params.sampling.temperature = 0.0f;
  params.max_tokens = 24;
  params.ignore_eos = true;
  if (sampled) {
    params.sampling.temperature = 0.8f;
    params.sampling.top_p = 0.9f;
    params.sampling.seed = 7 + i;
    if (i % 3 == 0) params.sampling.repetition_penalty = 1.1f;
  }
  return params;
}

Run run_batch(Executor& executor, const Tokenizer& tokenizer, const std::vector<std::vector<int32_t>>& prompts,
              int32_t num_speculative, Proposer* proposer, bool sampled = false) {
  EngineConfig config;
  config.scheduler.max_num_batched_tokens = 128;
  config.speculative.num_tokens = num_speculative;
  config.speculative.adaptive = false;  // speculate every step: the check is about the numbers
  const auto start = std::chrono::steady_clock::now();
  Engine engine(executor, tokenizer, config, proposer);
  std::map<RequestId, size_t> index;
  Run r;
  r.tokens.resize(prompts.size());
  size_t next = 0;
  while (next < prompts.size() || engine.has_unfinished_requests()) {
    for (int k = 0; k < 3 && next < prompts.size(); ++k, ++next)
      index[engine.add_request(prompts[next], params_of(next, sampled)).value()] = next;
    for (const RequestOutput& out : engine.step()) {
      auto& tokens = r.tokens[index.at(out.id)];
      tokens.insert(tokens.end(), out.new_tokens.begin(), out.new_tokens.end());
    }
  }
  engine.step();  // forgets the last finished requests (and their draft state)
  const EngineMetrics m = engine.metrics();
  r.speculation = m.speculation;
  r.pool_empty = m.kv.num_used_blocks == 0 && m.num_running + m.num_waiting + m.num_swapped == 0 &&
                 (proposer == nullptr || proposer->num_used_blocks() == 0);
  r.seconds = seconds_since(start);
  return r;
}

int count_same(const Run& a, const Run& b) {
  int same = 0;
  for (size_t i = 0; i < a.tokens.size(); ++i) same += a.tokens[i] == b.tokens[i];
  return same;
}

}  // namespace

int run_speculative(const std::vector<std::string>& args) {
  std::string path = arg_value(args, "--model", "");
  const SynthConfig shape = synth_config("smollm2-135m").value();
  if (path.empty()) {
    path = "/tmp/folio-e2e-smollm2-synth.gguf";
    if (Status s = write_synth_model(shape, SynthOptions{}, path); !s) {
      std::fprintf(stderr, "speculative: %s\n", s.message().c_str());
      return 2;
    }
  }
  // The useless draft: two layers of other random weights at the same shape and vocabulary.
  const std::string useless_path = "/tmp/folio-e2e-smollm2-useless-draft.gguf";
  SynthOptions useless_options;
  useless_options.seed = 0xBAD;
  useless_options.num_layers = 2;
  if (Status s = write_synth_model(shape, useless_options, useless_path); !s) {
    std::fprintf(stderr, "speculative: %s\n", s.message().c_str());
    return 2;
  }
  Expected<LoadedModel> loaded = load_model(path);
  Expected<LoadedModel> useless = load_model(useless_path);
  if (!loaded || !useless) {
    std::fprintf(stderr, "speculative: %s\n", (!loaded ? loaded.error() : useless.error()).c_str());
    return 2;
  }
  const Tokenizer& tokenizer = *loaded->tokenizer;
  // Prompts from the text: n-gram lookup finds its repeats, and the draft a real distribution.
  std::vector<int32_t> corpus;
  {
    std::FILE* f = std::fopen((std::string(FOLIO_SOURCE_DIR) + "/tests/data/perplexity.txt").c_str(), "rb");
    std::string text;
    char buf[4096];
    for (size_t n; f != nullptr && (n = std::fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, n);
    if (f != nullptr) std::fclose(f);
    corpus = tokenizer.encode(text, false, false);
  }
  std::vector<std::vector<int32_t>> prompts;
  for (size_t i = 0; i < 32; ++i) {
    const size_t length = 3 + (i * 37) % 150;
    const size_t offset = (97 * i) % (corpus.size() - length);
    prompts.emplace_back(corpus.begin() + static_cast<std::ptrdiff_t>(offset),
                         corpus.begin() + static_cast<std::ptrdiff_t>(offset + length));
  }

  Tally tally;
  cuda::GemmPolicy pinned;
  pinned.batch_invariant = true;
  std::unique_ptr<cuda::CudaExecutor> target = cuda_executor(*loaded->model, 2048, 0, 64, 512, true, pinned);
  pinned = target->gemm_policy();  // with the tuned algorithms: the other executors pin the same
  std::unique_ptr<cuda::CudaExecutor> self_draft = cuda_executor(*loaded->model, 1024, 0, 64, 512, true, pinned);
  std::unique_ptr<cuda::CudaExecutor> useless_draft = cuda_executor(*useless->model, 1024, 0, 64, 512, true, pinned);
  std::unique_ptr<cuda::CudaExecutor> kivi_target =
      cuda_executor(*loaded->model, PoolFormat{KvFormat::kKivi4, 32, 96}, 1024, 0, 64, 512, true, pinned);

  const Run plain = run_batch(*target, tokenizer, prompts, 0, nullptr);
  const Run kivi_plain = run_batch(*kivi_target, tokenizer, prompts, 0, nullptr);
  struct Case {
    const char* name;
    cuda::CudaExecutor* target;
    cuda::CudaExecutor* draft;  // nullptr: n-gram lookup
    const Run* reference;
  };
  const Case cases[] = {{"ngram", target.get(), nullptr, &plain},
                        {"good draft (itself)", target.get(), self_draft.get(), &plain},
                        {"useless draft", target.get(), useless_draft.get(), &plain},
                        {"ngram, kivi4", kivi_target.get(), nullptr, &kivi_plain}};
  for (const Case& c : cases) {
    NgramProposer ngram(NgramConfig{});
    std::unique_ptr<DraftModelProposer> draft;
    if (c.draft != nullptr) draft = std::make_unique<DraftModelProposer>(*c.draft);
    Proposer* proposer = draft ? static_cast<Proposer*>(draft.get()) : &ngram;
    const Run spec = run_batch(*c.target, tokenizer, prompts, 4, proposer);
    const SpeculationMetrics& m = spec.speculation;
    const std::string name = std::string("speculative [pinned GEMMs, ") + c.name + "]";
    tally.check(count_same(*c.reference, spec) == 32, name + ": " + std::to_string(count_same(*c.reference, spec)) +
                                                          "/32 greedy outputs equal speculation off");
    tally.check(m.num_draft_tokens > 100, name + ": " + std::to_string(m.num_draft_tokens) + " tokens proposed");
    tally.check(spec.pool_empty, name + ": both pools empty after");
    std::printf("      acceptance %.3f, mean accepted length %.2f, %.1f s (off %.1f s)\n", m.acceptance_rate(),
                m.mean_acceptance_length(), spec.seconds, c.reference->seconds);
    std::printf(
        "RESULT speculative_pinned case=\"%s\" acceptance=%.3f mean_length=%.2f seconds=%.2f off_seconds=%.2f\n",
        c.name, m.acceptance_rate(), m.mean_acceptance_length(), spec.seconds, c.reference->seconds);
    if (c.draft == self_draft.get()) {
      tally.check(m.acceptance_rate() > 0.5, name + ": a draft that is the target accepts most proposals");
    }
  }
  {  // Seeded sampling on the device: row j drawn at the stream offset plain decoding uses.
    const Run sampled_plain = run_batch(*target, tokenizer, prompts, 0, nullptr, true);
    for (bool use_draft : {false, true}) {
      NgramProposer ngram(NgramConfig{});
      DraftModelProposer draft(*self_draft);
      Proposer* proposer = use_draft ? static_cast<Proposer*>(&draft) : &ngram;
      const Run spec = run_batch(*target, tokenizer, prompts, 4, proposer, true);
      const std::string name =
          std::string("speculative [pinned GEMMs, seeded sampling, ") + (use_draft ? "good draft" : "ngram") + "]";
      tally.check(count_same(sampled_plain, spec) == 32,
                  name + ": " + std::to_string(count_same(sampled_plain, spec)) + "/32 outputs equal speculation off");
      tally.check(spec.pool_empty, name + ": both pools empty after");
      std::printf("      %lld proposed, acceptance %.3f\n", static_cast<long long>(spec.speculation.num_draft_tokens),
                  spec.speculation.acceptance_rate());
    }
  }
  {  // The fast policy, for the record: the same workload with n-gram lookup.
    std::unique_ptr<cuda::CudaExecutor> fast = cuda_executor(*loaded->model, 2048, 0, 64, 512, true, {});
    const Run fast_plain = run_batch(*fast, tokenizer, prompts, 0, nullptr);
    NgramProposer ngram(NgramConfig{});
    const Run fast_spec = run_batch(*fast, tokenizer, prompts, 4, &ngram);
    std::printf("RESULT speculative_fast_gemm ngram_same=%d/32 (informational)\n", count_same(fast_plain, fast_spec));
    tally.check(fast_spec.pool_empty, "speculative [fast GEMMs, ngram]: pool empty after");
  }
  std::printf("speculative: %d passed, %d failed\n", tally.passed, tally.failed);
  return tally.failed == 0 ? 0 : 1;
}

}  // namespace folio::e2e
