// Tests for src/core: half/bfloat16 conversions against float64 references, Status and
// Expected, and ThreadPool::parallel_for's split of an index range.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <vector>

#include "core/fp16.h"
#include "core/status.h"
#include "core/thread_pool.h"

namespace folio {
namespace {

// ---- fp16 / bf16 ---------------------------------------------------------------------------

// Value of a half from its fields, in float64: (-1)^s * 2^(e-15) * 1.m, or 2^-24 * m subnormal.
double half_value_reference(uint16_t h) {
  const int sign = (h >> 15) ? -1 : 1;
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  if (exponent == 31) {
    return mantissa ? std::numeric_limits<double>::quiet_NaN() : sign * std::numeric_limits<double>::infinity();
  }
  if (exponent == 0) return sign * std::ldexp(static_cast<double>(mantissa), -24);
  return sign * std::ldexp(1.0 + mantissa / 1024.0, exponent - 15);
}

// Rounds |x| to a grid with `mantissa_bits` stored bits and smallest normal exponent
// `min_exponent`, ties to even, in float64 (exact for any float input). Overflow is left to
// the caller: the result may be one binade above the largest finite value.
double round_to_format_reference(double x, int mantissa_bits, int min_exponent) {
  const double magnitude = std::fabs(x);
  if (magnitude == 0) return x;
  int exponent = 0;
  std::frexp(magnitude, &exponent);  // magnitude = f * 2^exponent, f in [0.5, 1)
  const int unbiased = std::max(exponent - 1, min_exponent);
  const double quantum = std::ldexp(1.0, unbiased - mantissa_bits);
  const double rounded = std::nearbyint(magnitude / quantum) * quantum;  // ties to even
  return std::copysign(rounded, x);
}

double fp32_to_fp16_reference(float f) {
  const double rounded = round_to_format_reference(f, 10, -14);
  if (std::fabs(rounded) > 65504.0) return std::copysign(std::numeric_limits<double>::infinity(), f);
  return rounded;
}

double fp32_to_bf16_reference(float f) {
  const double rounded = round_to_format_reference(f, 7, -126);
  if (std::fabs(rounded) >= std::ldexp(1.0, 128)) {
    return std::copysign(std::numeric_limits<double>::infinity(), f);
  }
  return rounded;
}

bool is_half_nan(uint16_t h) {
  return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0;
}

TEST(Fp16, EveryHalfDecodesExactlyAndRoundTrips) {
  for (uint32_t bits = 0; bits <= 0xffffu; ++bits) {
    const auto h = static_cast<uint16_t>(bits);
    const float f = fp16_to_fp32(h);
    const double expected = half_value_reference(h);
    if (std::isnan(expected)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << bits;
      const uint16_t back = fp32_to_fp16(f);
      ASSERT_TRUE(is_half_nan(back)) << std::hex << bits;
      ASSERT_EQ(back & 0x8000u, h & 0x8000u) << std::hex << bits;
      continue;
    }
    ASSERT_EQ(static_cast<double>(f), expected) << std::hex << bits;
    ASSERT_EQ(std::signbit(f), (h & 0x8000u) != 0) << std::hex << bits;
    ASSERT_EQ(fp32_to_fp16(f), h) << std::hex << bits;  // includes -0, infinities, subnormals
  }
}

TEST(Fp16, TiesRoundToEven) {
  // The float exactly halfway between each pair of neighbouring finite halves must round to
  // the one with an even mantissa; just above or below it, to the nearer one.
  for (uint32_t bits = 0; bits < 0x7bffu; ++bits) {
    const double low = half_value_reference(static_cast<uint16_t>(bits));
    const double high = half_value_reference(static_cast<uint16_t>(bits + 1));
    const auto midpoint = static_cast<float>((low + high) / 2);  // exact: 11 bits < 24
    const uint16_t even = (bits & 1u) ? static_cast<uint16_t>(bits + 1) : static_cast<uint16_t>(bits);
    ASSERT_EQ(fp32_to_fp16(midpoint), even) << std::hex << bits;
    ASSERT_EQ(fp32_to_fp16(std::nextafter(midpoint, 0.0f)), bits) << std::hex << bits;
    ASSERT_EQ(fp32_to_fp16(std::nextafter(midpoint, 1e9f)), bits + 1) << std::hex << bits;
    ASSERT_EQ(fp32_to_fp16(-midpoint), even | 0x8000u) << std::hex << bits;
  }
  // Halfway between the largest half (65504) and the next step (65536) overflows.
  EXPECT_EQ(fp32_to_fp16(65519.996f), 0x7bffu);
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7c00u);
  EXPECT_EQ(fp32_to_fp16(-1e30f), 0xfc00u);
}

// Random floats: uniform over all bit patterns (mostly far outside half's range) and uniform
// over the exponents half can represent, where rounding is interesting.
std::vector<float> random_floats(uint32_t seed, int count, int min_exponent, int max_exponent) {
  std::mt19937 rng(seed);
  std::vector<float> out;
  std::uniform_int_distribution<uint32_t> any_bits;
  std::uniform_int_distribution<int> exponent(min_exponent, max_exponent);
  std::uniform_real_distribution<float> fraction(1.0f, 2.0f);
  for (int i = 0; i < count; ++i) {
    out.push_back(fp32_from_bits(any_bits(rng)));
    const float value = std::ldexp(fraction(rng), exponent(rng));
    out.push_back((any_bits(rng) & 1u) ? -value : value);
  }
  return out;
}

TEST(Fp16, RandomFloatsRoundLikeTheReference) {
  for (float f : random_floats(1234, 500000, -27, 17)) {
    const uint16_t h = fp32_to_fp16(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(is_half_nan(h));
      continue;
    }
    const double expected = fp32_to_fp16_reference(f);
    ASSERT_EQ(static_cast<double>(fp16_to_fp32(h)), expected) << "f = " << f;
    ASSERT_EQ(std::signbit(fp16_to_fp32(h)), std::signbit(f)) << "f = " << f;
  }
}

TEST(Bf16, EveryBfloatRoundTrips) {
  for (uint32_t bits = 0; bits <= 0xffffu; ++bits) {
    const auto b = static_cast<uint16_t>(bits);
    const float f = bf16_to_fp32(b);
    ASSERT_EQ(fp32_to_bits(f), bits << 16);
    const uint16_t back = fp32_to_bf16(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(bf16_to_fp32(back))) << std::hex << bits;  // stays NaN, not inf
      ASSERT_EQ(back & 0x8000u, b & 0x8000u);
    } else {
      ASSERT_EQ(back, b) << std::hex << bits;
    }
  }
}

