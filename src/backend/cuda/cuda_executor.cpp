#include "backend/cuda/cuda_executor.h"

#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_model.h"
#include "executor/decode_graph_buckets.h"
#include "executor/kv_pool_sizing.h"

namespace folio::cuda {
namespace {

size_t align256(size_t bytes) {
  return (bytes + 255) / 256 * 256;
}

int32_t next_pow2(int32_t v) {
  int32_t p = 1;
  while (p < v) p *= 2;
  return p;
}

// Decode graphs cover up to this many sequences (vLLM captures up to 512; an H200 runs 1,024
// by default, and an eager step of that size still pays ~1 ms of launches a step).
constexpr int32_t kMaxGraphSeqs = 1024;

// FOLIO_STREAMED_GEMM=0: the small GEMM's per-row-group kernel at n <= 8 too, for side-by-side
// runs (GemmPolicy::small_gemm_streamed).
bool streamed_gemm_turned_off() {
  const char* streamed = std::getenv("FOLIO_STREAMED_GEMM");
  return streamed != nullptr && *streamed == '0';
}

}  // namespace

Expected<std::unique_ptr<CudaExecutor>> CudaExecutor::create(const ModelWeights& weights,
                                                             const CudaExecutorOptions& options) {
  if (const std::string error = kv_format_shape_error(options.kv_format, options.block_size, weights.config().head_dim);
      !error.empty()) {
    return Status::error(error);
  }
  // Windows and head_dim 256 attend on the reference kernel, which reads fp16 caches only.
  const int32_t head_dim = weights.config().head_dim;
  if ((weights.architecture().has_sliding_window() || (head_dim != 64 && head_dim != 128)) &&
      options.kv_format != KvFormat::kFp16) {
    return Status::error("cuda: " + weights.architecture().family + " (head_dim " + std::to_string(head_dim) +
                         (weights.architecture().has_sliding_window() ? ", sliding windows" : "") +
                         ") reads an fp16 KV cache only on the GPU so far: use --kv-cache-dtype fp16 (or auto)");
  }
  std::unique_ptr<CudaExecutor> e(new CudaExecutor());
  e->options_ = options;
  e->groups_ = kv_groups_of(weights.config(), options.release_window_blocks);
  if (Status s = cuda_status(cudaSetDevice(options.device), "selecting the device"); !s) return s;
  cudaDeviceProp props{};
  if (Status s = cuda_status(cudaGetDeviceProperties(&props, options.device), "device properties"); !s) return s;
  e->stats_.device_name = props.name;
  e->sm_count_ = props.multiProcessorCount;
  if (options.weight_format == WeightFormat::kFp8E4M3 && props.major * 10 + props.minor < 89) {
    return Status::error(std::string("--quantization fp8 needs FP8 tensor cores (compute capability 8.9 or newer); ") +
                         props.name + " is " + std::to_string(props.major) + "." + std::to_string(props.minor));
  }
  if (Status s = cuda_status(cudaStreamCreateWithFlags(&e->stream_, cudaStreamNonBlocking), "stream"); !s) return s;
  const ModelConfig& c = weights.config();
  e->max_model_len_ = options.max_model_len > 0 ? options.max_model_len : c.context_length;
  e->max_blocks_per_seq_ = (e->max_model_len_ + options.block_size - 1) / options.block_size;
  const bool graphs = options.cuda_graphs &&
                      (options.tensor_parallel == nullptr || options.tensor_parallel->collectives->graph_capturable());
  e->max_graph_seqs_ = graphs ? std::min(kMaxGraphSeqs, decode_graph_bucket(std::max(1, options.max_num_seqs))) : 0;
  e->options_.cuda_graphs = graphs;
  if (const char* v = std::getenv("FOLIO_PROFILE_DECODE_STEP")) e->profile_decode_step_ = std::atoi(v);
  e->total_memory_ = props.totalGlobalMem;

  CudaModelLimits limits;
  limits.max_tokens = std::max(options.max_num_batched_tokens, e->max_graph_seqs_);
  limits.max_seqs = std::max(options.max_num_seqs, e->max_graph_seqs_);
  // Batch-invariant verification sends every row as its own sequence (capabilities()).
  if (options.gemm.batch_invariant) limits.max_seqs = std::max(limits.max_seqs, limits.max_tokens);
  const int32_t logit_rows =
      options.max_logit_rows > 0 ? options.max_logit_rows : std::min(options.max_num_seqs, kMaxGraphSeqs);
  limits.max_logit_rows = std::max(1, std::max(logit_rows, e->max_graph_seqs_));
  limits.max_context_len = e->max_blocks_per_seq_ * options.block_size;

  int last_decile = -1;
  auto progress = [&](uint64_t done, uint64_t total) {
    const int decile = total == 0 ? 10 : static_cast<int>(done * 10 / total);
    if (options.quiet || decile == last_decile) return;
    last_decile = decile;
    std::fprintf(stderr, "cuda: uploading weights %3d%% (%.2f GB)\n", decile * 10, done / 1e9);
    std::fflush(stderr);
  };
  Expected<std::unique_ptr<CudaModel>> cuda_model =
      CudaModel::create(weights, limits, e->sm_count_, options.weight_format, progress, options.tensor_parallel);
  if (!cuda_model) return cuda_model.status();
  e->model_ = std::move(cuda_model).value();
  e->stats_.weight_bytes = static_cast<int64_t>(e->model_->weight_bytes());
  e->stats_.activation_bytes = static_cast<int64_t>(e->model_->activation_bytes());
  // FOLIO_ACT_ORDER_GATHER=1 gathers act-order inputs before the product instead of having the
  // kernel before it write them in the matrix's order: the earlier path, for side-by-side runs.
  if (const char* gather = std::getenv("FOLIO_ACT_ORDER_GATHER"); gather != nullptr && *gather == '1') {
    e->options_.gemm.inputs_written_in_order = false;
  }
  // Programmatic dependent launch needs sm_90 (GemmPolicy::programmatic_launch).
  const char* programmatic = std::getenv("FOLIO_PROGRAMMATIC_LAUNCH");
  e->programmatic_launch_ = props.major >= 9 && (programmatic == nullptr || *programmatic != '0');
  e->options_.gemm.programmatic_launch = e->programmatic_launch_ && !e->options_.gemm.batch_invariant;
  if (streamed_gemm_turned_off()) e->options_.gemm.small_gemm_streamed = false;
  e->model_->gemm().set_policy(e->options_.gemm);
  if (Status s = e->tune_gemms(); !s) return s;
  if (Status s = e->allocate_step_buffers(); !s) return s;
  if (!options.defer_kv) {
    Expected<CudaKvPlan> plan = e->plan_kv(1.0);
    if (!plan) return plan.status();
    if (Status s = e->allocate_kv(*plan); !s) return s;
  }
  return Expected<std::unique_ptr<CudaExecutor>>(std::move(e));
}

void CudaExecutor::print_summary() const {
  if (options_.quiet) return;
  std::fprintf(stderr,
               "cuda: %s, %d SMs; weights %.2f GB (%s), activations %.2f GB, KV pool %d blocks of %d "
               "tokens (%.2f GB; %d staging blocks, %d more blocks over them while idle), swap %d blocks; "
               "graphs %s (up to %d sequences)\n",
               stats_.device_name.c_str(), sm_count_, stats_.weight_bytes / 1e9,
               model_->describe_weight_format().c_str(), stats_.activation_bytes / 1e9, num_blocks_,
               options_.block_size, stats_.kv_pool_bytes / 1e9, num_staging_, num_overlay_blocks_, num_host_blocks_,
               options_.cuda_graphs ? "on" : "off", max_graph_seqs_);
}

Status CudaExecutor::allocate_step_buffers() {
  const CudaModelLimits& limits = model_->limits();
  // Static inputs: the small arrays first and the block tables last, so that one copy of a
  // prefix moves a whole step's inputs. A pass of n tokens fills at most n / block_size + 1
  // blocks of each sequence: that bounds the seal list. Every block-table group has its own
  // slots (the last of the small arrays) and tables.
  const size_t t = static_cast<size_t>(limits.max_tokens);
  const size_t seqs = static_cast<size_t>(limits.max_seqs);
  const size_t groups = static_cast<size_t>(groups_.num_groups());
  max_seals_ =
      kv_format_has_residual(options_.kv_format) ? limits.max_tokens / options_.block_size + limits.max_seqs : 0;
  tables_offset_ = 3 * t + 2 * seqs + 2 + 2 * static_cast<size_t>(max_seals_) + groups * t;
  inputs_bytes_ = 4 * tables_offset_ + 4 * groups * seqs * static_cast<size_t>(max_blocks_per_seq_);
  if (Status s = inputs_.allocate(inputs_bytes_, "step inputs"); !s) return s;
  if (Status s = staging_.allocate(inputs_bytes_, "step staging"); !s) return s;
  int32_t* base = inputs_.get<int32_t>();
  d_tokens_ = base;
  d_positions_ = base + t;
  d_logit_rows_ = base + 2 * t;
  d_cu_query_starts_ = base + 3 * t;
  d_context_lens_ = base + 3 * t + seqs + 1;
  d_num_seals_ = base + 3 * t + 2 * seqs + 1;
  d_seals_ = d_num_seals_ + 1;
  d_slots_ = d_seals_ + 2 * static_cast<size_t>(max_seals_);
  d_block_tables_ = base + tables_offset_;
  // One logit row per sequence at most (the last token of each), so max_seqs rows, not
  // max_tokens: at 8192 tokens and a 128k vocabulary that would be 4 GB of pinned memory.
  logits_host_rows_ = static_cast<size_t>(std::max(limits.max_seqs, limits.max_logit_rows));
  if (Status s = logits_host_.allocate(logits_host_rows_ * static_cast<size_t>(model_->logits_vocab()) * sizeof(float),
                                       "pinned logits");
      !s) {
    return s;
  }
  const size_t rows = static_cast<size_t>(limits.max_logit_rows);
  std::vector<RowSampling> greedy(rows);
  for (RowSampling& p : greedy) p.temperature = 0.0f;
  if (Status s = greedy_params_.allocate(rows * sizeof(RowSampling), "sampling params"); !s) return s;
  if (Status s = cuda_status(
          cudaMemcpy(greedy_params_.get(), greedy.data(), rows * sizeof(RowSampling), cudaMemcpyHostToDevice),
          "sampling params");
      !s) {
    return s;
  }
  if (Status s = sample_params_.allocate(logits_host_rows_ * sizeof(RowSampling), "sampling params"); !s) return s;
  const size_t sampled_bytes = logits_host_rows_ * (sizeof(int32_t) + sizeof(float));
  if (Status s = sampled_.allocate(sampled_bytes, "sampled tokens"); !s) return s;
  if (Status s = sampled_host_.allocate(sampled_bytes, "pinned sampled tokens"); !s) return s;
  for (CUevent_st** event : {&step_start_, &layers_done_, &step_done_}) {
    if (Status s = cuda_status(cudaEventCreate(event), "timing events"); !s) return s;
  }
  return Status::ok();
}

CudaExecutor::~CudaExecutor() {
  drop_graphs();
  if (stream_ != nullptr) {
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }
  for (CUevent_st* event : {step_start_, layers_done_, step_done_}) {
    if (event != nullptr) cudaEventDestroy(event);
  }
}

const ModelConfig& CudaExecutor::config() const {
  return options_.tensor_parallel != nullptr ? options_.tensor_parallel->full_config : model_->config();
}

KvPoolLayout CudaExecutor::kv_pool() const {
  KvPoolLayout layout{num_blocks_, options_.block_size, num_host_blocks_, kv_bytes_per_block(), options_.kv_format};
  layout.num_staging_blocks = num_staging_;
  layout.num_host_staging_blocks = num_host_staging_;
  layout.num_overlay_blocks = num_overlay_blocks_;
  layout.bytes_per_staging_block =
      2 * static_cast<int64_t>(model_->config().num_layers) * static_cast<int64_t>(staging_block_bytes_);
  if (groups_.num_groups() > 1) layout.group_windows = groups_.windows;
  return layout;
}

Capabilities CudaExecutor::capabilities() const {
  Capabilities caps;
  caps.device = "cuda (" + stats_.device_name + ", " + std::to_string(sm_count_) + " SMs)";
  caps.samples_on_device = options_.device_sampling;
  caps.batch_invariant = options_.gemm.batch_invariant;
  // The prefill kernel and the decode kernel round differently; batch-invariant verification
  // takes the decode kernel's numbers, at the cost of reading each row's context once per row.
  caps.verify_rows_as_decodes = options_.gemm.batch_invariant;
  // FOLIO_NO_GRAPH_VERIFY=1 keeps verification chunks whole (eager), for side-by-side benchmarks.
  const char* no_graph_verify = std::getenv("FOLIO_NO_GRAPH_VERIFY");
  caps.graph_decode_seqs = no_graph_verify != nullptr && *no_graph_verify == '1' ? 0 : max_graph_seqs_;
  caps.max_batch_tokens = model_->limits().max_tokens;
  caps.max_logit_rows = static_cast<int32_t>(logits_host_rows_);
  return caps;
}

void CudaExecutor::drop_graphs() {
  for (auto& [key, exec] : graphs_) cudaGraphExecDestroy(exec);
  graphs_.clear();
}

void CudaExecutor::reset_stats() {
  const CudaExecutorStats fresh;
  stats_.graph_replays = fresh.graph_replays;
  stats_.eager_steps = fresh.eager_steps;
  stats_.prefill_steps = fresh.prefill_steps;
  stats_.mixed_steps = fresh.mixed_steps;
  stats_.eager_decode_steps = fresh.eager_decode_steps;
  stats_.device_sampled_steps = fresh.device_sampled_steps;
  stats_.upload_host_s = fresh.upload_host_s;
  stats_.wait_host_s = fresh.wait_host_s;
  stats_.layers_gpu_s = fresh.layers_gpu_s;
  stats_.head_gpu_s = fresh.head_gpu_s;
  stats_.capture_s = fresh.capture_s;
  stats_.logits_bytes_to_host = fresh.logits_bytes_to_host;
}

std::string CudaExecutor::gemm_description() const {
  return model_->gemm().describe_pinned();
}

std::string CudaExecutor::weight_format_description() const {
  return model_->describe_weight_format();
}

Status CudaExecutor::tune_gemms() {
  GemmPolicy& policy = options_.gemm;
  if (!policy.batch_invariant || !policy.tune_pinned) return Status::ok();
  const auto start = std::chrono::steady_clock::now();
  const bool quiet = options_.quiet;
  bool announced = false;
  auto report = [&](const PinnedTuning& t) {
    if (quiet || t.reused) return;
    if (!announced) {
      std::fprintf(stderr, "cuda: --batch-invariant: timing the split-K-free GEMM algorithms of each weight shape\n");
      announced = true;
    }
    std::string times;
    for (int32_t i = 0; i < t.num_rows; ++i) {
      char part[96];
      std::snprintf(part, sizeof part, "%s n=%lld %.1f us (best %.1f)", i == 0 ? "" : ",",
                    static_cast<long long>(t.rows[static_cast<size_t>(i)]), t.chosen_us[static_cast<size_t>(i)],
                    t.best_us[static_cast<size_t>(i)]);
      times += part;
    }
    std::fprintf(stderr, "cuda:   m=%lld k=%lld: %d candidates, pinned %s:%s; %.0f ms\n", static_cast<long long>(t.m),
                 static_cast<long long>(t.k), t.candidates, t.algorithm.c_str(), times.c_str(), 1e3 * t.seconds);
    std::fflush(stderr);
  };
  if (Status s = model_->tune_pinned_gemms(stream_, report); !s) {
    // Still batch invariant: the shapes not tuned get the heuristic's pick at pinned_rows.
    std::fprintf(stderr, "cuda: warning: GEMM tuning stopped (%s); untuned shapes pin the heuristic's pick\n",
                 s.message().c_str());
  }
  policy.pinned = model_->gemm().pinned_algorithms();
  tuned_ = policy.pinned;
  if (announced) {
    std::fprintf(stderr, "cuda: GEMMs tuned in %.2f s\n",
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return Status::ok();
}

void CudaExecutor::set_gemm_policy(const GemmPolicy& policy) {
  FOLIO_CUDA_CHECK(cudaStreamSynchronize(stream_));
  drop_graphs();
  stats_.graphs_captured = 0;
  options_.gemm = policy;
  options_.gemm.programmatic_launch = programmatic_launch_ && !policy.batch_invariant;
  if (streamed_gemm_turned_off()) options_.gemm.small_gemm_streamed = false;
  if (policy.batch_invariant && policy.tune_pinned && policy.pinned.empty()) options_.gemm.pinned = tuned_;
  model_->gemm().set_policy(options_.gemm);
  if (Status s = tune_gemms(); !s) cuda_fail("CudaExecutor::set_gemm_policy", __FILE__, __LINE__, s.message().c_str());
}

DeviceBatch CudaExecutor::upload(const ForwardBatch& batch, int32_t padded_seqs, int32_t table_width) {
  const CudaModelLimits& limits = model_->limits();
  const size_t t = static_cast<size_t>(limits.max_tokens);
  const size_t seqs = static_cast<size_t>(limits.max_seqs);
  const int32_t num_seqs = static_cast<int32_t>(batch.sequences.size());
  const int32_t pad = padded_seqs - num_seqs;  // decode padding: one token per padded sequence
  const int32_t n = batch.num_tokens() + pad;
  const int32_t rows = static_cast<int32_t>(batch.logit_rows.size()) + pad;
  int32_t* s = staging_.get<int32_t>();
  int32_t* tokens = s;
  int32_t* positions = s + t;
  int32_t* logit_rows = s + 2 * t;
  int32_t* cu = s + 3 * t;
  int32_t* context = s + 3 * t + seqs + 1;
  int32_t* num_seals = s + 3 * t + 2 * seqs + 1;
  int32_t* seals = num_seals + 1;
  int32_t* slots = seals + 2 * static_cast<size_t>(max_seals_);  // (num_groups, t)
  int32_t* tables = s + tables_offset_;                          // (num_groups, padded_seqs, table_width)
  const int32_t num_groups = groups_.num_groups();
  const size_t group_tables = static_cast<size_t>(padded_seqs) * table_width;
  if (static_cast<int32_t>(batch.more_kv_groups.size()) != num_groups - 1) {
    cuda_fail("CudaExecutor::execute", __FILE__, __LINE__, "the batch's block-table groups are not the pool's");
  }
  // More seals than the list holds cannot happen (allocate_step_buffers bounds them).
  *num_seals = static_cast<int32_t>(batch.seals.size());
  for (size_t i = 0; i < batch.seals.size(); ++i) {
    seals[2 * i] = batch.seals[i].block;
    seals[2 * i + 1] = batch.seals[i].staging;
  }
  std::copy(batch.tokens.begin(), batch.tokens.end(), tokens);
  std::copy(batch.positions.begin(), batch.positions.end(), positions);
  std::copy(batch.logit_rows.begin(), batch.logit_rows.end(), logit_rows);
  int32_t max_query = 0, max_context = 0;
  std::fill(tables, tables + num_groups * group_tables, 0);
  for (int32_t g = 0; g < num_groups; ++g) {
    const auto& group_slots =
        g == 0 ? batch.slot_mapping : batch.more_kv_groups[static_cast<size_t>(g - 1)].slot_mapping;
    std::copy(group_slots.begin(), group_slots.end(), slots + g * t);
    for (int32_t p = 0; p < pad; ++p) slots[g * t + static_cast<size_t>(batch.num_tokens() + p)] = -1;
  }
  for (int32_t i = 0; i < num_seqs; ++i) {
    const AttentionSequence& seq = batch.sequences[static_cast<size_t>(i)];
    cu[i] = seq.query_start;
    context[i] = seq.context_len;
    max_query = std::max(max_query, seq.query_len);
    max_context = std::max(max_context, seq.context_len);
    for (int32_t g = 0; g < num_groups; ++g) {
      const std::span<const int32_t> table =
          g == 0 ? seq.block_table
                 : batch.more_kv_groups[static_cast<size_t>(g - 1)].sequences[static_cast<size_t>(i)].block_table;
      std::copy(table.begin(), table.end(), tables + g * group_tables + static_cast<size_t>(i) * table_width);
    }
  }
  for (int32_t p = 0; p < pad; ++p) {
    const int32_t token = batch.num_tokens() + p;
    tokens[token] = 0;
    positions[token] = 0;
    logit_rows[static_cast<int32_t>(batch.logit_rows.size()) + p] = token;
    cu[num_seqs + p] = token;
    context[num_seqs + p] = 1;
  }
  cu[padded_seqs] = n;
  const size_t bytes = 4 * tables_offset_ + 4 * num_groups * group_tables;
  FOLIO_CUDA_CHECK(cudaMemcpyAsync(inputs_.get(), staging_.get(), bytes, cudaMemcpyHostToDevice, stream_));

  DeviceBatch d;
  d.tokens = d_tokens_;
  d.positions = d_positions_;
  d.slot_mapping = d_slots_;
  d.cu_query_starts = d_cu_query_starts_;
  d.context_lens = d_context_lens_;
  d.block_tables = d_block_tables_;
  d.logit_rows = d_logit_rows_;
  d.num_seals = d_num_seals_;
  d.seals = d_seals_;
  d.max_seals = static_cast<int32_t>(batch.seals.size());
  d.num_tokens = n;
  d.num_seqs = padded_seqs;
  d.max_blocks_per_seq = table_width;
  d.max_query_len = std::max(max_query, pad > 0 ? 1 : 0);
  d.max_context_len = max_context;
  d.num_logit_rows = rows;
  d.group_slots_stride = static_cast<int32_t>(t);
  d.group_tables_stride = static_cast<int32_t>(group_tables);
  if (num_groups > 1) d.layer_group = groups_.layer_group;
  return d;
}

CUgraphExec_st* CudaExecutor::decode_graph(int32_t seqs, int32_t table_width, const DeviceBatch& batch) {
  const auto key = std::make_pair(seqs, table_width);
  if (auto it = graphs_.find(key); it != graphs_.end()) return it->second;
  const auto start = std::chrono::steady_clock::now();
  // One eager run first: it loads the kernels' modules and lets cuBLASLt pick its algorithms
  // outside the capture. It does the step's own work, which the replay then repeats exactly
  // (same K/V written to the same slots, same logits).
  model_->forward(batch, kv_layers_, stream_);
  model_->logits(batch, 0, seqs, stream_);
  FOLIO_CUDA_CHECK(cudaStreamSynchronize(stream_));
  cudaGraph_t graph = nullptr;
  FOLIO_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  model_->forward(batch, kv_layers_, stream_);
  model_->logits(batch, 0, seqs, stream_);
  FOLIO_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
  cudaGraphExec_t exec = nullptr;
  FOLIO_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  FOLIO_CUDA_CHECK(cudaGraphDestroy(graph));
  graphs_.emplace(key, exec);
  stats_.graphs_captured = static_cast<int32_t>(graphs_.size());
  stats_.capture_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return exec;
}

int32_t CudaExecutor::run(const ForwardBatch& batch, const RowSampler& sampler) {
  const CudaModelLimits& limits = model_->limits();
  const int32_t num_seqs = static_cast<int32_t>(batch.sequences.size());
  const int32_t m = static_cast<int32_t>(batch.logit_rows.size());
  if (batch.num_tokens() > limits.max_tokens || num_seqs > limits.max_seqs ||
      static_cast<size_t>(m) > logits_host_rows_ || batch.seals.size() > static_cast<size_t>(max_seals_)) {
    char message[200];
    std::snprintf(message, sizeof message,
                  "batch of %d tokens / %d sequences / %d logit rows exceeds the executor's %d / %d / %zu",
                  batch.num_tokens(), num_seqs, m, limits.max_tokens, limits.max_seqs, logits_host_rows_);
    cuda_fail("CudaExecutor::execute", __FILE__, __LINE__, message);
  }
  const bool on_device = sampler.params != nullptr;
  int32_t max_blocks = 1;
  int32_t decode_seqs = 0;
  for (const AttentionSequence& seq : batch.sequences) {
    max_blocks = std::max(max_blocks, static_cast<int32_t>(seq.block_table.size()));
    decode_seqs += seq.query_len == 1 ? 1 : 0;
  }
  const bool decode_only = decode_seqs == num_seqs;
  const bool use_graph = decode_only && num_seqs <= max_graph_seqs_ && max_blocks <= max_blocks_per_seq_;
  const bool profiled = decode_only && profile_decode_step_ > 0 && ++decode_steps_run_ == profile_decode_step_;
  if (profiled) FOLIO_CUDA_CHECK(cudaProfilerStart());
  const auto upload_start = std::chrono::steady_clock::now();
  if (use_graph) {
    const int32_t seqs = decode_graph_bucket(num_seqs);
    const int32_t width = std::min(next_pow2(max_blocks), max_blocks_per_seq_);
    DeviceBatch d = upload(batch, seqs, width);
    stats_.upload_host_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - upload_start).count();
    // A graph is captured for the widest context its table width allows; shorter contexts cut
    // their own splits at run time (kernels.h, paged_attention_decode).
    d.max_context_len = width * options_.block_size;
    d.max_query_len = 1;
    // Each decoding sequence fills at most one block a step: the graph's seal grid.
    d.max_seals = max_seals_ > 0 ? seqs : 0;
    CUgraphExec_st* exec = decode_graph(seqs, width, d);
    FOLIO_CUDA_CHECK(cudaEventRecord(step_start_, stream_));
    FOLIO_CUDA_CHECK(cudaGraphLaunch(exec, stream_));
    FOLIO_CUDA_CHECK(cudaEventRecord(layers_done_, stream_));
    ++stats_.graph_replays;
    finish_rows(0, m, sampler);
  } else {
    DeviceBatch d = upload(batch, num_seqs, max_blocks);
    stats_.upload_host_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - upload_start).count();
    FOLIO_CUDA_CHECK(cudaEventRecord(step_start_, stream_));
    model_->forward(d, kv_layers_, stream_);
    FOLIO_CUDA_CHECK(cudaEventRecord(layers_done_, stream_));
    ++stats_.eager_steps;
    if (decode_only) {
      ++stats_.eager_decode_steps;
    } else if (decode_seqs == 0) {
      ++stats_.prefill_steps;
    } else {
      ++stats_.mixed_steps;
    }
    for (int32_t first = 0; first < m; first += limits.max_logit_rows) {
      const int32_t count = std::min(limits.max_logit_rows, m - first);
      model_->logits(d, first, count, stream_);
      finish_rows(first, count, sampler);
    }
  }
  if (on_device) {
    ++stats_.device_sampled_steps;
    // Tokens at the start of sampled_, logprobs logits_host_rows_ entries later.
    auto* tokens = sampled_.get<int32_t>();
    auto* host = sampled_host_.get<int32_t>();
    FOLIO_CUDA_CHECK(cudaMemcpyAsync(host, tokens, m * sizeof(int32_t), cudaMemcpyDeviceToHost, stream_));
    FOLIO_CUDA_CHECK(cudaMemcpyAsync(host + logits_host_rows_, tokens + logits_host_rows_, m * sizeof(float),
                                     cudaMemcpyDeviceToHost, stream_));
  }
  FOLIO_CUDA_CHECK(cudaEventRecord(step_done_, stream_));
  const auto wait_start = std::chrono::steady_clock::now();
  FOLIO_CUDA_CHECK(cudaStreamSynchronize(stream_));
  stats_.wait_host_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - wait_start).count();
  FOLIO_CUDA_CHECK(cudaGetLastError());
  if (profiled) FOLIO_CUDA_CHECK(cudaProfilerStop());
  float layers_ms = 0.0f, head_ms = 0.0f;
  FOLIO_CUDA_CHECK(cudaEventElapsedTime(&layers_ms, step_start_, layers_done_));
  FOLIO_CUDA_CHECK(cudaEventElapsedTime(&head_ms, layers_done_, step_done_));
  stats_.gemm_pinned_fallbacks = model_->gemm().pinned_fallbacks();
  stats_.layers_gpu_s += layers_ms / 1e3;
  stats_.head_gpu_s += head_ms / 1e3;
  return m;
}

StepResult CudaExecutor::execute(const ForwardBatch& batch, const SamplingPlan* plan) {
  copy_blocks(batch.block_copies);
  if (batch.tokens.empty()) return {};  // the copies are queued; the next step's work follows them
  const int32_t rows = static_cast<int32_t>(batch.logit_rows.size());
  const bool sample_here = plan != nullptr && options_.device_sampling;
  const RowSampler sampler = sample_here ? upload_sampling(*plan, rows) : RowSampler{};
  const int32_t m = run(batch, sampler);
  if (sample_here) return StepResult{{}, read_samples(m)};
  const size_t vocab = static_cast<size_t>(model_->logits_vocab());
  return StepResult{std::span<const float>(logits_host_.get<float>(), m * vocab), {}};
}

}  // namespace folio::cuda
