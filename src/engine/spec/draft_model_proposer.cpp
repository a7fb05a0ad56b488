#include "engine/spec/draft_model_proposer.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <string>

#include "engine/spec/rejection_sampler.h"

namespace folio {
namespace {

KvCacheConfig draft_kv_config(const KvPoolLayout& pool) {
  assert(pool.num_staging_blocks == 0 && "the draft's pool has no residual format");
  assert(pool.group_windows.empty() && "the draft's pool has one block table per sequence");
  return KvCacheConfig{pool.num_blocks, pool.block_size, 0, true, 0, 0};
}

}  // namespace

DraftModelProposer::DraftModelProposer(Executor& draft, int32_t max_batch_tokens)
    : draft_(draft),
      max_batch_tokens_(std::max(1, std::min(max_batch_tokens, draft.capabilities().max_batch_tokens))),
      kv_(draft_kv_config(draft.kv_pool())) {}

Status DraftModelProposer::check_compatible(const ModelConfig& target, const ModelConfig& draft) {
  if (target.vocab_size != draft.vocab_size) {
    return Status::error("the draft model's vocabulary has " + std::to_string(draft.vocab_size) +
                         " tokens and the target's " + std::to_string(target.vocab_size) +
                         ": a draft model must share the target's vocabulary");
  }
  return Status::ok();
}

DraftModelProposer::State& DraftModelProposer::state_of(Request& request) {
  auto [it, inserted] = states_.try_emplace(request.id);
  if (inserted) {
    // The draft's own stream, seeded from the request's seed when it has one (so a seeded
    // request's proposals, like its samples, repeat), and distinct from the request's stream.
    std::optional<uint64_t> seed = request.seed();
    if (seed) *seed ^= 0xD1B54A32D192ED03ull;
    it->second.sampler = std::make_unique<Sampler>(request.params().sampling, seed);
  }
  return it->second;
}

void DraftModelProposer::resync(Request& request, State& state) {
  const size_t common = std::min(state.fed.size(), request.tokens.size());
  size_t verified = std::min(static_cast<size_t>(state.verified), common);
  while (verified < common && state.fed[verified] == request.tokens[verified]) ++verified;
  state.verified = static_cast<int32_t>(verified);
  if (state.fed.size() > verified) {
    kv_.truncate(request.id, static_cast<int32_t>(verified));
    state.fed.resize(verified);
  }
}

void DraftModelProposer::release(RequestId id) {
  kv_.free(id);
  states_.erase(id);
}

namespace {

// Multiply-adds per token of the layers' matrix products and the LM head.
double macs_per_token(const ModelConfig& c) {
  const double h = c.hidden_dim;
  const double attention = h * (2.0 * c.q_dim() + 2.0 * c.kv_dim());
  const double mlp = 3.0 * h * c.ffn_dim;
  return c.num_layers * (attention + mlp) + h * c.vocab_size;
}

}  // namespace

double DraftModelProposer::relative_cost(const ModelConfig& target) const {
  return macs_per_token(draft_.config()) / std::max(1.0, macs_per_token(target));
}

int32_t DraftModelProposer::backlog(const Request& request) const {
  const auto it = states_.find(request.id);
  // Unseen: all of it (less what the draft's prefix cache may hold, which only the lookup knows).
  if (it == states_.end()) return request.num_tokens();
  return request.num_tokens() - std::min(it->second.verified, request.num_tokens());
}

std::span<const float> DraftModelProposer::run(std::vector<Pass>& passes, double* seconds) {
  batch_.clear();
  batch_.block_copies = kv_.take_pending_copies();
  for (Pass& pass : passes) {
    const int32_t n = static_cast<int32_t>(pass.tokens.size());
    const int32_t query_start = batch_.num_tokens();
    batch_.tokens.insert(batch_.tokens.end(), pass.tokens.begin(), pass.tokens.end());
    for (int32_t i = 0; i < n; ++i) batch_.positions.push_back(pass.first_position + i);
    kv_.append_slot_mapping(pass.request->id, pass.first_position, n, batch_.slot_mapping);
    const std::span<const int32_t> table = kv_.block_table(pass.request->id);
    batch_.sequences.push_back(
        {query_start, n, pass.first_position + n, table, static_cast<int32_t>(table.size()), {}});
    if (pass.wants_logits) batch_.logit_rows.push_back(batch_.num_tokens() - 1);
    pass.state->fed.insert(pass.state->fed.end(), pass.tokens.begin(), pass.tokens.end());
  }
  const auto start = std::chrono::steady_clock::now();
  const StepResult result = draft_.execute(batch_, nullptr);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  seconds_ += took;
  *seconds += took;
  return result.logits;
}

void DraftModelProposer::draw(Request& request, State& state, std::span<const float> logits) {
  Speculation& speculation = request.speculation;
  output_scratch_.assign(request.tokens.begin() + request.num_prompt_tokens, request.tokens.end());
  output_scratch_.insert(output_scratch_.end(), speculation.draft_tokens.begin(), speculation.draft_tokens.end());
  TokenDistribution q;
  state.sampler->distribution(logits, request.prompt(), output_scratch_, scratch_, q);
  speculation.draft_tokens.push_back(RejectionSampler::draw(q, state.sampler->uniform()));
  // Greedy verification compares argmaxes and needs no q.
  if (!request.params().sampling.is_greedy()) speculation.draft_probs.push_back(std::move(q));
}

void DraftModelProposer::propose(std::span<const ProposalSlot> slots) {
  const int32_t vocab = draft_.config().vocab_size;
  const int32_t max_rows = std::max(1, draft_.capabilities().max_logit_rows);
  struct Active {
    Request* request;
    State* state;
    int32_t max_tokens;
  };
  std::vector<Active> active;
  std::vector<Pass> passes;
  int32_t budget = max_batch_tokens_;
  timing_ = {};
  // Pass 1: each request's catch-up (what the draft has not seen), its last row giving the
  // first proposal.
  for (const ProposalSlot& slot : slots) {
    Request& request = *slot.request;
    request.speculation.clear_drafts();
    if (budget <= 0 || static_cast<int32_t>(active.size()) >= max_rows) continue;
    State& state = state_of(request);
    resync(request, state);
    PrefixMatch prefix;
    if (!kv_.contains(request.id)) {
      prefix = kv_.find_cached_prefix(request.tokens);
      state.fed.assign(request.tokens.begin(), request.tokens.begin() + prefix.num_computed_tokens);
      state.verified = prefix.num_computed_tokens;
    }
    const int32_t first = static_cast<int32_t>(state.fed.size());
    const int32_t n = std::min(request.num_tokens() - first, budget);
    if (n <= 0) continue;  // cannot happen: the last token is never fed before it is verified
    if (!kv_.allocate_slots(request.id, n, prefix)) {
      release(request.id);  // the draft's pool is full: this request goes without for now
      continue;
    }
    budget -= n;
    const bool complete = first + n == request.num_tokens();
    passes.push_back({&request, &state, first,
                      std::vector<int32_t>(request.tokens.begin() + first, request.tokens.begin() + first + n),
                      complete});
    if (complete) active.push_back({&request, &state, slot.max_tokens});
  }
  if (passes.empty()) return;
  timing_.catchup_tokens = max_batch_tokens_ - budget;
  std::span<const float> logits = run(passes, &timing_.catchup_seconds);
  for (size_t i = 0; i < active.size(); ++i) {
    draw(*active[i].request, *active[i].state, logits.subspan(i * static_cast<size_t>(vocab), vocab));
  }
  // Passes 2..k: the previous proposal in, the next one out.
  for (int32_t j = 1;; ++j) {
    std::erase_if(active, [&](const Active& a) {
      return static_cast<int32_t>(a.request->speculation.draft_tokens.size()) >= a.max_tokens ||
             !kv_.allocate_slots(a.request->id, 1);
    });
    if (active.empty()) break;
    passes.clear();
    for (const Active& a : active) {
      const int32_t position = a.request->num_tokens() + j - 1;
      passes.push_back({a.request, a.state, position, {a.request->speculation.draft_tokens.back()}, true});
    }
    if (timing_.passes++ == 0) timing_.rows = static_cast<int32_t>(active.size());
    logits = run(passes, &timing_.pass_seconds);
    for (size_t i = 0; i < active.size(); ++i) {
      draw(*active[i].request, *active[i].state, logits.subspan(i * static_cast<size_t>(vocab), vocab));
    }
  }
  // The request's own tokens are now in the draft's cache: their full blocks can be shared.
  for (const ProposalSlot& slot : slots) {
    const Request& request = *slot.request;
    auto it = states_.find(request.id);
    if (it == states_.end() || !kv_.contains(request.id)) continue;
    const size_t verified = std::min(it->second.fed.size(), request.tokens.size());
    kv_.cache_full_blocks(request.id, std::span<const int32_t>(request.tokens).first(verified));
  }
}

Status DraftModelProposer::check_invariants() const {
  if (Status s = kv_.check_invariants(); !s) return Status::error("draft KV: " + s.message());
  for (const auto& [id, state] : states_) {
    if (kv_.contains(id) && kv_.num_tokens(id) != static_cast<int32_t>(state.fed.size())) {
      return Status::error("draft KV of request " + std::to_string(id) + " holds " +
                           std::to_string(kv_.num_tokens(id)) + " slots for " + std::to_string(state.fed.size()) +
                           " tokens");
    }
  }
  return Status::ok();
}

}  // namespace folio
