// kernels::CausalAttention over KvLayerViews: the paged layout (every block size 1 .. 256, shuffled block
// tables, shared prefix blocks, lengths not a multiple of the block size) gives bitwise what the contiguous
// layout gives, for decode (one row), prefill (rows from position 0) and chunked prefill (rows after a
// cached prefix), GQA ratios 1, 3 and 8, 1 to 3 threads, alone or in a batch with other sequences, with and
// without a sliding window. Every slot the pool holds beyond a sequence's length (the tail of its last block,
// every unreferenced block) is NaN, so a kernel that reads past the length fails; so are the positions before
// a window where a test says they are never read.
//
// f16 / bf16 / fp8 caches: the kernel's definition is attention over the decoded cache, so an f16 cache
// must give bitwise what an f32 cache holding the decoded values gives (values decoded here with the
// formats' conversions, not DecodeKv); and both within the FP32 error bound of a double-precision
// attention over those decoded values (the bound of tests/kernels/kernels_test.cpp, derived there).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "plumb/core/error.h"
#include "plumb/formats/dtype.h"
#include "plumb/formats/fp8.h"
#include "plumb/kernels/kernels.h"
#include "plumb/kv/contiguous_kv_cache.h"
#include "support/kv_views.h"
#include "support/naive.h"

namespace plumb {
namespace {

using testing::Attend;
using testing::ContiguousF32View;
using testing::ExpectSameBits;
using testing::Gamma;
using testing::kUnitRoundoff;
using testing::PagedTestKv;
using testing::RandomVector;
using testing::TestBlockPool;

struct Gqa {
  int n_heads, n_kv_heads, head_dim;
};
// Query heads per KV head 1, 3 and 8; head dims off the 8-lane width.
const Gqa kGqa[] = {{4, 4, 10}, {6, 2, 16}, {8, 1, 18}};

// Keys and values of `length` positions, each [length][n_kv_heads · head_dim] (what the model writes).
struct KvValues {
  std::vector<float> keys, values;
  KvValues(int length, int kv_dim, std::uint32_t seed)
      : keys(RandomVector(static_cast<std::size_t>(length) * kv_dim, seed)),
        values(RandomVector(static_cast<std::size_t>(length) * kv_dim, seed + 1)) {}
  const float* K(int pos, int kv_dim) const { return keys.data() + static_cast<std::size_t>(pos) * kv_dim; }
  const float* V(int pos, int kv_dim) const { return values.data() + static_cast<std::size_t>(pos) * kv_dim; }
};

// Appends positions [from, to) of `kv_values` to a one-layer sequence.
void Append(KvSequence& kv, const KvValues& kv_values, int from, int to) {
  const int kv_dim = kv.n_kv_heads() * kv.head_dim();
  ASSERT_EQ(kv.length(), from);
  kv.Reserve(to - from);
  for (int p = from; p < to; ++p) kv.Write(0, p, kv_values.K(p, kv_dim), kv_values.V(p, kv_dim));
  kv.Commit(std::vector<int>(to - from, 0));
}

int BlocksFor(int length, int block_size) {
  return (length + block_size - 1) / block_size;
}

class PagedBlockSizes : public ::testing::TestWithParam<std::tuple<int, int>> {
 protected:
  void TearDown() override { kernels::SetNumThreads(0); }
};

TEST_P(PagedBlockSizes, PagedIsBitwiseContiguousForDecodePrefillAndChunks) {
  const int block_size = std::get<0>(GetParam());
  const Gqa g = kGqa[std::get<1>(GetParam())];
  const int kv_dim = g.n_kv_heads * g.head_dim;
  const int length = 2 * block_size + 3;  // a partial last block (for block_size > 1)
  const KvValues kv_values(length, kv_dim, static_cast<std::uint32_t>(block_size));

  ContiguousKvCache contiguous(1, g.n_kv_heads, length + 7, g.head_dim);
  // Twice the blocks the sequence needs: the rest stay unreferenced (and NaN).
  TestBlockPool pool(1, g.n_kv_heads, g.head_dim, block_size, 2 * BlocksFor(length, block_size) + 1,
                     KvDtype::kF32);
  PagedTestKv paged(pool, length + 7);
  Append(contiguous, kv_values, 0, length);
  Append(paged, kv_values, 0, length);

  struct Case {
    const char* name;
    int rows, first_pos, window;
  };
  const int chunk = std::min(5, length);
  const int window = block_size + 1;  // starts off a block boundary for every block size but 1
  for (const Case& c :
       {Case{"decode", 1, length - 1, 0}, Case{"prefill", length, 0, 0},
        Case{"chunked prefill", chunk, length - chunk, 0}, Case{"windowed decode", 1, length - 1, window},
        Case{"windowed prefill", length, 0, window}, Case{"windowed chunk", chunk, length - chunk, window}}) {
    const std::vector<float> q = RandomVector(static_cast<std::size_t>(c.rows) * g.n_heads * g.head_dim, 99);
    std::vector<float> reference;
    for (int threads : {1, 2}) {
      kernels::SetNumThreads(threads);
      const std::vector<float> from_contiguous =
          Attend(q, c.rows, c.first_pos, contiguous.Layer(0), g.n_heads, c.window);
      const std::vector<float> from_paged =
          Attend(q, c.rows, c.first_pos, paged.Layer(0), g.n_heads, c.window);
      ExpectSameBits(from_paged, from_contiguous, std::string(c.name) + " paged vs contiguous");
      if (threads == 1) reference = from_contiguous;
      ExpectSameBits(from_contiguous, reference, std::string(c.name) + " 2 threads vs 1");
    }
  }
}

TEST_P(PagedBlockSizes, SharedPrefixBlocksGiveEachSequenceItsContiguousResult) {
  const int block_size = std::get<0>(GetParam());
  const Gqa g = kGqa[std::get<1>(GetParam())];
  const int kv_dim = g.n_kv_heads * g.head_dim;
  // A holds 3½ blocks (+1); B shares A's first two full blocks, then continues with its own positions.
  const int shared_blocks = 2, length_a = 3 * block_size + block_size / 2 + 1;
  const int shared = shared_blocks * block_size, length_b = shared + block_size + 2;
  const KvValues values_a(length_a, kv_dim, 7), own_b(length_b, kv_dim, 8);
  KvValues values_b = own_b;  // A's prefix, then B's own positions
  std::copy(values_a.keys.begin(), values_a.keys.begin() + shared * kv_dim, values_b.keys.begin());
  std::copy(values_a.values.begin(), values_a.values.begin() + shared * kv_dim, values_b.values.begin());

  TestBlockPool pool(1, g.n_kv_heads, g.head_dim, block_size,
                     BlocksFor(length_a, block_size) + BlocksFor(length_b, block_size) + 2, KvDtype::kF32);
  PagedTestKv a(pool, 4 * length_a), b(pool, 4 * length_a);
  Append(a, values_a, 0, length_a);
  b.ShareBlocksOf(a, shared_blocks);
  Append(b, values_b, shared, length_b);
  ASSERT_TRUE(std::equal(b.table().begin(), b.table().begin() + shared_blocks, a.table().begin()));

  ContiguousKvCache contiguous_a(1, g.n_kv_heads, length_a, g.head_dim);
  ContiguousKvCache contiguous_b(1, g.n_kv_heads, length_b, g.head_dim);
  Append(contiguous_a, values_a, 0, length_a);
  Append(contiguous_b, values_b, 0, length_b);

  // B's own rows (a chunk after the shared prefix) and its last row; A's last row after B wrote.
  const int rows_b = length_b - shared;
  const std::vector<float> q_b = RandomVector(static_cast<std::size_t>(rows_b) * g.n_heads * g.head_dim, 5);
  ExpectSameBits(Attend(q_b, rows_b, shared, b.Layer(0), g.n_heads),
                 Attend(q_b, rows_b, shared, contiguous_b.Layer(0), g.n_heads), "B after the shared prefix");
  const std::vector<float> q_a = RandomVector(static_cast<std::size_t>(g.n_heads) * g.head_dim, 6);
  ExpectSameBits(Attend(q_a, 1, length_a - 1, a.Layer(0), g.n_heads),
                 Attend(q_a, 1, length_a - 1, contiguous_a.Layer(0), g.n_heads), "A decode");
}

INSTANTIATE_TEST_SUITE_P(EveryBlockSize, PagedBlockSizes,
                         ::testing::Combine(::testing::Values(1, 2, 4, 8, 16, 32, 64, 128, 256),
                                            ::testing::Range(0, static_cast<int>(std::size(kGqa)))),
                         [](const ::testing::TestParamInfo<std::tuple<int, int>>& p) {
                           const Gqa g = kGqa[std::get<1>(p.param)];
                           return "block" + std::to_string(std::get<0>(p.param)) + "_gqa" +
                                  std::to_string(g.n_heads / g.n_kv_heads);
                         });

TEST(BatchedAttention, EachItemIsBitwiseItsSingleCallWhateverTheBatchAndThreads) {
  const Gqa g = kGqa[1];
  const int kv_dim = g.n_kv_heads * g.head_dim, q_dim = g.n_heads * g.head_dim;
  // Three sequences: a paged one taking a prefill chunk, a paged one decoding, a contiguous one decoding.
  TestBlockPool pool(1, g.n_kv_heads, g.head_dim, 4, 64, KvDtype::kF32);
  PagedTestKv prefilling(pool, 100), decoding(pool, 100);
  ContiguousKvCache contiguous(1, g.n_kv_heads, 100, g.head_dim);
  const KvValues v1(30, kv_dim, 11), v2(23, kv_dim, 12), v3(41, kv_dim, 13);
  Append(prefilling, v1, 0, 30);
  Append(decoding, v2, 0, 23);
  Append(contiguous, v3, 0, 41);
  struct Seq {
    KvSequence* kv;
    int rows, first_pos;
  };
  const Seq seqs[] = {{&prefilling, 9, 21}, {&decoding, 1, 22}, {&contiguous, 1, 40}};
  std::vector<std::vector<float>> qs, alone;
  for (const Seq& s : seqs) {
    qs.push_back(RandomVector(static_cast<std::size_t>(s.rows) * q_dim, 20 + s.rows));
    kernels::SetNumThreads(1);
    alone.push_back(Attend(qs.back(), s.rows, s.first_pos, s.kv->Layer(0), g.n_heads));
  }
  for (int threads : {1, 2, 3}) {
    kernels::SetNumThreads(threads);
    std::vector<std::vector<float>> outs;
    std::vector<kernels::AttentionItem> items;
    for (std::size_t i = 0; i < std::size(seqs); ++i) outs.emplace_back(qs[i].size(), -1.0f);
    for (std::size_t i = 0; i < std::size(seqs); ++i) {
      items.push_back({qs[i].data(), outs[i].data(), seqs[i].rows, seqs[i].first_pos, seqs[i].kv->Layer(0)});
    }
    kernels::CausalAttention(items, g.n_heads);
    for (std::size_t i = 0; i < std::size(seqs); ++i) {
      ExpectSameBits(outs[i], alone[i],
                     "item " + std::to_string(i) + ", " + std::to_string(threads) + " threads");
    }
  }
  kernels::SetNumThreads(0);
}

// ---- KV dtypes ------------------------------------------------------------------------------------------

// x as the cache holds it, decoded: the formats' round trips, written out here rather than via DecodeKv.
float DecodedHere(KvDtype dtype, float x, float scale) {
  switch (dtype) {
    case KvDtype::kF32:
      return x;
    case KvDtype::kF16:
      return F16ToF32(F32ToF16(x));
    case KvDtype::kBF16:
      return BF16ToF32(F32ToBF16(x));
    case KvDtype::kFp8E4M3:
      return Fp8ToF32(F32ToFp8(x / scale, Fp8Format::kE4M3, Fp8Overflow::kSaturate), Fp8Format::kE4M3) *
             scale;
    case KvDtype::kFp8E5M2:
      return Fp8ToF32(F32ToFp8(x / scale, Fp8Format::kE5M2, Fp8Overflow::kSaturate), Fp8Format::kE5M2) *
             scale;
  }
  return NAN;
}

class KvDtypes : public ::testing::TestWithParam<std::tuple<KvDtype, int>> {};

TEST_P(KvDtypes, AttentionIsBitwiseAttentionOverTheDecodedValuesAndWithinTheBoundOfDouble) {
  const KvDtype dtype = std::get<0>(GetParam());
  const int block_size = std::get<1>(GetParam());
  const Gqa g = kGqa[1];
  const int kv_dim = g.n_kv_heads * g.head_dim, length = 3 * block_size + 5;
  // Per-head FP8 scales (distinct per head, so a kernel using the wrong head's scale fails).
  std::vector<float> k_scales, v_scales;
  if (IsFp8(dtype)) {
    for (int h = 0; h < g.n_kv_heads; ++h) {
      k_scales.push_back(0.02f * static_cast<float>(h + 1));
      v_scales.push_back(0.03f / static_cast<float>(h + 1));
    }
  }
  const KvValues kv_values(length, kv_dim, 31);
  TestBlockPool pool(1, g.n_kv_heads, g.head_dim, block_size, 2 * BlocksFor(length, block_size) + 1, dtype,
                     k_scales, v_scales);
  PagedTestKv paged(pool, length);
  ContiguousKvCache contiguous(1, g.n_kv_heads, length, g.head_dim, dtype, k_scales, v_scales);
  Append(paged, kv_values, 0, length);
  Append(contiguous, kv_values, 0, length);

  // The decoded cache as an f32 one: [kv_head][position][head_dim].
  KvValues decoded = kv_values;
  for (int p = 0; p < length; ++p) {
    for (int h = 0; h < g.n_kv_heads; ++h) {
      for (int j = 0; j < g.head_dim; ++j) {
        const std::size_t at = static_cast<std::size_t>(p) * kv_dim + h * g.head_dim + j;
        decoded.keys[at] = DecodedHere(dtype, kv_values.keys[at], k_scales.empty() ? 1.0f : k_scales[h]);
        decoded.values[at] = DecodedHere(dtype, kv_values.values[at], v_scales.empty() ? 1.0f : v_scales[h]);
      }
    }
  }
  ContiguousKvCache decoded_f32(1, g.n_kv_heads, length, g.head_dim);
  Append(decoded_f32, decoded, 0, length);

  const int rows = 6, first_pos = length - rows;
  const std::vector<float> q = RandomVector(static_cast<std::size_t>(rows) * g.n_heads * g.head_dim, 32);
  // Unwindowed, and a window of 7 (the rows' first positions inside a block, moving by one per row).
  for (const int window : {0, 7}) {
    const std::string what = "window " + std::to_string(window) + ": ";
    const std::vector<float> from_paged = Attend(q, rows, first_pos, paged.Layer(0), g.n_heads, window);
    ExpectSameBits(from_paged, Attend(q, rows, first_pos, contiguous.Layer(0), g.n_heads, window),
                   what + "paged vs contiguous");
    ExpectSameBits(from_paged, Attend(q, rows, first_pos, decoded_f32.Layer(0), g.n_heads, window),
                   what + "vs f32 over the decoded values");

    // Against double precision over the decoded values of the row's positions [begin, p], per head in the
    // [position][head_dim] layout.
    const int group = g.n_heads / g.n_kv_heads;
    for (int r = 0; r < rows; ++r) {
      for (int h = 0; h < g.n_heads; ++h) {
        const int kv_head = h / group, p_row = first_pos + r;
        const int begin = window > 0 ? std::max(0, p_row - window + 1) : 0, n_ctx = p_row + 1 - begin;
        std::vector<float> keys, values;
        for (int p = begin; p <= p_row; ++p) {
          const std::size_t at = static_cast<std::size_t>(p) * kv_dim + kv_head * g.head_dim;
          keys.insert(keys.end(), decoded.keys.begin() + at, decoded.keys.begin() + at + g.head_dim);
          values.insert(values.end(), decoded.values.begin() + at, decoded.values.begin() + at + g.head_dim);
        }
        const std::size_t at = (static_cast<std::size_t>(r) * g.n_heads + h) * g.head_dim;
        const std::vector<double> ref =
            testing::NaiveAttention(q.data() + at, keys.data(), values.data(), g.head_dim, n_ctx);
        // kernels_test.cpp's bound (inputs O(1); decoded values stay O(1)).
        const double bound = 4 * (Gamma(g.head_dim) * g.head_dim + Gamma(n_ctx) + 8 * kUnitRoundoff) * 4.0;
        for (int j = 0; j < g.head_dim; ++j) {
          ASSERT_NEAR(from_paged[at + j], ref[j], bound) << what << r << " " << h;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(LowPrecision, KvDtypes,
                         ::testing::Combine(::testing::Values(KvDtype::kF16, KvDtype::kBF16,
                                                              KvDtype::kFp8E4M3, KvDtype::kFp8E5M2),
                                            ::testing::Values(1, 16)),
                         [](const ::testing::TestParamInfo<std::tuple<KvDtype, int>>& p) {
                           std::string name(KvDtypeName(std::get<0>(p.param)));
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name + "_block" + std::to_string(std::get<1>(p.param));
                         });

// ---- sliding windows ------------------------------------------------------------------------------------

// A windowed row reads only its window: with every position before the chunk's first window NaN (keys and
// values), `rows` rows ending at the last position, each with window W, give bitwise the same rows over a
// cache that holds only positions [first window's start, length) (attention depends on the keys and values,
// not on where they sit). One sequence (the phases of attention.cpp) and sixteen in a batch (the split by
// (row, KV heads) of attention_by_head.cpp), f32 and f16, blocks of 16 (the windows start inside one), 1 and
// 2 threads.
TEST(SlidingWindow, PositionsBeforeTheWindowAreNeverRead) {
  const Gqa g = kGqa[1];
  const int kv_dim = g.n_kv_heads * g.head_dim, q_dim = g.n_heads * g.head_dim;
  const int length = 150, window = 37;
  for (const KvDtype dtype : {KvDtype::kF32, KvDtype::kF16}) {
    for (const int rows : {1, 3}) {
      const int kept = window + rows - 1;  // positions [length − kept, length) are some row's window
      KvValues kv_values(length, kv_dim, 41);
      const KvValues window_values(kept, kv_dim, 42);
      for (int p = 0; p < length; ++p) {
        for (int e = 0; e < kv_dim; ++e) {
          const std::size_t at = static_cast<std::size_t>(p) * kv_dim + e;
          const std::size_t from = static_cast<std::size_t>(p - (length - kept)) * kv_dim + e;
          kv_values.keys[at] = p < length - kept ? NAN : window_values.keys[from];
          kv_values.values[at] = p < length - kept ? NAN : window_values.values[from];
        }
      }
      TestBlockPool pool(1, g.n_kv_heads, g.head_dim, 16, 2 * BlocksFor(length, 16), dtype);
      PagedTestKv paged(pool, length);
      ContiguousKvCache only_window(1, g.n_kv_heads, kept, g.head_dim, dtype);
      Append(paged, kv_values, 0, length);
      Append(only_window, window_values, 0, kept);

      constexpr int kBatch = 16;
      const std::vector<float> q = RandomVector(static_cast<std::size_t>(kBatch) * rows * q_dim, 43);
      for (int threads : {1, 2}) {
        kernels::SetNumThreads(threads);
        const std::string what = std::string(KvDtypeName(dtype)) + ", " + std::to_string(rows) + " rows, " +
                                 std::to_string(threads) + " threads";
        std::vector<std::vector<float>> outs(kBatch,
                                             std::vector<float>(static_cast<std::size_t>(rows) * q_dim));
        std::vector<kernels::AttentionItem> items;
        for (int b = 0; b < kBatch; ++b) {
          items.push_back({q.data() + static_cast<std::size_t>(b) * rows * q_dim, outs[b].data(), rows,
                           length - rows, paged.Layer(0), window});
        }
        for (const std::size_t batch : {std::size_t{1}, std::size_t{kBatch}}) {
          kernels::CausalAttention(std::span(items.data(), batch), g.n_heads);
          for (std::size_t b = 0; b < batch; ++b) {
            const std::vector<float> qb(q.begin() + static_cast<std::ptrdiff_t>(b * rows * q_dim),
                                        q.begin() + static_cast<std::ptrdiff_t>((b + 1) * rows * q_dim));
            ExpectSameBits(outs[b], Attend(qb, rows, kept - rows, only_window.Layer(0), g.n_heads, window),
                           what + ", batch " + std::to_string(batch) + ", item " + std::to_string(b));
          }
        }
      }
    }
  }
  kernels::SetNumThreads(0);
}

// ---- bad input ------------------------------------------------------------------------------------------

TEST(AttentionErrors, BadViewsThrowNamingTheValue) {
  std::vector<float> keys(2 * 8 * 4, 0.5f), values = keys, q(3 * 4 * 4, 0.1f), out(q.size());
  const KvLayerView view = ContiguousF32View(keys.data(), values.data(), 2, 8, 4, 5);
  const auto message = [&](auto&& call) -> std::string {
    try {
      call();
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  // Rows 3..5 need 6 positions; the view holds 5.
  EXPECT_NE(message([&] { kernels::CausalAttention(q.data(), 3, 3, view, 4, out.data()); }).find("holds 5"),
            std::string::npos);
  EXPECT_NE(message([&] { kernels::CausalAttention(q.data(), 1, 0, view, 3, out.data()); }).find("3 query"),
            std::string::npos);
  KvLayerView short_table = view;
  short_table.block_size = 2;
  short_table.block_stride = 8;
  EXPECT_NE(message([&] {
              kernels::CausalAttention(q.data(), 1, 0, short_table, 4, out.data());
            }).find("block table of 1"),
            std::string::npos);
  const std::vector<kernels::AttentionItem> items = {{q.data(), out.data(), 1, 0, view},
                                                     {q.data(), out.data(), 1, 0, view, -3}};
  EXPECT_NE(message([&] { kernels::CausalAttention(items, 4); })
                .find("attention item 1: rows 1, first_pos 0 and "
                      "window -3 must not be negative"),
            std::string::npos);
}

}  // namespace
}  // namespace plumb
