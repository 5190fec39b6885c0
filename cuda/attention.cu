// Attention decode and prefill, and reshape_and_cache (docs/fixtures.md "attention_decode",
// "attention_prefill", "reshape_and_cache"; the cache's bytes: docs/kv-cache.md "Layout" and "Element
// types").
#include "common.cuh"

namespace plumb::cuda {
namespace {

// Sequence b's length and the physical block of its logical block i, through the view its layout uses
// (kernels.h, PageTable): FlashInfer's indptr / indices / last_page_len for NHD, vLLM's block table and
// seq_lens for the vLLM and contiguous layouts.
__device__ int SeqLen(const PagedKv& kv, const PageTable& pages, int b) {
  if (kv.layout != KvLayout::kNhd) return pages.seq_lens[b];
  const int n_pages = pages.kv_indptr[b + 1] - pages.kv_indptr[b];
  return n_pages == 0 ? 0 : (n_pages - 1) * kv.block_size + pages.kv_last_page_len[b];
}
__device__ std::int64_t PhysicalBlock(const PagedKv& kv, const PageTable& pages, int b, int i) {
  if (kv.layout != KvLayout::kNhd)
    return pages.block_tables[static_cast<std::int64_t>(b) * pages.max_blocks_per_seq + i];
  return pages.kv_indices[pages.kv_indptr[b] + i];
}

// grid (n_heads, batch · rows): block (h, b · rows + r) computes query head h of query row r of sequence b,
// which sits at position pos = seq_len − rows + r (a decode: rows = 1, pos = seq_len − 1), the definition
// of include/plumb/kernels/scalar.h AttendOneHead over the decoded cache, positions t in [begin, pos]:
//   scores[t] = Dot(q, k_t) · softmax_scale    one warp per position t, lanes over head_dim
//   p = softmax(scores)                        max, exp, sum, then divide, each over the block
//   out[j] = Σ_t p[t] · v_t[j]                 one thread per j, t ascending
// begin = end − window with a sliding window shorter than end = pos + 1 (the query sees t with
// pos − t < window), else 0: the causal mask aligned bottom-right, the last query row seeing the whole
// sequence. Only positions t ≤ pos < seq_len are read, so a NaN-poisoned slot past the sequence's end never
// is. The scores live in global scratch [batch · rows][n_heads][max_seq_len], indexed by t, so a sequence
// may be as long as memory allows.
__global__ void AttentionKernel(PagedKv kv, PageTable pages, const float* q, float* out, float* scores,
                                int rows, int n_heads, int max_seq_len, float softmax_scale, int window,
                                Precision p) {
  extern __shared__ float q_shared[];  // [head_dim]
  __shared__ float scratch[kThreads / 32];
  const int h = blockIdx.x, b = static_cast<int>(blockIdx.y) / rows, r = static_cast<int>(blockIdx.y) % rows;
  const int d = kv.head_dim;
  const int kv_head = h / (n_heads / kv.n_kv_heads);
  const int len = SeqLen(kv, pages, b) - rows + r + 1;  // the positions up to this query's own
  const int begin = window > 0 && len > window ? len - window : 0;
  const std::int64_t qo = (static_cast<std::int64_t>(blockIdx.y) * n_heads + h) * d;
  float* s = scores + (static_cast<std::int64_t>(blockIdx.y) * n_heads + h) * max_seq_len;
  const float k_scale = kv.k_scale[kv_head], v_scale = kv.v_scale[kv_head];
  for (int j = threadIdx.x; j < d; j += kThreads) q_shared[j] = Rounded(q[qo + j], p);
  __syncthreads();

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int t = begin + warp; t < len; t += kThreads / 32) {
    const std::int64_t block = PhysicalBlock(kv, pages, b, t / kv.block_size);
    float partial = 0.0f;
    for (int j = lane; j < d; j += 32)
      partial +=
          q_shared[j] *
          Rounded(LoadKv(kv.k, kv.dtype, KvIndex(kv, true, block, t % kv.block_size, kv_head, j), k_scale),
                  p);
    partial = WarpSum(partial);
    if (lane == 0) s[t] = partial * softmax_scale;
  }
  __syncthreads();  // the scores (global memory) are visible to the whole block after this

  float m = -INFINITY;
  for (int t = begin + threadIdx.x; t < len; t += kThreads) m = fmaxf(m, s[t]);
  m = BlockMax(m, scratch);
  float sum = 0.0f;
  for (int t = begin + threadIdx.x; t < len; t += kThreads) {
    s[t] = expf(s[t] - m);
    sum += s[t];
  }
  sum = BlockSum(sum, scratch);
  for (int t = begin + threadIdx.x; t < len; t += kThreads) s[t] = s[t] / sum;
  __syncthreads();

