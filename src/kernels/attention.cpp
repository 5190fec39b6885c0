// Causal GQA attention over a KvLayerView (include/plumb/kernels/kernels.h): the threading around
// scalar::AttendOneHead, one definition for the contiguous and the paged KV layout (docs/architecture.md,
// "Kernels").
#include <omp.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "plumb/core/error.h"
#include "plumb/kernels/kernels.h"
#include "plumb/kernels/row_dot.h"
#include "plumb/kernels/scalar.h"

namespace plumb::kernels {
namespace {

// scalar::Dot through the row dot of the CPU (AVX2 / AVX-512 / NEON): an F32 row's RowDot is defined as
// scalar::Dot, bit for bit, and a product is the same either way round, so the scores keep their bits while
// the q·k dots, a third of decode attention's time at context 512, run eight lanes at a time.
float VectorDot(const float* q, const float* k, int n) {
  return RowDot(GgmlType::F32, reinterpret_cast<const std::uint8_t*>(k), q, n);
}

// Floats of scratch one thread needs for these items: the longest score row plus one decoded K/V row.
std::int64_t ScratchPerThread(std::span<const AttentionItem> items) {
  std::int64_t most = 0;
  for (const AttentionItem& item : items) {
    most = std::max(most, static_cast<std::int64_t>(item.first_pos) + item.rows + item.kv.head_dim);
  }
  return most;
}

void CheckItem(const AttentionItem& item, std::size_t index, int n_heads) {
  const KvLayerView& kv = item.kv;
  if (item.rows < 0 || item.first_pos < 0) {
    throw MakeError("attention item ", index, ": rows ", item.rows, " and first_pos ", item.first_pos,
                    " must not be negative");
  }
  if (item.rows == 0) return;
  if (!item.q || !item.out || !kv.keys || !kv.values) {
    throw MakeError("attention item ", index, ": a query, output, key or value pointer is null");
  }
  if (kv.n_kv_heads <= 0 || n_heads % kv.n_kv_heads != 0 || kv.head_dim <= 0) {
    throw MakeError("attention item ", index, ": ", n_heads, " query heads cannot share ", kv.n_kv_heads,
                    " KV heads of dimension ", kv.head_dim);
  }
  if (kv.length < item.first_pos + item.rows) {
    throw MakeError("attention item ", index, ": rows at positions ", item.first_pos, "..",
                    item.first_pos + item.rows - 1, " need ", item.first_pos + item.rows,
                    " cached positions, the view holds ", kv.length);
  }
  if (kv.block_size <= 0 || static_cast<std::int64_t>(kv.block_table.size()) * kv.block_size <
                                static_cast<std::int64_t>(kv.length)) {
    throw MakeError("attention item ", index, ": block size ", kv.block_size, " and a block table of ",
                    kv.block_table.size(), " blocks cannot cover ", kv.length, " positions");
  }
}

}  // namespace

std::int64_t AttentionScratchFloats(int context, int head_dim) {
  return static_cast<std::int64_t>(NumThreads()) * (static_cast<std::int64_t>(context) + head_dim);
}

void CausalAttention(std::span<const AttentionItem> items, int n_heads, std::span<float> scratch) {
  if (n_heads <= 0) throw MakeError("attention: n_heads must be positive, got ", n_heads);
  // The unit of work is a (row, KV head) pair: the query heads that share one KV head run one after the
  // other, so the second and later read that head's keys and values from cache instead of memory (GQA
  // shares a KV head among n_heads / n_kv_heads query heads). Each query head is still one AttendOneHead.
  std::int64_t pairs = 0;  // (row, KV head) pairs of all items, in item order
  const auto pairs_of = [](const AttentionItem& item) {
    return static_cast<std::int64_t>(item.rows) * item.kv.n_kv_heads;
  };
  for (std::size_t i = 0; i < items.size(); ++i) {
    CheckItem(items[i], i, n_heads);
    pairs += pairs_of(items[i]);
  }
  const std::int64_t per_thread = ScratchPerThread(items);
  const std::int64_t needed = static_cast<std::int64_t>(NumThreads()) * per_thread;
  if (static_cast<std::int64_t>(scratch.size()) < needed) {
    throw MakeError("attention: scratch of ", scratch.size(), " floats, ", needed,
                    " needed (AttentionScratchFloats)");
  }
  // Pairs differ in cost (a later row or a longer sequence reads more positions), so they are handed out
  // dynamically; which thread computes a pair never changes its bits. Each thread walks the items with its
  // own cursor: OpenMP hands a thread its chunks in increasing order, so the cursor only moves forward.
#pragma omp parallel if (pairs > 1)
  {
    std::size_t item = 0;
    std::int64_t item_first_pair = 0;
    float* thread_scratch = scratch.data() + omp_get_thread_num() * per_thread;
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t pair = 0; pair < pairs; ++pair) {
      if (pair < item_first_pair) {  // never with OpenMP's dynamic schedule; kept so a change is safe
        item = 0;
        item_first_pair = 0;
      }
      while (pair >= item_first_pair + pairs_of(items[item])) {
        item_first_pair += pairs_of(items[item]);
        ++item;
      }
      const AttentionItem& it = items[item];
      const int n_kv_heads = it.kv.n_kv_heads;
      const int r = static_cast<int>((pair - item_first_pair) / n_kv_heads);
      const int kv_head = static_cast<int>((pair - item_first_pair) % n_kv_heads);
      const int group = n_heads / n_kv_heads;  // query heads per KV head
      for (int h = kv_head * group; h < (kv_head + 1) * group; ++h) {
        const std::int64_t offset = (static_cast<std::int64_t>(r) * n_heads + h) * it.kv.head_dim;
        scalar::AttendOneHead(it.q + offset, it.kv, kv_head, it.first_pos + r + 1, thread_scratch,
                              it.out + offset, VectorDot);
      }
    }
  }
}

void CausalAttention(const float* q, int rows, int first_pos, const KvLayerView& kv, int n_heads, float* out,
                     std::span<float> scratch) {
  const AttentionItem item{q, out, rows, first_pos, kv};
  CausalAttention(std::span<const AttentionItem>(&item, 1), n_heads, scratch);
}

}  // namespace plumb::kernels
