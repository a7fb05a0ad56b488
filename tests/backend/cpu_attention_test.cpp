// Paged attention (online softmax over cache blocks) against the float64 full-softmax
// reference run on the dequantized cache, on random varlen batches: prefill chunks and decode
// tokens mixed, scattered block tables, GQA ratios, block sizes, lengths from 1 to 8,192, and
// every cache format (fp16, fp8, int8, kivi4, kivi2), the quantized ones with an outlier channel
// in K. KIVI caches are built as a pass leaves them: each sequence's blocks from the one holding
// its first query token on are unsealed (fp16 in staging), the ones before the last also sealed,
// so rows see earlier blocks quantized and their own block in fp16 across residual boundaries.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>

#include "backend/cpu/cpu_attention.h"
#include "core/fp16.h"
#include "kv/kivi.h"
#include "kv/kv_quant.h"

namespace folio::cpu {
namespace {

struct Case {
  int32_t num_heads;
  int32_t num_kv_heads;
  int32_t head_dim;
  int32_t block_size;
  std::vector<std::pair<int32_t, int32_t>> sequences;  // (context_len, query_len)
  int32_t window = 0;                                  // sliding window; 0: none
};

void check_case(const Case& c, uint32_t seed, ThreadPool& pool, KvFormat format = KvFormat::kFp16) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  int32_t total_blocks = 0;
  int32_t total_queries = 0;
  for (auto [context, query] : c.sequences) {
    total_blocks += (context + c.block_size - 1) / c.block_size;
    total_queries += query;
  }
  total_blocks += 3;  // spare blocks nobody owns: garbage must not leak in
  const bool residual = kv_format_has_residual(format);
  const size_t bytes =
      static_cast<size_t>(total_blocks) * kv_block_bytes(format, c.block_size, c.num_kv_heads, c.head_dim);
  std::vector<uint8_t> k(bytes), v(bytes);
  // Residual formats: one staging block per block (the test can afford it), staging id = block id.
  const size_t staging_halves =
      residual ? static_cast<size_t>(total_blocks) * c.block_size * c.num_kv_heads * c.head_dim : 0;
  std::vector<uint16_t> staging_k(staging_halves), staging_v(staging_halves);
  KvLayerView cache{k.data(), v.data(), total_blocks, c.block_size, c.num_kv_heads, c.head_dim, format};
  if (residual) {
    cache.staging_k = staging_k.data();
    cache.staging_v = staging_v.data();
    cache.num_staging = total_blocks;
  }
  std::vector<float> row(static_cast<size_t>(c.head_dim));
  const int32_t outlier = static_cast<int32_t>(seed % static_cast<uint32_t>(c.head_dim));
  for (int64_t slot = 0; slot < static_cast<int64_t>(total_blocks) * c.block_size; ++slot) {
    for (int32_t h = 0; h < c.num_kv_heads; ++h) {
      for (float& x : row) x = normal(rng) * 2.0f;
      row[static_cast<size_t>(outlier)] *= 8.0f;  // a key channel far larger than the rest, as in real models
      if (residual) {
        const auto block = static_cast<int32_t>(slot / c.block_size);
        const auto in_block = static_cast<int32_t>(slot % c.block_size);
        for (int32_t d = 0; d < c.head_dim; ++d) cache.staging_row(0, block, in_block, h)[d] = fp32_to_fp16(row[d]);
        for (float& x : row) x = normal(rng);
        for (int32_t d = 0; d < c.head_dim; ++d) cache.staging_row(1, block, in_block, h)[d] = fp32_to_fp16(row[d]);
        continue;
      }
      kv_store_row(cache, 0, slot, h, row.data());
      for (float& x : row) x = normal(rng);
      kv_store_row(cache, 1, slot, h, row.data());
    }
  }