  for (int j = threadIdx.x; j < d; j += kThreads) {
    float acc = 0.0f;
    for (int t = begin; t < len; ++t) {
      const std::int64_t block = PhysicalBlock(kv, pages, b, t / kv.block_size);
      acc +=
          Rounded(s[t], p) *
          Rounded(LoadKv(kv.v, kv.dtype, KvIndex(kv, false, block, t % kv.block_size, kv_head, j), v_scale),
                  p);
    }
    out[qo + j] = Rounded(acc, p);
  }
}

// One block per token; threads over (kv head, j). vLLM's reshape_and_cache: slot = block · block_size +
// offset, a negative slot is padding.
__global__ void ReshapeAndCacheKernel(PagedKv kv, const float* key, const float* value,
                                      const std::int64_t* slot_mapping) {
  const std::int64_t slot = slot_mapping[blockIdx.x];
  if (slot < 0) return;
  const std::int64_t block = slot / kv.block_size;
  const int offset = static_cast<int>(slot % kv.block_size);
  const int per_token = kv.n_kv_heads * kv.head_dim;
  const std::int64_t src = static_cast<std::int64_t>(blockIdx.x) * per_token;
  for (int e = threadIdx.x; e < per_token; e += kThreads) {
    const int head = e / kv.head_dim, j = e % kv.head_dim;
    StoreKv(kv.k, kv.dtype, KvIndex(kv, true, block, offset, head, j), key[src + e], kv.k_scale[head]);
    StoreKv(kv.v, kv.dtype, KvIndex(kv, false, block, offset, head, j), value[src + e], kv.v_scale[head]);
  }
}

// grid count: block t decodes position t of the one block of a contiguous cache, threads over (head, j).
__global__ void ReadKvKernel(PagedKv kv, int count, float* k_out, float* v_out) {
  const int t = blockIdx.x, per_position = kv.n_kv_heads * kv.head_dim;
  for (int e = threadIdx.x; e < per_position; e += kThreads) {
    const int head = e / kv.head_dim, j = e % kv.head_dim;
    const std::int64_t out = (static_cast<std::int64_t>(head) * count + t) * kv.head_dim + j;
    k_out[out] = LoadKv(kv.k, kv.dtype, KvIndex(kv, true, 0, t, head, j), kv.k_scale[head]);
    v_out[out] = LoadKv(kv.v, kv.dtype, KvIndex(kv, false, 0, t, head, j), kv.v_scale[head]);
  }
}

}  // namespace

int KvElementBytes(KvDtype dtype) {
  return KvBytes(dtype);
}

void AttentionDecode(const PagedKv& kv, const PageTable& pages, const float* q, float* out, float* scores,
                     int batch, int n_heads, int max_seq_len, float softmax_scale, int window,
                     Precision precision) {
  if (batch <= 0 || n_heads <= 0) return;
  const std::size_t shared = static_cast<std::size_t>(kv.head_dim) * sizeof(float);
  AttentionKernel<<<dim3(static_cast<unsigned>(n_heads), static_cast<unsigned>(batch)), kThreads, shared>>>(
      kv, pages, q, out, scores, 1, n_heads, max_seq_len, softmax_scale, window, precision);
  CheckLaunch("AttentionDecode");
}

void AttentionPrefill(const PagedKv& kv, const PageTable& pages, const float* q, float* out, float* scores,
                      int rows, int n_heads, int seq_len, float softmax_scale, int window,
                      Precision precision) {
  if (rows <= 0 || n_heads <= 0) return;
  const std::size_t shared = static_cast<std::size_t>(kv.head_dim) * sizeof(float);
  AttentionKernel<<<dim3(static_cast<unsigned>(n_heads), static_cast<unsigned>(rows)), kThreads, shared>>>(
      kv, pages, q, out, scores, rows, n_heads, seq_len, softmax_scale, window, precision);
  CheckLaunch("AttentionPrefill");
}

void ReshapeAndCache(const PagedKv& kv, const float* key, const float* value,
                     const std::int64_t* slot_mapping, int tokens) {
  if (tokens <= 0) return;
  ReshapeAndCacheKernel<<<static_cast<unsigned>(tokens), kThreads>>>(kv, key, value, slot_mapping);
  CheckLaunch("ReshapeAndCache");
}

void ReadKv(const PagedKv& kv, int count, float* k_out, float* v_out) {
  if (kv.layout != KvLayout::kContiguous) throw MakeError("ReadKv: reads the contiguous layout only");
  if (count > kv.block_size) throw MakeError("ReadKv: ", count, " positions of a cache of ", kv.block_size);
  if (count <= 0) return;
  ReadKvKernel<<<static_cast<unsigned>(count), kThreads>>>(kv, count, k_out, v_out);
  CheckLaunch("ReadKv");
}

}  // namespace plumb::cuda
