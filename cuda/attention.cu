// Paged attention decode and reshape_and_cache (docs/fixtures.md "attention_decode", "reshape_and_cache";
// the cache's bytes: docs/kv-cache.md "Layout" and "Element types").
#include "common.cuh"

namespace plumb::cuda {
namespace {

// Sequence b's length and the physical block of its logical block i, through the view its layout uses
// (kernels.h, PageTable): FlashInfer's indptr / indices / last_page_len for NHD, vLLM's block table and
// seq_lens for the vLLM layout.
__device__ int SeqLen(const PagedKv& kv, const PageTable& pages, int b) {
  if (kv.layout == KvLayout::kVllm) return pages.seq_lens[b];
  const int n_pages = pages.kv_indptr[b + 1] - pages.kv_indptr[b];
  return n_pages == 0 ? 0 : (n_pages - 1) * kv.block_size + pages.kv_last_page_len[b];
}
__device__ std::int64_t PhysicalBlock(const PagedKv& kv, const PageTable& pages, int b, int i) {
  if (kv.layout == KvLayout::kVllm)
    return pages.block_tables[static_cast<std::int64_t>(b) * pages.max_blocks_per_seq + i];
  return pages.kv_indices[pages.kv_indptr[b] + i];
}

// grid (n_heads, batch): block (h, b) computes query head h of sequence b, the definition of
// include/plumb/kernels/scalar.h AttendOneHead over the decoded cache, positions t in [begin, seq_len):
//   scores[t] = Dot(q, k_t) · softmax_scale    one warp per position t, lanes over head_dim
//   p = softmax(scores)                        max, exp, sum, then divide, each over the block
//   out[j] = Σ_t p[t] · v_t[j]                 one thread per j, t ascending
// begin = seq_len − window with a sliding window shorter than the sequence (the query at seq_len − 1 sees
// t with seq_len − 1 − t < window), else 0. Only positions t < seq_len are read, so a NaN-poisoned slot past
// the sequence's end never is. The scores live in global scratch [batch][n_heads][max_seq_len], indexed by
// t, so a sequence may be as long as memory allows.
__global__ void AttentionDecodeKernel(PagedKv kv, PageTable pages, const float* q, float* out, float* scores,
                                      int n_heads, int max_seq_len, float softmax_scale, int window,
                                      Precision p) {
  extern __shared__ float q_shared[];  // [head_dim]
  __shared__ float scratch[kThreads / 32];
  const int h = blockIdx.x, b = blockIdx.y, d = kv.head_dim;
  const int kv_head = h / (n_heads / kv.n_kv_heads);
  const int len = SeqLen(kv, pages, b);
  const int begin = window > 0 && len > window ? len - window : 0;
  const std::int64_t qo = (static_cast<std::int64_t>(b) * n_heads + h) * d;
  float* s = scores + (static_cast<std::int64_t>(b) * n_heads + h) * max_seq_len;
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

}  // namespace

int KvElementBytes(KvDtype dtype) {
  return KvBytes(dtype);
}

void AttentionDecode(const PagedKv& kv, const PageTable& pages, const float* q, float* out, float* scores,
                     int batch, int n_heads, int max_seq_len, float softmax_scale, int window,
                     Precision precision) {
  if (batch <= 0 || n_heads <= 0) return;
  const std::size_t shared = static_cast<std::size_t>(kv.head_dim) * sizeof(float);
  AttentionDecodeKernel<<<dim3(static_cast<unsigned>(n_heads), static_cast<unsigned>(batch)), kThreads,
                          shared>>>(kv, pages, q, out, scores, n_heads, max_seq_len, softmax_scale, window,
                                    precision);
  CheckLaunch("AttentionDecode");
}

void ReshapeAndCache(const PagedKv& kv, const float* key, const float* value,
                     const std::int64_t* slot_mapping, int tokens) {
  if (tokens <= 0) return;
  ReshapeAndCacheKernel<<<static_cast<unsigned>(tokens), kThreads>>>(kv, key, value, slot_mapping);
  CheckLaunch("ReshapeAndCache");
}

}  // namespace plumb::cuda