TEST(Bf16, RandomFloatsRoundLikeTheReference) {
  for (float f : random_floats(99, 500000, -149, 127)) {
    const uint16_t b = fp32_to_bf16(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(bf16_to_fp32(b)));
      continue;
    }
    ASSERT_EQ(static_cast<double>(bf16_to_fp32(b)), fp32_to_bf16_reference(f)) << "f = " << f;
  }
  // Ties: 1 + 2^-8 sits halfway between 1 and 1 + 2^-7 and rounds to the even 1.
  EXPECT_EQ(fp32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80u);
  EXPECT_EQ(fp32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82u);
  EXPECT_EQ(fp32_to_bf16(std::numeric_limits<float>::max()), 0x7f80u);  // rounds up to inf
}

// ---- Status / Expected ---------------------------------------------------------------------

TEST(Status, OkAndError) {
  const Status ok = Status::ok();
  EXPECT_TRUE(ok.is_ok());
  EXPECT_TRUE(static_cast<bool>(ok));
  EXPECT_TRUE(ok.message().empty());
  EXPECT_TRUE(Status().is_ok());

  const Status error = Status::error("model.gguf: bad magic");
  EXPECT_FALSE(error.is_ok());
  EXPECT_FALSE(static_cast<bool>(error));
  EXPECT_EQ(error.message(), "model.gguf: bad magic");
  EXPECT_FALSE(Status::error("").is_ok());  // an empty message still means failure
}

Expected<int> parse_positive(int x) {
  if (x <= 0) return Status::error("not positive: " + std::to_string(x));
  return x;
}

TEST(Expected, HoldsAValueOrAStatus) {
  Expected<int> good = parse_positive(7);
  ASSERT_TRUE(good.has_value());
  EXPECT_TRUE(static_cast<bool>(good));
  EXPECT_EQ(*good, 7);
  EXPECT_EQ(good.value(), 7);
  EXPECT_TRUE(good.status().is_ok());
  EXPECT_TRUE(good.error().empty());

  Expected<int> bad = parse_positive(-2);
  EXPECT_FALSE(bad.has_value());
  EXPECT_FALSE(static_cast<bool>(bad));
  EXPECT_FALSE(bad.status().is_ok());
  EXPECT_EQ(bad.error(), "not positive: -2");
}

