#include "engine/engine.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <limits>
#include <random>
#include <string>

#include "engine/cpu_model_executor.h"

namespace folio {
namespace {

int32_t blocks_for_bytes(int64_t bytes, const KvCacheShape& per_block) {
  return static_cast<int32_t>(std::max<int64_t>(0, bytes / static_cast<int64_t>(per_block.bytes_per_block())));
}

std::unique_ptr<ModelExecutor> make_cpu_executor(LlamaModel& model, Backend& backend,
                                                 const EngineConfig& config) {
  const KvCacheShape per_block = model.kv_shape(1, config.block_size);
  // One more than the budget's blocks: block 0 is the reserved null block.
  const int32_t num_blocks = blocks_for_bytes(config.kv_cache_bytes, per_block) + 1;
  const int32_t num_host_blocks =
      config.swap_space_bytes <= 0 ? 0 : blocks_for_bytes(config.swap_space_bytes, per_block) + 1;
  return std::make_unique<CpuModelExecutor>(model, backend, num_blocks, config.block_size,
                                            num_host_blocks);
}

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

Engine::Engine(LlamaModel& model, Backend& backend, const Tokenizer& tokenizer,
               const EngineConfig& config)
    : Engine(make_cpu_executor(model, backend, config), nullptr, tokenizer, config) {}

Engine::Engine(ModelExecutor& executor, const Tokenizer& tokenizer, const EngineConfig& config)
    : Engine(std::unique_ptr<ModelExecutor>(), &executor, tokenizer, config) {}

Engine::Engine(std::unique_ptr<ModelExecutor> owned, ModelExecutor* executor,
               const Tokenizer& tokenizer, const EngineConfig& config)
    : owned_executor_(std::move(owned)),
      executor_(executor != nullptr ? *executor : *owned_executor_),
      tokenizer_(tokenizer),
      max_model_len_(config.max_model_len > 0 ? config.max_model_len : executor_.config().context_length),
      kv_(KvCacheConfig{executor_.num_kv_blocks(), executor_.block_size(),
                        executor_.num_host_blocks() > 1 ? executor_.num_host_blocks() : 0,
                        config.enable_prefix_caching}),
      scheduler_(config.scheduler, kv_),
      runner_(executor_, kv_) {
  std::random_device device;
  random_base_ = (static_cast<uint64_t>(device()) << 32) ^ static_cast<uint64_t>(device());
}

Expected<RequestId> Engine::add_request(std::vector<int32_t> prompt, RequestParams params) {
  if (prompt.empty()) return Status::error("the prompt is empty");
  for (int32_t token : prompt) {
    if (token < 0 || token >= executor_.config().vocab_size) {
      return Status::error("prompt token id " + std::to_string(token) + " is out of range");
    }
  }
  if (Status s = params.sampling.validate(); !s) return s;
  if (params.max_tokens < 1) return Status::error("max_tokens must be at least 1");
  if (params.n < 1 || params.n > 256) return Status::error("n must be between 1 and 256");
  if (params.beam_width < 1 || params.beam_width > 64) return Status::error("beam width must be between 1 and 64");
  if (params.beam_width > 1 && params.n > 1) return Status::error("n > 1 and beam search cannot be combined");
  const int64_t total = static_cast<int64_t>(prompt.size()) + params.max_tokens;
  if (static_cast<int64_t>(prompt.size()) >= max_model_len_) {
    return Status::error("the prompt has " + std::to_string(prompt.size()) +
                         " tokens; the context is " + std::to_string(max_model_len_));
  }
  // A request whose whole context cannot fit in the pool could never finish.
  const int64_t pool_tokens = static_cast<int64_t>(executor_.num_kv_blocks() - 1) * executor_.block_size();
  if (std::min<int64_t>(total, max_model_len_) > pool_tokens) {
    return Status::error("prompt plus max_tokens (" + std::to_string(total) +
                         " tokens) exceed the KV cache (" + std::to_string(pool_tokens) + " tokens)");
  }
  const RequestId id = next_id_++;
  auto request = std::make_unique<Request>(id, std::move(prompt), std::move(params), tokenizer_);
  request->arrival_order = next_arrival_++;
  scheduler_.add(request.get());
  if (request->params.beam_width > 1) {
    beam_groups_[id] = BeamGroup{request->params, static_cast<int32_t>(request->prompt_tokens.size()), {request.get()}, {}, 0};
  }
  requests_.emplace(id, std::move(request));
  return id;
}

bool Engine::abort(RequestId id) {
  beam_groups_.erase(id);
  bool aborted = false;
  for (auto& [sequence_id, request] : requests_) {
    if (request->parent_id == id && !request->finished()) {
      finish(*request, FinishReason::kAbort);
      aborted = true;
    }
  }
  return aborted;
}

void Engine::finish(Request& request, FinishReason reason) {
  scheduler_.remove(&request);
  request.status = RequestStatus::kFinished;
  request.finish_reason = reason;
}

// Appends the token's text and decides whether the request is done. Stop strings are cut off
// together with anything after them.
bool Engine::check_stop(Request& request, int32_t token) {
  const RequestParams& params = request.params;
  const bool is_stop_token =
      (!params.ignore_eos && tokenizer_.is_end_of_generation(token)) ||
      std::find(params.stop_token_ids.begin(), params.stop_token_ids.end(), token) != params.stop_token_ids.end();
  if (is_stop_token) {
    request.output_text += request.detokenizer.flush();
    finish(request, FinishReason::kStop);
    return true;
  }
  request.output_text += request.detokenizer.push(token);
  for (const std::string& stop : params.stop) {
    if (stop.empty()) continue;
    // Only the newly added text can complete a stop string.
    const size_t from = request.emitted_text > stop.size() ? request.emitted_text - stop.size() : 0;
    const size_t at = request.output_text.find(stop, from);
    if (at != std::string::npos) {
      request.output_text.resize(at);
      finish(request, FinishReason::kStop);
      return true;
    }
  }
  if (static_cast<int32_t>(request.output_tokens.size()) >= params.max_tokens ||
      request.num_tokens() >= max_model_len_) {
    request.output_text += request.detokenizer.flush();
    finish(request, FinishReason::kLength);
    return true;
  }
  return false;
}

// Hands out text up to where a stop string could still begin, all of it once finished.
void Engine::emit(Request& request, RequestOutput& out) {
  size_t hold_back = 0;
  if (!request.finished()) {
    for (const std::string& stop : request.params.stop) hold_back = std::max(hold_back, stop.empty() ? 0 : stop.size() - 1);
  }
  size_t end = request.output_text.size() > hold_back ? request.output_text.size() - hold_back : 0;
  // Never split a UTF-8 character: back up over continuation bytes.
  while (end > request.emitted_text && end < request.output_text.size() &&
         (static_cast<unsigned char>(request.output_text[end]) & 0xC0) == 0x80) {
    --end;
  }
  if (end > request.emitted_text) {
    out.text_delta = request.output_text.substr(request.emitted_text, end - request.emitted_text);
    request.emitted_text = end;
  }
  out.finished = request.finished();
  out.finish_reason = request.finish_reason;
  if (out.finished && request.first_token_time) {
    out.time_to_first_token_s = std::chrono::duration<double>(*request.first_token_time - request.arrival_time).count();
    if (request.output_tokens.size() > 1) {
      out.time_per_output_token_s =
          std::chrono::duration<double>(request.last_token_time - *request.first_token_time).count() /
          static_cast<double>(request.output_tokens.size() - 1);
    }
  }
  out.num_prompt_tokens = static_cast<int32_t>(request.prompt_tokens.size());
  out.num_output_tokens = static_cast<int32_t>(request.output_tokens.size());
}

bool Engine::can_sample_on_device(const SchedulerOutput& output) const {
  if (!executor_.can_sample_greedy()) return false;
  bool any = false;
  for (const ScheduledChunk& chunk : output.chunks) {
    if (!chunk.samples) continue;
    const RequestParams& params = chunk.request->params;
    const SamplingParams& sampling = params.sampling;
    const bool plain = params.beam_width == 1 && (params.n == 1 || chunk.request->forked) &&
                       sampling.is_greedy() && sampling.repetition_penalty == 1.0f &&
                       sampling.frequency_penalty == 0.0f && sampling.presence_penalty == 0.0f &&
                       sampling.logprobs <= 0;
    if (!plain) return false;
    any = true;
  }
  return any;
}

uint64_t Engine::device_seed(const Request& request) const {
  if (request.params.sampling.seed) return *request.params.sampling.seed;
  return splitmix64(random_base_ ^ splitmix64(static_cast<uint64_t>(request.id)));
}

bool Engine::prepare_device_sampling(const SchedulerOutput& output) {
  sample_rows_.clear();
  penalty_tokens_.clear();
  penalty_counts_.clear();
  for (const ScheduledChunk& chunk : output.chunks) {
    if (!chunk.samples) continue;
    const Request& request = *chunk.request;
    const RequestParams& params = request.params;
    const SamplingParams& sampling = params.sampling;
    // Top logprobs, beams and the fork of n > 1 (siblings sample the parent's logits) need
    // the logit rows on the host.
    if (params.beam_width != 1 || (params.n > 1 && !request.forked) || sampling.logprobs > 0 ||
        !executor_.can_sample(sampling)) {
      return false;
    }
    RowSampleParams row;
    row.temperature = sampling.temperature;
    row.top_k = sampling.top_k;
    row.top_p = sampling.top_p;
    row.min_p = sampling.min_p;
    row.repetition_penalty = sampling.repetition_penalty;
    row.frequency_penalty = sampling.frequency_penalty;
    row.presence_penalty = sampling.presence_penalty;
    row.seed = device_seed(request);
    row.offset = static_cast<uint64_t>(request.output_tokens.size());
    row.penalty_begin = static_cast<int32_t>(penalty_tokens_.size());
    const bool repetition = sampling.repetition_penalty != 1.0f;
    const bool output_penalties = repetition || sampling.frequency_penalty != 0.0f || sampling.presence_penalty != 0.0f;
    if (output_penalties) {
      // One entry per distinct token: output count, or 0 for prompt-only (repetition only).
      const int32_t vocab = executor_.config().vocab_size;
      if (token_counts_.size() != static_cast<size_t>(vocab)) token_counts_.assign(static_cast<size_t>(vocab), -1);
      auto note = [&](int32_t token, int32_t add) {
        if (token < 0 || token >= vocab) return;
        int32_t& c = token_counts_[static_cast<size_t>(token)];
        if (c < 0) {
          c = 0;
          touched_.push_back(token);
        }
        c += add;
      };
      for (int32_t token : request.output_tokens) note(token, 1);
      if (repetition) {
        for (int32_t token : request.prompt_tokens) note(token, 0);
      }
      for (int32_t token : touched_) {
        penalty_tokens_.push_back(token);
        penalty_counts_.push_back(token_counts_[static_cast<size_t>(token)]);
        token_counts_[static_cast<size_t>(token)] = -1;
      }
      touched_.clear();
    }
    row.penalty_end = static_cast<int32_t>(penalty_tokens_.size());
    sample_rows_.push_back(row);
  }
  return !sample_rows_.empty();
}

void Engine::update(const SchedulerOutput& output, std::span<const float> logits,
                    std::span<const GreedySample> greedy, std::vector<RequestOutput>& outputs) {
  scheduler_.on_computed(output);
  const size_t vocab = static_cast<size_t>(executor_.config().vocab_size);
  size_t logit_row = 0;
  for (const ScheduledChunk& chunk : output.chunks) {
    Request& request = *chunk.request;
    if (chunk.first_position < static_cast<int32_t>(request.prompt_tokens.size())) {
      num_prompt_tokens_computed_ += std::min<int32_t>(
          chunk.num_new_tokens, static_cast<int32_t>(request.prompt_tokens.size()) - chunk.first_position);
    }
    if (!chunk.samples) continue;
    if (!greedy.empty()) {
      // can_sample_on_device() or prepare_device_sampling() held: no beams, no unforked n > 1,
      // logprobs -1 or 0.
      const GreedySample& chosen = greedy[logit_row++];
      SampleResult sample;
      sample.token = chosen.token;
      sample.logprob = request.params.sampling.logprobs >= 0 ? chosen.logprob
                                                             : std::numeric_limits<float>::quiet_NaN();
      outputs.push_back(take_sample(request, sample));
      continue;
    }
    const std::span<const float> row(logits.data() + logit_row++ * vocab, vocab);
    if (request.params.beam_width > 1) {
      // Scored now, extended when every live beam of its group has been scored.
      if (!request.beam_pending) {
        request.beam_candidates = top_logprobs(row, 2 * request.params.beam_width);
        request.beam_pending = true;
      }
      continue;
    }
    // Siblings fork before the parent samples: its first token may already finish it.
    if (request.params.n > 1 && !request.forked) fork_siblings(request, row, outputs);
    outputs.push_back(sample_and_check(request, row));
  }
}

Request& Engine::fork_request(Request& parent) {
  auto child = std::make_unique<Request>(next_id_++, parent.prompt_tokens, parent.params, tokenizer_);
  child->parent_id = parent.parent_id;
  child->forked = true;
  child->arrival_order = parent.arrival_order;
  child->arrival_time = parent.arrival_time;
  child->output_tokens = parent.output_tokens;
  child->cum_logprob = parent.cum_logprob;
  Request& forked = *child;
  requests_.emplace(forked.id, std::move(child));
  if (parent.status == RequestStatus::kRunning) {
    // Shares the parent's blocks; copy-on-write on the first write into the shared last one.
    forked.num_computed_tokens = parent.num_computed_tokens;
    kv_.fork(parent.sequence_id(), forked.sequence_id());
    scheduler_.add_running(&forked);
  } else {
    // The parent was preempted (recomputed or swapped out) while waiting for its group: the
    // child starts from nothing and is prefilled like a preempted request.
    forked.num_computed_tokens = 0;
    scheduler_.add(&forked);
  }
  return forked;
}

bool Engine::beam_group_done(const BeamGroup& group, const RequestParams& params) const {
  const int32_t width = params.beam_width;
  if (group.live.empty()) return true;
  if (static_cast<int32_t>(group.ended.size()) < width) return false;
  if (params.early_stopping) return true;
  // Hugging Face's heuristic: stop when the best live beam, scored at its current length,
  // cannot beat the worst of the best `width` ended hypotheses.
  std::vector<double> scores;
  for (const BeamHypothesis& h : group.ended) scores.push_back(h.score);
  std::sort(scores.rbegin(), scores.rend());
  double best_live = -1e300;
  for (const Request* beam : group.live) {
    best_live = std::max(best_live, beam_score(beam->cum_logprob, static_cast<int32_t>(beam->output_tokens.size()),
                                               params.length_penalty));
  }
  return best_live <= scores[width - 1];
}

void Engine::advance_beams(BeamGroup& group, std::vector<RequestOutput>& outputs) {
  const RequestParams& params = group.params;
  const RequestId id = group.live.front()->parent_id;
  for (Request* beam : group.live) beam->forked = true;  // the group now has its beams
  std::vector<BeamCandidate> candidates, next, ended;
  for (size_t b = 0; b < group.live.size(); ++b) {
    for (const auto& [token, logprob] : group.live[b]->beam_candidates) {
      candidates.push_back({static_cast<int32_t>(b), token, group.live[b]->cum_logprob + logprob});
    }
  }
  auto is_end = [&](int32_t token) {
    return (!params.ignore_eos && tokenizer_.is_end_of_generation(token)) ||
           std::find(params.stop_token_ids.begin(), params.stop_token_ids.end(), token) != params.stop_token_ids.end();
  };
  select_beams(std::move(candidates), params.beam_width, is_end, next, ended);
  for (const BeamCandidate& c : ended) {
    BeamHypothesis h{group.live[c.beam]->output_tokens, c.cum_logprob, 0.0, FinishReason::kStop};
    h.tokens.push_back(c.token);
    h.score = beam_score(h.cum_logprob, static_cast<int32_t>(h.tokens.size()), params.length_penalty);
    group.ended.push_back(std::move(h));
  }
  // Forks first, from the beams as they are; then every chosen beam takes its token.
  std::vector<Request*> chosen;
  std::vector<bool> reused(group.live.size(), false);
  for (const BeamCandidate& c : next) {
    Request* beam = group.live[c.beam];
    chosen.push_back(reused[c.beam] ? &fork_request(*beam) : beam);
    reused[c.beam] = true;
  }
  for (size_t b = 0; b < group.live.size(); ++b) {
    if (!reused[b]) finish(*group.live[b], FinishReason::kNone);  // pruned
  }
  group.live.clear();
  for (size_t i = 0; i < chosen.size(); ++i) {
    Request& beam = *chosen[i];
    beam.output_tokens.push_back(next[i].token);
    beam.cum_logprob = next[i].cum_logprob;
    beam.beam_pending = false;
    ++num_generated_tokens_;
    if (static_cast<int32_t>(beam.output_tokens.size()) >= params.max_tokens || beam.num_tokens() >= max_model_len_) {
      group.ended.push_back({beam.output_tokens, beam.cum_logprob,
                             beam_score(beam.cum_logprob, static_cast<int32_t>(beam.output_tokens.size()), params.length_penalty),
                             FinishReason::kLength});
      finish(beam, FinishReason::kLength);
    } else {
      group.live.push_back(&beam);
    }
  }
  group.peak_blocks = std::max<int64_t>(group.peak_blocks, kv_.metrics().num_used_blocks);
  if (beam_group_done(group, params)) finish_beam_group(id, group, outputs);
}

void Engine::finish_beam_group(RequestId id, BeamGroup& group, std::vector<RequestOutput>& outputs) {
  const RequestParams& params = group.params;
  for (Request* beam : group.live) {
    group.ended.push_back({beam->output_tokens, beam->cum_logprob,
                           beam_score(beam->cum_logprob, static_cast<int32_t>(beam->output_tokens.size()), params.length_penalty),
                           FinishReason::kLength});
    finish(*beam, FinishReason::kLength);
  }
  group.live.clear();
  std::stable_sort(group.ended.begin(), group.ended.end(),
                   [](const BeamHypothesis& a, const BeamHypothesis& b) { return a.score > b.score; });
  const int32_t width = params.beam_width;
  for (int32_t rank = 0; rank < std::min<int32_t>(width, static_cast<int32_t>(group.ended.size())); ++rank) {
    const BeamHypothesis& h = group.ended[rank];
    RequestOutput out;
    out.id = id;
    out.index = rank;
    out.new_tokens = h.tokens;
    out.text_delta = tokenizer_.decode(h.tokens, /*skip_special=*/true);
    out.finished = true;
    out.finish_reason = h.reason;
    out.num_prompt_tokens = group.num_prompt_tokens;
    out.num_output_tokens = static_cast<int32_t>(h.tokens.size());
    outputs.push_back(std::move(out));
  }
}

RequestOutput Engine::sample_and_check(Request& request, std::span<const float> logits) {
  return take_sample(request, request.sampler.sample(logits, request.prompt_tokens, request.output_tokens));
}

RequestOutput Engine::take_sample(Request& request, const SampleResult& sample) {
  request.output_tokens.push_back(sample.token);
  ++num_generated_tokens_;
  const auto now = Clock::now();
  if (!request.first_token_time) request.first_token_time = now;
  request.last_token_time = now;
  RequestOutput out;
  out.id = request.parent_id;
  out.index = request.index;
  out.new_tokens.push_back(sample.token);
  if (request.params.sampling.logprobs >= 0) out.new_samples.push_back(sample);
  check_stop(request, sample.token);
  emit(request, out);
  return out;
}

void Engine::fork_siblings(Request& parent, std::span<const float> logits,
                           std::vector<RequestOutput>& outputs) {
  parent.forked = true;
  for (int32_t i = 1; i < parent.params.n; ++i) {
    RequestParams params = parent.params;
    if (params.sampling.seed) params.sampling.seed = *params.sampling.seed + static_cast<uint64_t>(i);
    auto child = std::make_unique<Request>(next_id_++, parent.prompt_tokens, std::move(params), tokenizer_);
    child->parent_id = parent.parent_id;
    child->index = i;
    child->forked = true;
    child->arrival_order = parent.arrival_order;
    child->arrival_time = parent.arrival_time;
    child->num_computed_tokens = static_cast<int32_t>(parent.prompt_tokens.size());
    // The parent's table now covers the prompt; the child shares every block of it.
    kv_.fork(parent.sequence_id(), child->sequence_id());
    Request& sibling = *child;
    requests_.emplace(sibling.id, std::move(child));
    scheduler_.add_running(&sibling);
    outputs.push_back(sample_and_check(sibling, logits));
  }
}

std::vector<RequestOutput> Engine::step() {
  std::vector<RequestOutput> outputs;
  // Requests aborted since the last step report their end once.
  for (auto it = requests_.begin(); it != requests_.end();) {
    Request& request = *it->second;
    if (request.finished()) {
      if (request.finish_reason == FinishReason::kAbort) {
        RequestOutput out;
        out.id = request.parent_id;
        out.index = request.index;
        emit(request, out);
        outputs.push_back(std::move(out));
      }
      it = requests_.erase(it);
    } else {
      ++it;
    }
  }
  const SchedulerOutput scheduled = scheduler_.schedule();
  if (!scheduled.empty()) {
    const auto start = Clock::now();
    std::span<const float> logits;
    std::span<const GreedySample> greedy;
    if (prepare_device_sampling(scheduled)) {
      greedy = runner_.execute_sample(
          scheduled, SampleBatch{sample_rows_, penalty_tokens_, penalty_counts_});
      ++num_device_sampled_steps_;
    } else if (can_sample_on_device(scheduled)) {
      greedy = runner_.execute_greedy(scheduled);
      ++num_device_sampled_steps_;
    } else {
      logits = runner_.execute(scheduled);
    }
    const auto executed = Clock::now();
    update(scheduled, logits, greedy, outputs);
    execute_seconds_ += std::chrono::duration<double>(executed - start).count();
    update_seconds_ += std::chrono::duration<double>(Clock::now() - executed).count();
    ++num_steps_;
  }
  // Beam groups whose live beams are all scored move on together; a group can also become
  // ready in a step that ran nothing (its last beam was swapped back in, say).
  for (auto it = beam_groups_.begin(); it != beam_groups_.end();) {
    BeamGroup& group = it->second;
    const bool ready = !group.live.empty() &&
                       std::all_of(group.live.begin(), group.live.end(), [](const Request* b) { return b->beam_pending; });
    if (ready) advance_beams(group, outputs);
    it = group.live.empty() ? beam_groups_.erase(it) : std::next(it);
  }
  return outputs;
}

Status Engine::check_invariants() const {
  if (Status s = kv_.check_invariants(); !s) return s;
  for (const auto& [id, request] : requests_) {
    const bool holds = kv_.contains(request->sequence_id());
    if (request->finished() && holds) {
      return Status::error("finished request " + std::to_string(id) + " still holds KV blocks");
    }
    if (request->status == RequestStatus::kRunning && !holds) {
      return Status::error("running request " + std::to_string(id) + " has no KV blocks");
    }
    if (request->status == RequestStatus::kSwapped && !kv_.is_swapped(request->sequence_id())) {
      return Status::error("swapped request " + std::to_string(id) + " is not swapped in the KV manager");
    }
    if (request->status == RequestStatus::kWaiting && holds) {
      return Status::error("waiting request " + std::to_string(id) + " holds KV blocks");
    }
    if (!request->finished() && kv_.contains(request->sequence_id()) &&
        kv_.num_tokens(request->sequence_id()) < request->num_computed_tokens) {
      return Status::error("request " + std::to_string(id) + " has more computed tokens than slots");
    }
  }
  return Status::ok();
}

EngineMetrics Engine::metrics() const {
  EngineMetrics m;
  m.num_running = scheduler_.num_running();
  m.num_waiting = scheduler_.num_waiting();
  m.num_swapped = scheduler_.num_swapped();
  m.num_preemptions = scheduler_.num_preemptions();
  m.num_prompt_tokens_computed = num_prompt_tokens_computed_;
  m.num_generated_tokens = num_generated_tokens_;
  m.execute_seconds = execute_seconds_;
  m.update_seconds = update_seconds_;
  m.num_steps = num_steps_;
  m.num_device_sampled_steps = num_device_sampled_steps_;
  m.kv = kv_.metrics();
  return m;
}

std::vector<Generation> Engine::generate(const std::vector<std::vector<int32_t>>& prompts,
                                         const RequestParams& params) {
  assert(params.n == 1 && "generate() returns one result per prompt");
  std::map<RequestId, size_t> index;
  std::vector<Generation> results(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    Expected<RequestId> id = add_request(prompts[i], params);
    if (!id) {
      results[i].finish_reason = FinishReason::kAbort;
      results[i].text = id.error();
      continue;
    }
    index[*id] = i;
  }
  while (has_unfinished_requests()) {
    for (RequestOutput& out : step()) {
      if (out.index != 0) continue;  // beam search: the best hypothesis
      Generation& g = results[index.at(out.id)];
      g.tokens.insert(g.tokens.end(), out.new_tokens.begin(), out.new_tokens.end());
      g.text += out.text_delta;
      if (out.finished) {
        g.finish_reason = out.finish_reason;
        g.time_to_first_token_s = out.time_to_first_token_s;
        g.time_per_output_token_s = out.time_per_output_token_s;
      }
    }
  }
  requests_.clear();
  return results;
}

}  // namespace folio
