#include "attention_fixture.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <numeric>
#include <span>
#include <thread>

#include "backend/cpu/cpu_attention.h"
#include "kv/kv_quant.h"

namespace folio::cuda::check {

std::string AttentionProblem::describe() const {
  int32_t min_q = 1 << 30, max_q = 0, min_c = 1 << 30, max_c = 0;
  for (const SeqSpec& s : seqs) {
    min_q = std::min(min_q, s.query_len);
    max_q = std::max(max_q, s.query_len);
    min_c = std::min(min_c, s.context_len);
    max_c = std::max(max_c, s.context_len);
  }
  return "seqs=" + std::to_string(seqs.size()) + " q=" + std::to_string(min_q) + ".." + std::to_string(max_q) +
         " ctx=" + std::to_string(min_c) + ".." + std::to_string(max_c) + " h=" + std::to_string(num_heads) + "/" +
         std::to_string(num_kv_heads) + " d=" + std::to_string(head_dim) + " bs=" + std::to_string(block_size) +
         (format == KvFormat::kFp16 ? "" : " " + std::string(kv_format_name(format))) +
         (window > 0 ? " window=" + std::to_string(window) : "");
}

void AttentionProblem::build(std::mt19937_64& rng, bool fill_values) {
  const int32_t num_seqs = static_cast<int32_t>(seqs.size());
  cu_query_starts.assign(num_seqs + 1, 0);
  context_lens.resize(num_seqs);
  max_query_len = max_context_len = max_blocks_per_seq = 0;
  int32_t needed_blocks = 0;
  for (int32_t s = 0; s < num_seqs; ++s) {
    cu_query_starts[s + 1] = cu_query_starts[s] + seqs[s].query_len;
    context_lens[s] = seqs[s].context_len;
    max_query_len = std::max(max_query_len, seqs[s].query_len);
    max_context_len = std::max(max_context_len, seqs[s].context_len);
    const int32_t blocks = (seqs[s].context_len + block_size - 1) / block_size;
    max_blocks_per_seq = std::max(max_blocks_per_seq, blocks);
    needed_blocks += blocks;
  }
  num_tokens = cu_query_starts[num_seqs];
  max_blocks_per_seq += 2;  // padding that must never be read
  num_blocks = needed_blocks + 1;
  std::vector<int32_t> ids(num_blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  const int32_t poison_block = ids.back();
  block_tables.assign(static_cast<size_t>(num_seqs) * max_blocks_per_seq, poison_block);
  size_t next = 0;
  for (int32_t s = 0; s < num_seqs; ++s) {
    const int32_t blocks = (seqs[s].context_len + block_size - 1) / block_size;
    for (int32_t b = 0; b < blocks; ++b) block_tables[static_cast<size_t>(s) * max_blocks_per_seq + b] = ids[next++];
  }

  // 64k random fp16 values, drawn by a cheap xorshift: filling gigabytes stays fast.
  std::vector<uint16_t> pool(1 << 16);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  for (uint16_t& h : pool) h = to_half(uni(rng));
  uint64_t state = rng() | 1;
  auto next_value = [&] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return pool[state & 0xffff];
  };

  const size_t token_elems = static_cast<size_t>(num_kv_heads) * head_dim;
  const size_t cache_elems = static_cast<size_t>(num_blocks) * block_size * token_elems;
  if (fill_values) {
    k.assign(cache_elems, 0xffff);  // NaN everywhere no context lives
    v.assign(cache_elems, 0xffff);
    for (int32_t s = 0; s < num_seqs; ++s) {
      for (int32_t pos = 0; pos < seqs[s].context_len; ++pos) {
        const int32_t block = block_tables[static_cast<size_t>(s) * max_blocks_per_seq + pos / block_size];
        const size_t base = (static_cast<size_t>(block) * block_size + pos % block_size) * token_elems;
        for (size_t i = 0; i < token_elems; ++i) {
          k[base + i] = next_value();
          v[base + i] = next_value();
        }
      }
    }
    q.resize(static_cast<size_t>(num_tokens) * num_heads * head_dim);
    for (uint16_t& x : q) x = to_half(from_half(next_value()) * q_scale);
    d_q = DeviceBuffer<uint16_t>(q);
    if (format == KvFormat::kFp16) {
      d_k = DeviceBuffer<uint16_t>(k);
      d_v = DeviceBuffer<uint16_t>(v);
    } else if (kv_format_has_residual(format)) {
      build_residual(true);
    } else {
      // 0xff bytes everywhere no context lives: E4M3 NaN values and NaN scales (int8 too).
      const size_t bytes = static_cast<size_t>(num_blocks) * kv_block_bytes(format, block_size, num_kv_heads, head_dim);
      kq.assign(bytes, 0xff);
      vq.assign(bytes, 0xff);
      const KvLayerView host{kq.data(), vq.data(), num_blocks, block_size, num_kv_heads, head_dim, format};
      std::vector<float> row(static_cast<size_t>(head_dim));
      for (int32_t s = 0; s < num_seqs; ++s) {
        for (int32_t pos = 0; pos < seqs[s].context_len; ++pos) {
          const int32_t block = block_tables[static_cast<size_t>(s) * max_blocks_per_seq + pos / block_size];
          const int64_t slot = static_cast<int64_t>(block) * block_size + pos % block_size;
          for (int32_t h = 0; h < num_kv_heads; ++h) {
            for (int which = 0; which < 2; ++which) {
              const std::vector<uint16_t>& src = which == 0 ? k : v;
              for (int32_t d = 0; d < head_dim; ++d) {
                row[static_cast<size_t>(d)] =
                    from_half(src[static_cast<size_t>(slot) * token_elems + static_cast<size_t>(h) * head_dim + d]);
              }
              kv_store_row(host, which, slot, h, row.data());
            }
          }
        }
      }
      d_k = DeviceBuffer<uint16_t>(bytes / 2);
      d_v = DeviceBuffer<uint16_t>(bytes / 2);
      FOLIO_CUDA_OK(cudaMemcpy(d_k.get(), kq.data(), bytes, cudaMemcpyHostToDevice));
      FOLIO_CUDA_OK(cudaMemcpy(d_v.get(), vq.data(), bytes, cudaMemcpyHostToDevice));
    }
  } else if (kv_format_has_residual(format)) {
    build_residual(false);
    d_q = DeviceBuffer<uint16_t>(static_cast<size_t>(num_tokens) * num_heads * head_dim);
    FOLIO_CUDA_OK(cudaMemset(d_q.get(), 0x11, d_q.size() * 2));
  } else {
    const size_t bytes = static_cast<size_t>(num_blocks) * kv_block_bytes(format, block_size, num_kv_heads, head_dim);
    d_k = DeviceBuffer<uint16_t>(bytes / 2);
    d_v = DeviceBuffer<uint16_t>(bytes / 2);
    d_q = DeviceBuffer<uint16_t>(static_cast<size_t>(num_tokens) * num_heads * head_dim);
    FOLIO_CUDA_OK(cudaMemset(d_k.get(), 0x11, bytes));  // small finite values (and scales) in every format
    FOLIO_CUDA_OK(cudaMemset(d_v.get(), 0x11, bytes));
    FOLIO_CUDA_OK(cudaMemset(d_q.get(), 0x11, d_q.size() * 2));
  }
  d_out = DeviceBuffer<uint16_t>(static_cast<size_t>(num_tokens) * num_heads * head_dim);
  d_cu = DeviceBuffer<int32_t>(cu_query_starts);
  d_ctx = DeviceBuffer<int32_t>(context_lens);
  d_tables = DeviceBuffer<int32_t>(block_tables);
}

void AttentionProblem::build_residual(bool fill_values) {
  const int32_t num_seqs = static_cast<int32_t>(seqs.size());
  const size_t token_elems = static_cast<size_t>(num_kv_heads) * head_dim;
  first_staged.assign(num_seqs, 0);
  staging_tables.assign(block_tables.size(), -1);
  num_staging = 1;  // staging block 0: scratch for sealing the blocks before a chunk, then NaN
  for (int32_t s = 0; s < num_seqs; ++s) {
    first_staged[s] = (seqs[s].context_len - seqs[s].query_len) / block_size;
    num_staging += (seqs[s].context_len + block_size - 1) / block_size - first_staged[s];
  }
  const size_t staging_elems = static_cast<size_t>(num_staging) * block_size * token_elems;
  const size_t bytes = static_cast<size_t>(num_blocks) * kv_block_bytes(format, block_size, num_kv_heads, head_dim);
  if (!fill_values) {  // benchmarks: small finite values everywhere, the same staging tables
    int32_t next_id = 1;
    for (int32_t s = 0; s < num_seqs; ++s) {
      const int32_t blocks = (seqs[s].context_len + block_size - 1) / block_size;
      for (int32_t b = first_staged[s]; b < blocks; ++b) {
        staging_tables[static_cast<size_t>(s) * max_blocks_per_seq + b] = next_id++;
      }
    }
    d_k = DeviceBuffer<uint16_t>(bytes / 2);
    d_v = DeviceBuffer<uint16_t>(bytes / 2);
    d_sk = DeviceBuffer<uint16_t>(staging_elems);
    d_sv = DeviceBuffer<uint16_t>(staging_elems);
    for (const auto* b : {&d_k, &d_v, &d_sk, &d_sv}) FOLIO_CUDA_OK(cudaMemset(b->get(), 0x11, b->size() * 2));
  }
  if (fill_values) {
    sk.assign(staging_elems, 0xffff);
    sv.assign(staging_elems, 0xffff);
    kq.assign(bytes, 0xff);
    vq.assign(bytes, 0xff);
    KvLayerView host{kq.data(), vq.data(), num_blocks, block_size, num_kv_heads, head_dim, format};
    host.staging_k = sk.data();
    host.staging_v = sv.data();
    host.num_staging = num_staging;
    int32_t next_id = 1;
    for (int32_t s = 0; s < num_seqs; ++s) {
      const int32_t blocks = (seqs[s].context_len + block_size - 1) / block_size;
      for (int32_t b = 0; b < blocks; ++b) {
        const size_t entry = static_cast<size_t>(s) * max_blocks_per_seq + b;
        const int32_t id = b >= first_staged[s] ? next_id++ : 0;
        if (id > 0) staging_tables[entry] = id;
        const int32_t block = block_tables[entry];
        for (int32_t i = 0; i < block_size && b * block_size + i < seqs[s].context_len; ++i) {
          const size_t src = (static_cast<size_t>(block) * block_size + i) * token_elems;
          const size_t dst = (static_cast<size_t>(id) * block_size + i) * token_elems;
          std::copy(k.begin() + src, k.begin() + src + token_elems, sk.begin() + dst);
          std::copy(v.begin() + src, v.begin() + src + token_elems, sv.begin() + dst);
        }
        if ((b + 1) * block_size <= seqs[s].context_len) kv_seal_block(host, block, id);
      }
    }
    std::fill(sk.begin(), sk.begin() + block_size * token_elems, 0xffff);
    std::fill(sv.begin(), sv.begin() + block_size * token_elems, 0xffff);
  }
  slots.assign(num_tokens, -1);
  for (int32_t s = 0; s < num_seqs; ++s) {
    for (int32_t i = 0; i < seqs[s].query_len; ++i) {
      const int32_t pos = seqs[s].context_len - seqs[s].query_len + i;
      const int32_t id = staging_tables[static_cast<size_t>(s) * max_blocks_per_seq + pos / block_size];
      slots[cu_query_starts[s] + i] = id * block_size + pos % block_size;
    }
  }
  d_slots = DeviceBuffer<int32_t>(slots);
  if (!fill_values) return;
  d_k = DeviceBuffer<uint16_t>(bytes / 2);
  d_v = DeviceBuffer<uint16_t>(bytes / 2);
  FOLIO_CUDA_OK(cudaMemcpy(d_k.get(), kq.data(), bytes, cudaMemcpyHostToDevice));
  FOLIO_CUDA_OK(cudaMemcpy(d_v.get(), vq.data(), bytes, cudaMemcpyHostToDevice));
  d_sk = DeviceBuffer<uint16_t>(sk);
  d_sv = DeviceBuffer<uint16_t>(sv);
}

PagedAttentionArgs AttentionProblem::args() const {
  PagedAttentionArgs a;
  a.q = d_q.get();
  a.out = d_out.get();
  a.cache = KvLayerView{reinterpret_cast<uint8_t*>(d_k.get()),
                        reinterpret_cast<uint8_t*>(d_v.get()),
                        num_blocks,
                        block_size,
                        num_kv_heads,
                        head_dim,
                        format};
  a.cache.staging_k = d_sk.get();
  a.cache.staging_v = d_sv.get();
  a.cache.num_staging = num_staging;
  a.slot_mapping = d_slots.get();
  a.cu_query_starts = d_cu.get();
  a.context_lens = d_ctx.get();
  a.block_tables = d_tables.get();
  a.max_blocks_per_seq = max_blocks_per_seq;
  a.num_seqs = static_cast<int32_t>(seqs.size());
  a.num_tokens = num_tokens;
  a.num_heads = num_heads;
  a.max_query_len = max_query_len;
  a.max_context_len = max_context_len;
  a.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  a.window = window;
  return a;
}

size_t AttentionProblem::kv_bytes_read() const {
  size_t tokens = 0;
  for (const SeqSpec& s : seqs) tokens += s.context_len;
  return tokens * num_kv_heads * 2 * kv_row_bytes(format, head_dim);
}

std::vector<double> reference_rows(const AttentionProblem& p, const std::vector<int32_t>& tokens) {
  // One single-query sequence per requested token: its output depends only on its position
  // and its sequence's block table. Rows are handed to host threads one at a time (costs
  // differ by position), each thread calling the CPU reference on its own row.
  const size_t row_elems = static_cast<size_t>(p.num_heads) * p.head_dim;
  std::vector<float> q(tokens.size() * row_elems), out(q.size());
  std::vector<AttentionSequence> sequences;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int32_t t = tokens[i];
    const int32_t s = static_cast<int32_t>(std::upper_bound(p.cu_query_starts.begin(), p.cu_query_starts.end(), t) -
                                           p.cu_query_starts.begin()) -
                      1;
    const int32_t position = p.context_lens[s] - p.seqs[s].query_len + (t - p.cu_query_starts[s]);
    for (size_t e = 0; e < row_elems; ++e) q[i * row_elems + e] = from_half(p.q[t * row_elems + e]);
    AttentionSequence seq;
    seq.query_start = static_cast<int32_t>(i);
    seq.query_len = 1;
    seq.context_len = position + 1;
    seq.block_table = std::span<const int32_t>(p.block_tables.data() + static_cast<size_t>(s) * p.max_blocks_per_seq,
                                               (position + p.block_size) / p.block_size);
    if (kv_format_has_residual(p.format)) {
      seq.first_staged_block = p.first_staged[s];
      seq.staging = std::span<const int32_t>(
          p.staging_tables.data() + static_cast<size_t>(s) * p.max_blocks_per_seq + p.first_staged[s],
          seq.block_table.size() - p.first_staged[s]);
    }
    sequences.push_back(seq);
  }
  const bool quantized = p.format != KvFormat::kFp16;
  KvLayerView cache{
      quantized ? const_cast<uint8_t*>(p.kq.data()) : reinterpret_cast<uint8_t*>(const_cast<uint16_t*>(p.k.data())),
      quantized ? const_cast<uint8_t*>(p.vq.data()) : reinterpret_cast<uint8_t*>(const_cast<uint16_t*>(p.v.data())),
      p.num_blocks,
      p.block_size,
      p.num_kv_heads,
      p.head_dim,
      p.format};
  cache.staging_k = const_cast<uint16_t*>(p.sk.data());
  cache.staging_v = const_cast<uint16_t*>(p.sv.data());
  cache.num_staging = p.num_staging;
  const float scale = 1.0f / std::sqrt(static_cast<float>(p.head_dim));
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < sequences.size(); i = next++) {
      const AttentionBatch batch{q.data(),    out.data(), static_cast<int32_t>(tokens.size()),
                                 p.num_heads, scale,      std::span<const AttentionSequence>(&sequences[i], 1),
                                 p.window};
      cpu::paged_attention_reference(batch, cache);
    }
  };
  const size_t threads = std::min<size_t>(host_threads(), sequences.size());
  std::vector<std::thread> pool;
  for (size_t i = 1; i < threads; ++i) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  return std::vector<double>(out.begin(), out.end());
}

size_t host_threads() {
  return std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace folio::cuda::check