  // Hand out blocks in a shuffled order so tables are scattered.
  std::vector<int32_t> free_blocks(total_blocks);
  std::iota(free_blocks.begin(), free_blocks.end(), 0);
  std::shuffle(free_blocks.begin(), free_blocks.end(), rng);
  std::vector<std::vector<int32_t>> tables;
  std::vector<std::vector<int32_t>> stagings;
  std::vector<AttentionSequence> sequences;
  int32_t query_start = 0;
  size_t next_block = 0;
  for (auto [context, query] : c.sequences) {
    std::vector<int32_t> table((context + c.block_size - 1) / c.block_size);
    for (int32_t& b : table) b = free_blocks[next_block++];
    const int32_t first_staged = residual ? (context - query) / c.block_size : static_cast<int32_t>(table.size());
    std::vector<int32_t> staging;
    for (int32_t index = 0; index < static_cast<int32_t>(table.size()); ++index) {
      // Blocks before the last are whole: sealed (those from first_staged on keep staging too).
      if (residual && index + 1 < static_cast<int32_t>(table.size())) kv_seal_block(cache, table[index], table[index]);
      if (index >= first_staged) staging.push_back(table[index]);
    }
    if (c.window > 0) {
      // Blocks wholly before every query's window name a block that does not exist: the kernel
      // must not read them (the sliding-window allocator gives them back).
      const int32_t first_key = std::max(0, context - query - c.window + 1);
      for (int32_t index = 0; index < first_key / c.block_size; ++index) table[index] = 1 << 28;
    }
    tables.push_back(std::move(table));
    stagings.push_back(std::move(staging));
    sequences.push_back({query_start, query, context, {}, first_staged, {}});
    query_start += query;
  }
  for (size_t i = 0; i < sequences.size(); ++i) {
    sequences[i].block_table = tables[i];
    sequences[i].staging = stagings[i];
  }

