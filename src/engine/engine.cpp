#include "engine/engine.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <limits>
#include <string>

#include "engine/request_limits.h"

namespace folio {
namespace {

KvCacheConfig kv_config_of(const KvPoolLayout& layout, const EngineConfig& config) {
  KvCacheConfig kv{layout.num_blocks,
                   layout.block_size,
                   layout.num_host_blocks > 1 ? layout.num_host_blocks : 0,
                   config.enable_prefix_caching,
                   layout.num_staging_blocks,
                   layout.num_host_staging_blocks,
                   layout.group_windows};
  kv.num_overlay_blocks = layout.num_overlay_blocks;
  kv.bytes_per_staging_block = layout.bytes_per_staging_block;
  kv.bytes_per_block = layout.bytes_per_block;
  return kv;
}

// One output per request and step: a speculative run's tokens after the first join it.
void merge_into(RequestOutput& into, RequestOutput&& next) {
  into.new_tokens.insert(into.new_tokens.end(), next.new_tokens.begin(), next.new_tokens.end());
  into.new_samples.insert(into.new_samples.end(), std::make_move_iterator(next.new_samples.begin()),
                          std::make_move_iterator(next.new_samples.end()));
  into.text_delta += next.text_delta;
  into.finished = next.finished;
  into.finish_reason = next.finish_reason;
  into.num_output_tokens = next.num_output_tokens;
  into.time_to_first_token_s = next.time_to_first_token_s;
  into.time_per_output_token_s = next.time_per_output_token_s;
}

}  // namespace

Engine::Engine(Executor& executor, const Tokenizer& tokenizer, const EngineConfig& config, Proposer* proposer)
    : executor_(executor),
      tokenizer_(tokenizer),
      kv_layout_(executor.kv_pool()),
      device_(executor.capabilities().device),
      max_model_len_(config.max_model_len > 0 ? config.max_model_len : executor.config().context_length),
      max_num_seqs_(config.scheduler.max_num_seqs),
      max_logit_rows_(executor.capabilities().max_logit_rows),
      scheduler_(config.scheduler, kv_config_of(kv_layout_, config)),
      runner_(executor),
      planner_(executor.capabilities().samples_on_device, executor.config().vocab_size,
               config.speculative.seeded == SeededVerification::kSameTokens),
      processor_(tokenizer, max_model_len_),
      beams_(tokenizer, max_model_len_),
      proposer_(config.speculative.num_tokens > 0 ? proposer : nullptr),
      controller_(config.speculative.num_tokens, config.speculative.adaptive,
                  proposer != nullptr ? proposer->relative_cost(executor.config()) : 0.0),
      verifier_(config.speculative.seeded) {
  if (proposer_ != nullptr) {
    speculation_.proposer = proposer_->name();
    speculation_.accepted_per_position.assign(static_cast<size_t>(config.speculative.num_tokens), 0);
  }
  // A beam group moves on through the engine: its new beams are sequences the engine owns and the
  // scheduler forks, its pruned ones leave through the scheduler.
  beam_actions_.fork = [this](Request& parent) -> Request& {
    Request& child = new_sequence(parent, parent.index);
    scheduler_.fork(parent, &child);
    return child;
  };
  beam_actions_.finish = [this](Request& beam, FinishReason reason) { scheduler_.finish(&beam, reason); };
  beam_actions_.is_end = [this](const RequestParams& params, int32_t token) {
    return processor_.is_stop_token(params, token);
  };
}

int64_t Engine::context_tokens() const {
  return std::min<int64_t>(max_model_len_, kv_layout_.num_token_slots());
}

Expected<RequestId> Engine::add_request(std::vector<int32_t> prompt, RequestParams params) {
  if (Status s = check_token_ids(prompt, executor_.config().vocab_size); !s) return s;
  if (Status s = check_request_length(static_cast<int64_t>(prompt.size()), std::nullopt, max_model_len_); !s) return s;
  if (Status s = params.sampling.validate(); !s) return s;
  if (params.max_tokens < 1) return Status::error("max_tokens must be at least 1");
  if (params.n < 1 || params.n > 256) return Status::error("n must be between 1 and 256");
  if (params.beam_width < 1 || params.beam_width > 64) return Status::error("beam width must be between 1 and 64");
  if (params.beam_width > 1 && params.n > 1) return Status::error("n > 1 and beam search cannot be combined");
  if (Status s = check_request_fits_kv_pool(static_cast<int64_t>(prompt.size()), params.max_tokens, max_model_len_,
                                            kv_layout_.num_token_slots());
      !s) {
    return s;
  }
  const RequestId id = next_id_++;
  const int32_t num_prompt = static_cast<int32_t>(prompt.size());
  auto request = std::make_unique<Request>(id, id, 0, std::make_shared<const RequestParams>(std::move(params)),
                                           std::move(prompt), num_prompt, tokenizer_);
  request->arrival_order = next_arrival_++;
  scheduler_.add(request.get());
  if (request->params().beam_width > 1) beams_.add(id, request.get());
  requests_.emplace(id, std::move(request));
  return id;
}

bool Engine::abort(RequestId id) {
  beams_.erase(id);
  bool aborted = false;
  for (auto& [sequence_id, request] : requests_) {
    if (request->parent_id == id && !request->finished()) {
      scheduler_.finish(request.get(), FinishReason::kAbort);
      aborted = true;
    }
  }
  return aborted;
}

Request& Engine::new_sequence(const Request& from, int32_t index) {
  auto child = std::make_unique<Request>(next_id_++, from.parent_id, index, from.shared_params, from.tokens,
                                         from.num_prompt_tokens, tokenizer_);
  child->forked = true;
  child->arrival_order = from.arrival_order;
  child->arrival_time = from.arrival_time;
  child->cum_logprob = from.cum_logprob;
  Request& sequence = *child;
  requests_.emplace(sequence.id, std::move(child));
  return sequence;
}

RequestOutput Engine::accept_token(Request& request, const SampleResult& sample) {
  ++num_generated_tokens_;
  const FinishReason reason = processor_.append_token(request, sample.token);
  if (reason != FinishReason::kNone) scheduler_.finish(&request, reason);
  return processor_.emit(request, &sample);
}

void Engine::fork_siblings(Request& parent, std::span<const float> logits, std::vector<RequestOutput>& outputs) {
  parent.forked = true;
  for (int32_t i = 1; i < parent.params().n; ++i) {
    // The parent's table covers the prompt now; each sibling shares every block of it.
    Request& sibling = new_sequence(parent, i);
    scheduler_.fork(parent, &sibling);
    outputs.push_back(
        accept_token(sibling, sibling.sampler.sample(logits, sibling.prompt(), sibling.output(), scratch_)));
  }
}

void Engine::verify(const SchedulerOutput& output, const StepResult& result) {
  accepted_.clear();
  if (proposed_.empty()) return;
  accepted_.assign(output.chunks.size(), 0);
  spec_samples_.resize(output.chunks.size());
  const int32_t vocab = executor_.config().vocab_size;
  size_t row = 0;
  for (size_t i = 0; i < output.chunks.size(); ++i) {
    const ScheduledChunk& chunk = output.chunks[i];
    if (!chunk.samples) continue;
    const size_t rows = 1 + static_cast<size_t>(chunk.num_draft_tokens);
    if (chunk.num_draft_tokens > 0) {
      Request& request = *chunk.request;
      accepted_[i] = !result.tokens.empty()
                         ? Verifier::verify_chosen(request, result.tokens.subspan(row, rows), spec_samples_[i])
                         : verifier_.verify(request, result.logits.subspan(row * vocab, rows * vocab), vocab, scratch_,
                                            spec_samples_[i]);
      request.speculation.record(chunk.num_draft_tokens, accepted_[i]);
      pooled_.record(chunk.num_draft_tokens, accepted_[i], Speculation::kPooledDecay);
      ++speculation_.num_drafts;
      speculation_.num_draft_tokens += chunk.num_draft_tokens;
      speculation_.num_accepted_tokens += accepted_[i];
      for (int32_t j = 0; j < accepted_[i]; ++j) ++speculation_.accepted_per_position[static_cast<size_t>(j)];
    }
    row += rows;
  }
}

void Engine::update(const SchedulerOutput& output, const StepResult& result, std::vector<RequestOutput>& outputs) {
  const auto start = Clock::now();
  verify(output, result);
  scheduler_.on_computed(output, accepted_);
  const size_t vocab = static_cast<size_t>(executor_.config().vocab_size);
  size_t row = 0;
  for (size_t i = 0; i < output.chunks.size(); ++i) {
    const ScheduledChunk& chunk = output.chunks[i];
    Request& request = *chunk.request;
    if (chunk.first_position < request.num_prompt_tokens) {
      num_prompt_tokens_computed_ += std::min(chunk.num_new_tokens, request.num_prompt_tokens - chunk.first_position);
    }
    if (!chunk.samples) continue;
    const size_t r = row;
    row += 1 + static_cast<size_t>(chunk.num_draft_tokens);
    if (chunk.num_draft_tokens > 0) {
      // The verified run: tokens go in until one ends the request (a stop token or string, or
      // max_tokens, inside the run); the rest are dropped with it.
      RequestOutput out;
      for (size_t j = 0; j < spec_samples_[i].size() && !request.finished(); ++j) {
        RequestOutput next = accept_token(request, spec_samples_[i][j]);
        if (j == 0) {
          out = std::move(next);
        } else {
          merge_into(out, std::move(next));
        }
      }
      outputs.push_back(std::move(out));
      continue;
    }
    if (!result.tokens.empty()) {
      // The planner gave a plan: no beams, no unforked n > 1, logprobs -1 or 0.
      SampleResult sample;
      sample.token = result.tokens[r].token;
      sample.logprob =
          request.params().sampling.logprobs >= 0 ? result.tokens[r].logprob : std::numeric_limits<float>::quiet_NaN();
      outputs.push_back(accept_token(request, sample));
      continue;
    }
    const std::span<const float> logits = result.logits.subspan(r * vocab, vocab);
    if (request.params().beam_width > 1) {
      BeamGroups::score(request, logits);  // extended when every live beam of its group is scored
      continue;
    }
    // Siblings fork before the parent samples: its first token may already finish it.
    if (request.params().n > 1 && !request.forked) fork_siblings(request, logits, outputs);
    outputs.push_back(
        accept_token(request, request.sampler.sample(logits, request.prompt(), request.output(), scratch_)));
  }
  // Also after a step that ran nothing: a group can become ready then (beam_group.h).
  if (!beams_.empty()) num_generated_tokens_ += beams_.advance_ready(beam_actions_, outputs);
  update_seconds_ += std::chrono::duration<double>(Clock::now() - start).count();
}

void Engine::forget(RequestId id) {
  if (proposer_ != nullptr) proposer_->release(id);
}

void Engine::propose() {
  if (proposer_ == nullptr) return;
  candidates_.clear();
  candidate_requests_.clear();
  int32_t prefill_tokens = 0;
  int32_t num_decoding = 0;
  for (Request* request : scheduler_.running()) {
    const int32_t pending = request->num_tokens() - request->num_computed_tokens;
    if (pending != 1) {
      prefill_tokens += pending;
      continue;
    }
    ++num_decoding;
    const RequestParams& params = request->params();
    if (params.beam_width > 1 || (params.n > 1 && !request->forked)) continue;  // beams: no speculation
    // Room for the proposals and the token after them: max_tokens and the context.
    const int32_t room =
        std::min(params.max_tokens - request->num_output_tokens(), max_model_len_ - request->num_tokens()) - 1;
    if (room <= 0) continue;
    SpeculationCandidate candidate;
    Speculation& speculation = request->speculation;
    speculation.start_from(pooled_.rates);
    // Positions never tested: as likely as the last one tested (runs go on), else the prior.
    candidate.acceptance = speculation.rates.empty() ? Speculation::kPrior : speculation.rates.back();
    candidate.rates = speculation.rates;
    candidate.max_tokens = room;
    candidate.backlog = proposer_->backlog(*request);
    candidate.remaining = params.max_tokens - request->num_output_tokens();
    candidates_.push_back(candidate);
    candidate_requests_.push_back(request);
  }
  if (candidates_.empty()) return;
  const SchedulerConfig& config = scheduler_.config();
  if (scheduler_.num_waiting() > 0) prefill_tokens += config.max_num_batched_tokens;
  // The scheduler carries at most max_prefill_tokens_while_decoding prompt tokens beside decodes
  // (candidates decode, so that cap holds this step).
  if (config.max_prefill_tokens_while_decoding > 0) {
    prefill_tokens = std::min(prefill_tokens, config.max_prefill_tokens_while_decoding);
  }
  const int32_t base = std::min(num_decoding + prefill_tokens, config.max_num_batched_tokens);
  controller_.choose(candidates_, base, proposal_sizes_);
  slots_.clear();
  // Each proposal is a logit row of the step, and the executor returns at most so many; the
  // running requests take one each, and so may those the step admits or swaps in (a prefill
  // that completes samples), up to max_num_seqs.
  const int32_t running = scheduler_.num_running();
  const int32_t joining = std::min(scheduler_.num_waiting() + scheduler_.num_swapped(),
                                   std::max(0, scheduler_.config().max_num_seqs - running));
  int32_t rows_left = max_logit_rows_ - running - joining;
  for (size_t i = 0; i < candidates_.size(); ++i) {
    const int32_t k = std::min(proposal_sizes_[i], rows_left);
    if (k <= 0) {
      candidate_requests_[i]->speculation.relax(pooled_.rates);
      continue;
    }
    rows_left -= k;
    slots_.push_back({candidate_requests_[i], k});
  }
  speculation_.last_num_tokens = controller_.last_k();
  if (slots_.empty()) return;
  const double before = proposer_->seconds();
  proposer_->propose(slots_);
  proposer_timing_ = proposer_->last_timing();
  for (const ProposalSlot& slot : slots_) proposed_.push_back(slot.request);
  speculation_.proposer_seconds += proposer_->seconds() - before;
}

SchedulerOutput Engine::schedule(std::vector<RequestOutput>& outputs) {
  // Requests aborted since the last step report their end once; finished ones are forgotten.
  // The scheduler let go of them when they finished, so nothing it schedules points at them.
  for (auto it = requests_.begin(); it != requests_.end();) {
    Request& request = *it->second;
    if (!request.finished()) {
      ++it;
      continue;
    }
    if (request.finish_reason == FinishReason::kAbort) outputs.push_back(processor_.emit(request, nullptr));
    forget(request.id);
    it = requests_.erase(it);
  }
  propose();
  SchedulerOutput output = scheduler_.schedule();
  for (RequestId id : output.preempted) forget(id);  // the draft's K/V go with the target's
  return output;
}

StepResult Engine::execute(const SchedulerOutput& output) {
  if (output.empty()) return {};
  const auto start = Clock::now();
  const SamplingPlan* plan = planner_.plan(output);
  const StepResult result = runner_.execute(output, plan);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  execute_seconds_ += seconds;
  if (!output.chunks.empty()) ++num_steps_;
  if (plan != nullptr) ++num_device_sampled_steps_;
  return result;
}

std::vector<RequestOutput> Engine::step() {
  const auto start = Clock::now();
  const double proposer_before = proposer_ != nullptr ? proposer_->seconds() : 0.0;
  std::vector<RequestOutput> outputs;
  const SchedulerOutput output = schedule(outputs);
  const StepResult result = execute(output);
  update(output, result, outputs);
  if (proposer_ != nullptr && output.num_batched_tokens > 0) {
    // The controller costs the whole step, not the forward pass alone: verification, sampling
    // and detokenizing the extra rows on the host grow with the proposals too. A draft's passes
    // are costed on their own (proposer_timing_), so they are taken out.
    double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (proposer_->relative_cost(executor_.config()) > 0) seconds -= proposer_->seconds() - proposer_before;
    controller_.observe(output.num_batched_tokens, seconds, proposer_timing_);
  }
  proposer_timing_ = {};
  for (Request* request : proposed_) request->speculation.clear_drafts();
  proposed_.clear();
  return outputs;
}

Status Engine::check_invariants() const {
  const KvCacheManager& kv = scheduler_.kv();
  if (Status s = kv.check_invariants(); !s) return s;
  if (proposer_ != nullptr) {
    if (Status s = proposer_->check_invariants(); !s) return s;
  }
  for (const auto& [id, request] : requests_) {
    const bool holds = kv.contains(request->sequence_id());
    if (request->finished() && holds) {
      return Status::error("finished request " + std::to_string(id) + " still holds KV blocks");
    }
    if (request->status == RequestStatus::kRunning && !holds) {
      return Status::error("running request " + std::to_string(id) + " has no KV blocks");
    }
    if (request->status == RequestStatus::kSwapped && !kv.is_swapped(request->sequence_id())) {
      return Status::error("swapped request " + std::to_string(id) + " is not swapped in the KV manager");
    }
    if (request->status == RequestStatus::kWaiting && holds) {
      return Status::error("waiting request " + std::to_string(id) + " holds KV blocks");
    }
    if (!request->finished() && holds && kv.num_tokens(request->sequence_id()) < request->num_computed_tokens) {
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
  m.kv = scheduler_.kv().metrics();
  m.kv_format = kv_layout_.format;
  m.device = device_;
  m.kv_block_size = kv_layout_.block_size;
  // A block holds one group's layers; a token takes a block slot in every group's table.
  m.kv_bytes_per_token = static_cast<double>(kv_layout_.bytes_per_block) *
                         static_cast<double>(std::max<size_t>(1, kv_layout_.group_windows.size())) /
                         kv_layout_.block_size;
  m.speculation = speculation_;
  m.kv_bytes_per_block = kv_layout_.bytes_per_block;
  m.kv_num_groups = std::max<int32_t>(1, static_cast<int32_t>(kv_layout_.group_windows.size()));
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
  for (const auto& [id, request] : requests_) forget(id);
  requests_.clear();
  return results;
}

}  // namespace folio