TEST(Expected, MoveOnlyValuesAndMemberAccess) {
  Expected<std::unique_ptr<std::string>> holder(std::make_unique<std::string>("weights"));
  ASSERT_TRUE(holder.has_value());
  EXPECT_EQ(holder->get()->size(), 7u);
  std::unique_ptr<std::string> taken = std::move(holder).value();
  EXPECT_EQ(*taken, "weights");

  Expected<std::string> text(std::string("abc"));
  text->append("d");
  EXPECT_EQ(*text, "abcd");
  const Expected<std::string>& constant = text;
  EXPECT_EQ(constant->size(), 4u);
}

// ---- ThreadPool ----------------------------------------------------------------------------

struct Chunk {
  int thread_index;
  int64_t begin;
  int64_t end;
};

// Runs parallel_for and checks every index in [0, n) was visited exactly once, by contiguous
// chunks aligned to `grain`, at most one chunk per thread.
void check_split(ThreadPool& pool, int64_t n, int64_t grain) {
  std::vector<std::atomic<int>> visits(static_cast<size_t>(std::max<int64_t>(n, 0)));
  std::mutex mutex;
  std::vector<Chunk> chunks;
  pool.parallel_for(
      n,
      [&](int thread_index, int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) visits[static_cast<size_t>(i)].fetch_add(1);
        std::lock_guard<std::mutex> lock(mutex);
        chunks.push_back({thread_index, begin, end});
      },
      grain);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(visits[static_cast<size_t>(i)].load(), 1) << "n=" << n << " grain=" << grain << " i=" << i;
  }
  std::set<int> threads_seen;
  for (const Chunk& chunk : chunks) {
    EXPECT_LT(chunk.begin, chunk.end);
    EXPECT_GE(chunk.thread_index, 0);
    EXPECT_LT(chunk.thread_index, pool.num_threads());
    EXPECT_TRUE(threads_seen.insert(chunk.thread_index).second) << "two chunks on one thread";
    EXPECT_EQ(chunk.begin % std::max<int64_t>(grain, 1), 0) << "chunk not aligned to grain";
  }
  if (n <= 0) {
    EXPECT_TRUE(chunks.empty());
  }
}

TEST(ThreadPool, CoversEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.num_threads(), threads);
    for (int64_t n : {-1, 0, 1, 2, 7, 8, 63, 64, 1000, 1001, 100003}) {
      for (int64_t grain : {0, 1, 3, 16, 64, 2000}) {
        check_split(pool, n, grain);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

// parallel_for_dynamic: every index once, in chunks of exactly `chunk` (the last may be
// shorter) starting at multiples of it, then a plain loop on the same pool still splits right.
TEST(ThreadPool, DynamicChunksCoverEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 5, 64, 1001, 100003}) {
      for (int64_t chunk : {1, 4, 7, 5000}) {
        std::vector<std::atomic<int>> visits(static_cast<size_t>(n));
        std::mutex mutex;
        std::vector<Chunk> chunks;
        pool.parallel_for_dynamic(
            n,
            [&](int thread_index, int64_t begin, int64_t end) {
              for (int64_t i = begin; i < end; ++i) visits[static_cast<size_t>(i)].fetch_add(1);
              std::lock_guard<std::mutex> lock(mutex);
              chunks.push_back({thread_index, begin, end});
            },
            chunk);
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(visits[static_cast<size_t>(i)].load(), 1) << n << " " << chunk;
        for (const Chunk& c : chunks) {
          EXPECT_EQ(c.begin % chunk, 0);
          EXPECT_TRUE(c.end - c.begin == chunk || c.end == n);
          EXPECT_LT(c.thread_index, pool.num_threads());
        }
        check_split(pool, n, 3);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

TEST(ThreadPool, DefaultSizeAndManyBackToBackLoops) {
  ThreadPool pool;
  EXPECT_GE(pool.num_threads(), 1);
  ThreadPool four(4);
  std::atomic<int64_t> total{0};
  for (int iteration = 0; iteration < 300; ++iteration) {
    four.parallel_for(37, [&](int, int64_t begin, int64_t end) { total += end - begin; });
  }
  EXPECT_EQ(total.load(), 300 * 37);
}

TEST(ThreadPool, UsesMoreThanOneThreadForLargeLoops) {
  ThreadPool pool(4);
  std::mutex mutex;
  std::set<int> threads_seen;
  pool.parallel_for(4096, [&](int thread_index, int64_t, int64_t) {
    std::lock_guard<std::mutex> lock(mutex);
    threads_seen.insert(thread_index);
  });
  EXPECT_EQ(threads_seen.size(), 4u);  // 4096 indices, grain 1: every thread gets a chunk
}

}  // namespace
}  // namespace folio