  std::vector<float> q(static_cast<size_t>(total_queries) * c.num_heads * c.head_dim);
  for (float& x : q) x = normal(rng);
  std::vector<float> out(q.size(), std::nanf(""));  // poisoned: every element must be written
  std::vector<float> expected(q.size(), std::nanf(""));
  AttentionBatch batch{
      q.data(),  out.data(), total_queries, c.num_heads, 1.0f / std::sqrt(static_cast<float>(c.head_dim)),
      sequences, c.window};
  paged_attention(batch, cache, pool);
  batch.out = expected.data();
  paged_attention_reference(batch, cache);
  double max_err = 0.0;
  for (size_t i = 0; i < out.size(); ++i) {
    ASSERT_FALSE(std::isnan(out[i])) << "unwritten output element " << i;
    max_err = std::max(max_err, std::fabs(static_cast<double>(out[i]) - expected[i]));
  }
  EXPECT_LT(max_err, 2e-4) << kv_format_name(format) << " heads " << c.num_heads << "/" << c.num_kv_heads << " block "
                           << c.block_size << " window " << c.window;
}

TEST(CpuAttention, MatchesFloat64ReferenceOnRandomVarlenBatches) {
  ThreadPool pool(2);
  std::mt19937 rng(7);
  const int32_t gqa_shapes[][3] = {{4, 4, 32}, {8, 2, 64}, {9, 3, 64}, {6, 1, 16}, {16, 2, 128}};
  const int32_t block_sizes[] = {1, 8, 16, 32};
  for (int trial = 0; trial < 40; ++trial) {
    const auto& shape = gqa_shapes[trial % 5];
    Case c{shape[0], shape[1], shape[2], block_sizes[trial % 4], {}};
    const int num_sequences = 1 + static_cast<int>(rng() % 4);
    for (int s = 0; s < num_sequences; ++s) {
      const int32_t context = 1 + static_cast<int32_t>(rng() % 300);
      // Decode (1 token), a chunk, or the whole prompt.
      const int32_t kind = static_cast<int32_t>(rng() % 3);
      const int32_t query = kind == 0 ? 1 : kind == 1 ? 1 + static_cast<int32_t>(rng() % context) : context;
      c.sequences.push_back({context, query});
    }
    check_case(c, 100 + trial, pool);
    const KvFormat formats[] = {KvFormat::kFp8E4M3, KvFormat::kInt8, KvFormat::kBf16};
    check_case(c, 100 + trial, pool, formats[trial % 3]);
  }
}

TEST(CpuAttention, KiviMatchesFloat64ReferenceAcrossResidualBoundaries) {
  ThreadPool pool(2);
  std::mt19937 rng(11);
  const int32_t gqa_shapes[][3] = {{4, 4, 32}, {8, 2, 64}, {9, 3, 64}, {16, 2, 128}};
  const int32_t block_sizes[] = {32, 64, 128};
  for (int trial = 0; trial < 12; ++trial) {
    const auto& shape = gqa_shapes[trial % 4];
    Case c{shape[0], shape[1], shape[2], block_sizes[trial % 3], {}};
    const int num_sequences = 1 + static_cast<int>(rng() % 4);
    for (int s = 0; s < num_sequences; ++s) {
      const int32_t context = 1 + static_cast<int32_t>(rng() % 500);
      const int32_t kind = static_cast<int32_t>(rng() % 3);
      const int32_t query = kind == 0 ? 1 : kind == 1 ? 1 + static_cast<int32_t>(rng() % context) : context;
      c.sequences.push_back({context, query});
    }
    // Exact boundaries: a decode token opening a block, one closing it, a chunk ending on one.
    c.sequences.push_back({c.block_size + 1, 1});
    c.sequences.push_back({2 * c.block_size, 1});
    c.sequences.push_back({3 * c.block_size, c.block_size + 5});
    check_case(c, 300 + trial, pool, trial % 2 == 0 ? KvFormat::kKivi4 : KvFormat::kKivi2);
  }
}

TEST(CpuAttention, LongContexts) {
  ThreadPool pool(2);
  check_case({8, 2, 64, 16, {{8192, 1}, {4096, 3}}}, 1, pool);
  check_case({4, 4, 32, 32, {{2048, 40}}}, 2, pool);
  check_case({2, 1, 16, 16, {{1, 1}, {17, 17}, {33, 1}}}, 3, pool);
  for (KvFormat format : {KvFormat::kBf16, KvFormat::kFp8E4M3, KvFormat::kInt8}) {
    check_case({8, 2, 64, 16, {{4096, 1}, {1000, 3}}}, 4, pool, format);
    check_case({32, 8, 128, 16, {{600, 40}, {2049, 1}}}, 5, pool, format);
  }
  for (KvFormat format : {KvFormat::kKivi4, KvFormat::kKivi2}) {
    check_case({8, 2, 64, 128, {{4096, 1}, {1000, 3}}}, 6, pool, format);
    check_case({32, 8, 128, 32, {{600, 40}, {2049, 1}}}, 7, pool, format);
  }
}

// Windows of one key, inside a block, a block exactly, across blocks, and wider than the context,
// for prefill chunks and decodes (a tile's queries then start their windows in different
// blocks); Gemma 3's shape (head_dim 256, one KV head) among them.
TEST(CpuAttention, SlidingWindowMatchesFloat64Reference) {
  ThreadPool pool(2);
  std::mt19937 rng(13);
  const int32_t shapes[][3] = {{4, 1, 256}, {8, 2, 64}, {6, 3, 32}};
  const int32_t block_sizes[] = {1, 16, 32};
  for (int trial = 0; trial < 24; ++trial) {
    const auto& shape = shapes[trial % 3];
    const int32_t block = block_sizes[trial % 3 == 0 ? 1 : trial % 3];
    const int32_t windows[] = {1, 5, block - 1 > 0 ? block - 1 : 1, block, block + 3, 3 * block + 1, 100000};
    Case c{shape[0], shape[1], shape[2], block, {}, windows[trial % 7]};
    const int num_sequences = 1 + static_cast<int>(rng() % 4);
    for (int s = 0; s < num_sequences; ++s) {
      const int32_t context = 1 + static_cast<int32_t>(rng() % 400);
      const int32_t kind = static_cast<int32_t>(rng() % 3);
      const int32_t query = kind == 0 ? 1 : kind == 1 ? 1 + static_cast<int32_t>(rng() % context) : context;
      c.sequences.push_back({context, query});
    }
    check_case(c, 500 + trial, pool);
    if (block >= 32) check_case(c, 500 + trial, pool, trial % 2 == 0 ? KvFormat::kKivi4 : KvFormat::kInt8);
  }
  check_case({4, 1, 256, 16, {{2000, 1}, {1500, 37}, {700, 700}}, 512}, 9, pool);
}

// Long contexts are cut into fixed chunks whose softmax states are folded in order, so a row
// keeps its bits however the work was split: every row of a prefill chunk (one item walks its
// chunks) equals the same position decoded alone (its chunks spread over the threads), with 1,
// 2 and 5 threads, fp16 and a residual format, block sizes whose chunks hold 16 and 1 blocks,
// with and without a sliding window.
TEST(CpuAttention, RowsKeepTheirBitsHoweverTheContextIsSplit) {
  for (const auto& [format, block_size] :
       {std::pair{KvFormat::kFp16, 16}, std::pair{KvFormat::kFp8E4M3, 16}, std::pair{KvFormat::kFp16, 256}}) {
    const int32_t num_heads = 6, num_kv_heads = 2, head_dim = 64, context = 1100, query = 40;
    const int32_t blocks = (context + block_size - 1) / block_size;
    const size_t bytes = static_cast<size_t>(blocks) * kv_block_bytes(format, block_size, num_kv_heads, head_dim);
    std::vector<uint8_t> k(bytes), v(bytes);
    std::vector<uint16_t> staging(static_cast<size_t>(blocks) * block_size * num_kv_heads * head_dim);
    std::vector<uint16_t> staging_v(staging.size());
    KvLayerView cache{k.data(), v.data(), blocks, block_size, num_kv_heads, head_dim, format};
    const bool residual = kv_format_has_residual(format);
    if (residual) {
      cache.staging_k = staging.data();
      cache.staging_v = staging_v.data();
      cache.num_staging = blocks;
    }
    std::mt19937 rng(21);
    std::normal_distribution<float> normal(0.0f, 1.5f);
    std::vector<float> row(head_dim);
    for (int64_t slot = 0; slot < static_cast<int64_t>(blocks) * block_size; ++slot) {
      for (int32_t h = 0; h < num_kv_heads; ++h) {
        for (int which = 0; which < 2; ++which) {
          for (float& x : row) x = normal(rng);
          kv_store_row(cache, which, slot, h, row.data());
          if (residual) {
            uint16_t* dst = cache.staging_row(which, static_cast<int32_t>(slot / block_size),
                                              static_cast<int32_t>(slot % block_size), h);
            for (int32_t d = 0; d < head_dim; ++d) dst[d] = fp32_to_fp16(row[d]);
          }
        }
      }
    }
    std::vector<int32_t> table(blocks);
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), rng);
    std::vector<int32_t> staging_ids = table;  // staging id = block id; every block unsealed
    std::vector<float> q(static_cast<size_t>(query) * num_heads * head_dim);
    for (float& x : q) x = normal(rng);
    const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));

    // Without a window, and with one starting mid-span (blocks before it are never read).
    for (int32_t window : {0, 301}) {
      // The prefill chunk: positions context - query .. context - 1 in one batch, on one thread
      // (its 6 tiles are enough work for it: each walks its chunks in one item).
      std::vector<float> prefill(q.size(), std::nanf(""));
      std::vector<AttentionSequence> chunk{{0, query, context, table, 0, staging_ids}};
      ThreadPool one(1);
      paged_attention({q.data(), prefill.data(), query, num_heads, scale, chunk, window}, cache, one);
      for (int threads : {1, 2, 5}) {
        ThreadPool pool(threads);
        for (int32_t i = 0; i < query; i += 7) {
          const int32_t position = context - query + i;
          const size_t row_floats = static_cast<size_t>(num_heads) * head_dim;
          std::vector<float> decoded(row_floats, std::nanf(""));
          std::vector<AttentionSequence> alone{{0, 1, position + 1, table, 0, staging_ids}};
          paged_attention({q.data() + i * row_floats, decoded.data(), 1, num_heads, scale, alone, window}, cache, pool);
          for (size_t e = 0; e < row_floats; ++e) {
            ASSERT_EQ(std::bit_cast<uint32_t>(decoded[e]), std::bit_cast<uint32_t>(prefill[i * row_floats + e]))
                << kv_format_name(format) << " block " << block_size << " window " << window << " threads " << threads
                << " row " << i << " element " << e;
          }
        }
      }
    }
  }
}

// For the loader tests below: blocks 0 .. tested - 1 are the tested blocks and block `tested`
// every sequence's own; sequence b decodes one token at position block_size (its own block,
// staging block own_staging for residual formats) with a window of two keys, so it sees the last slot of block b
// and its own key, whose K (-1000 in every channel) scores it far below (weight exactly 0):
// each output row must equal that slot's value row as kv_load_row dequantizes it, bit for bit
// (NaN where it is NaN; +0 for -0, as a sum starting at +0 cannot keep the sign).
void expect_last_slot_values(const KvLayerView& cache, int32_t tested, int32_t own_staging, int32_t num_heads,
                             ThreadPool& pool) {
  const int32_t block_size = cache.block_size, head_dim = cache.head_dim;
  std::vector<std::vector<int32_t>> tables;
  for (int32_t b = 0; b < tested; ++b) tables.push_back({b, tested});
  const std::vector<int32_t> staging_ids{own_staging};
  std::vector<AttentionSequence> sequences;
  for (int32_t b = 0; b < tested; ++b) sequences.push_back({b, 1, block_size + 1, tables[b], 1, staging_ids});
  std::vector<float> q(static_cast<size_t>(tested) * num_heads * head_dim, 0.5f);
  std::vector<float> out(q.size(), 0.0f);
  paged_attention({q.data(), out.data(), tested, num_heads, 0.125f, sequences, 2}, cache, pool);
  std::vector<float> row(head_dim);
  for (int32_t b = 0; b < tested; ++b) {
    for (int32_t head = 0; head < num_heads; ++head) {
      const int64_t slot = static_cast<int64_t>(b) * block_size + block_size - 1;
      kv_load_row(cache, 1, slot, head / (num_heads / cache.num_kv_heads), row.data());
      for (int32_t d = 0; d < head_dim; ++d) {
        const float got = out[(static_cast<size_t>(b) * num_heads + head) * head_dim + d];
        const std::string where = std::string(kv_format_name(cache.format)) + " block " + std::to_string(block_size) +
                                  " block " + std::to_string(b) + " head " + std::to_string(head) + " dim " +
                                  std::to_string(d);
        if (std::isnan(row[d])) {
          EXPECT_TRUE(std::isnan(got)) << where;
        } else if (row[d] == 0.0f) {
          EXPECT_EQ(got, 0.0f) << where;
        } else {
          EXPECT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(row[d]))
              << where << ": " << got << " against " << row[d];
        }
      }
    }
  }
}

// The tile's block loaders dequantize as kv_load_row does, bit for bit (expect_last_slot_values),
// for every one of the 256 byte values of int8 and fp8 E4M3 (subnormals, -0, NaN included), in
// blocks of 16 slots (the vectorized loaders) and of 8 (the per-row path). fp8 reads a row's own
// block from staging, int8 from the pages.
TEST(CpuAttention, EightBitBlocksDequantizeExactlyAsKvLoadRow) {
  ThreadPool pool(2);
  for (KvFormat format : {KvFormat::kInt8, KvFormat::kFp8E4M3}) {
    for (int32_t block_size : {16, 8}) {
      const int32_t head_dim = 64, num_kv_heads = 2, num_heads = 4, tested = 4, own = tested;
      const size_t block_bytes = kv_block_bytes(format, block_size, num_kv_heads, head_dim);
      std::vector<uint8_t> k((tested + 1) * block_bytes), v((tested + 1) * block_bytes);
      std::vector<uint16_t> staging_k(static_cast<size_t>(block_size) * num_kv_heads * head_dim,
                                      fp32_to_fp16(-1000.0f));
      std::vector<uint16_t> staging_v(staging_k.size(), fp32_to_fp16(0.0f));
      KvLayerView cache{k.data(), v.data(), tested + 1, block_size, num_kv_heads, head_dim, format};
      cache.staging_k = staging_k.data();
      cache.staging_v = staging_v.data();
      cache.num_staging = 1;
      std::vector<float> row(head_dim);
      for (int64_t slot = 0; slot < int64_t{tested + 1} * block_size; ++slot) {
        for (int32_t h = 0; h < num_kv_heads; ++h) {
          for (int which = 0; which < 2; ++which) {
            for (int32_t d = 0; d < head_dim; ++d) {
              row[d] = slot / block_size == own && which == 0 ? -1000.0f : 0.1f * static_cast<float>((slot + d) % 11);
            }
            kv_store_row(cache, which, slot, h, row.data());
          }
        }
      }
      // Block b's last slot: V bytes 64 b .. 64 b + 63 in every head, scale 0.75.
      const size_t rows_per_block = static_cast<size_t>(block_size) * num_kv_heads;
      for (int32_t b = 0; b < tested; ++b) {
        for (int32_t h = 0; h < num_kv_heads; ++h) {
          const size_t at = static_cast<size_t>(block_size - 1) * num_kv_heads + h;
          uint8_t* values = v.data() + b * block_bytes + at * head_dim;
          for (int32_t d = 0; d < head_dim; ++d) values[d] = static_cast<uint8_t>(64 * b + d);
          const float scale = 0.75f;
          // Scales are [head][slot] after the block's values (kv_layer_view.h).
          const size_t scale_at = static_cast<size_t>(h) * block_size + block_size - 1;
          std::memcpy(v.data() + b * block_bytes + rows_per_block * head_dim + scale_at * sizeof(float), &scale,
                      sizeof scale);
        }
      }
      expect_last_slot_values(cache, tested, 0, num_heads, pool);
    }
  }
}

// The same for KIVI's sealed blocks (the tile unpacks their codes itself where there is
// AVX-512): kivi4 and kivi2, blocks of 32 and 64.
TEST(CpuAttention, KiviBlocksDequantizeExactlyAsKvLoadRow) {
  ThreadPool pool(2);
  for (KvFormat format : {KvFormat::kKivi4, KvFormat::kKivi2}) {
    for (int32_t block_size : {32, 64}) {
      const int32_t head_dim = 64, num_kv_heads = 2, num_heads = 4, tested = 4, own = tested;
      const size_t block_bytes = kv_block_bytes(format, block_size, num_kv_heads, head_dim);
      std::vector<uint8_t> k((tested + 1) * block_bytes), v((tested + 1) * block_bytes);
      std::vector<uint16_t> staging_k(static_cast<size_t>(tested + 1) * block_size * num_kv_heads * head_dim);
      std::vector<uint16_t> staging_v(staging_k.size());
      KvLayerView cache{k.data(), v.data(), tested + 1, block_size, num_kv_heads, head_dim, format};
      cache.staging_k = staging_k.data();
      cache.staging_v = staging_v.data();
      cache.num_staging = tested + 1;
      std::mt19937 rng(17);
      std::normal_distribution<float> normal(0.0f, 2.0f);
      for (int32_t b = 0; b <= tested; ++b) {
        for (int32_t t = 0; t < block_size; ++t) {
          for (int32_t h = 0; h < num_kv_heads; ++h) {
            for (int32_t d = 0; d < head_dim; ++d) {
              cache.staging_row(0, b, t, h)[d] = fp32_to_fp16(b == own ? -1000.0f : normal(rng));
              cache.staging_row(1, b, t, h)[d] = fp32_to_fp16(normal(rng));
            }
          }
        }
        if (b < tested) kv_seal_block(cache, b, b);
      }
      expect_last_slot_values(cache, tested, own, num_heads, pool);
    }
  }
}

}  // namespace
}  // namespace folio::cpu
