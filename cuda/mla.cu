// Multi-head latent attention in the absorbed form (docs/fixtures.md "mla_decode and mla_prefill"; FlashMLA's
// algorithm, without its tiling): attention over the cached latents, shared by every head, W_UK folded into
// the query and W_UV applied after P·c.
#include "common.cuh"

namespace plumb::cuda {
namespace {

// grid (batch · rows, n_heads): block (t, h) computes query token t = b · rows + r (at position
// seq_lens[b] − rows + r) for head h over positions s in [0, position], each read through the block table
// as the cache row [c (kv_lora_rank) | k_pe (qk_rope_head_dim)]:
//   q_lat[j] = Σ_i q_nope[i] · W_UK[h][i][j]             one thread per j, i ascending
//   scores[s] = (q_lat·c_s + q_pe·k_pe_s) · softmax_scale  one warp per position s, lanes over each dot
//   p = softmax(scores)                                   max, exp, sum, then divide, each over the block
//   o_lat[j] = Σ_s p[s] · c_s[j]                          one thread per j, s ascending
//   out[i] = Σ_j W_UV[h][i][j] · o_lat[j]                 one warp per i, lanes over j
// Only positions up to the query's own (< seq_len) are read, so a NaN-poisoned slot past the sequence's end
// never is. The scores live in global scratch [tokens][n_heads][max_seq_len], indexed by s.
__global__ void MlaKernel(MlaCache cache, const float* q_nope, const float* q_pe, const float* w_uk,
                          const float* w_uv, float* out, float* scores, MlaShape shape, int max_seq_len,
                          float softmax_scale) {
  extern __shared__ float shared[];  // q_lat [latent], q_pe [rope], o_lat [latent]
  const int t = blockIdx.x, h = blockIdx.y;
  const int R = shape.latent, dn = shape.nope, dr = shape.rope, dv = shape.v, width = R + dr;
  float* q_lat = shared;
  float* q_rope = q_lat + R;
  float* o_lat = q_rope + dr;
  const int b = t / shape.rows, r = t % shape.rows;
  const int len = cache.seq_lens[b] - shape.rows + r + 1;  // positions 0 .. the query's own
  const std::int64_t head_row = static_cast<std::int64_t>(t) * shape.heads + h;
  float* s = scores + head_row * max_seq_len;
  // The cache row of position `pos`: its physical block through the table, then the slot in the block.
  auto row = [&](int pos) {
    const std::int64_t block =
        cache.block_tables[static_cast<std::int64_t>(b) * cache.max_blocks_per_seq + pos / cache.block_size];
    return cache.kv + (block * cache.block_size + pos % cache.block_size) * width;
  };

  const float* qn = q_nope + head_row * dn;
  const float* wk = w_uk + static_cast<std::int64_t>(h) * dn * R;
  for (int j = threadIdx.x; j < R; j += kThreads) {
    float acc = 0.0f;
    for (int i = 0; i < dn; ++i) acc += qn[i] * wk[static_cast<std::int64_t>(i) * R + j];
    q_lat[j] = acc;
  }
  for (int j = threadIdx.x; j < dr; j += kThreads) q_rope[j] = q_pe[head_row * dr + j];
  __syncthreads();

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int pos = warp; pos < len; pos += kThreads / 32) {
    const float* kv = row(pos);
    float latent = 0.0f, rope = 0.0f;
    for (int j = lane; j < R; j += 32) latent += q_lat[j] * kv[j];
    for (int j = lane; j < dr; j += 32) rope += q_rope[j] * kv[R + j];
    latent = WarpSum(latent);
    rope = WarpSum(rope);
    if (lane == 0) s[pos] = (latent + rope) * softmax_scale;
  }
  __syncthreads();  // the scores (global memory) are visible to the whole block after this

  __shared__ float scratch[kThreads / 32];
  float m = -INFINITY;
  for (int pos = threadIdx.x; pos < len; pos += kThreads) m = fmaxf(m, s[pos]);
  m = BlockMax(m, scratch);
  float sum = 0.0f;
  for (int pos = threadIdx.x; pos < len; pos += kThreads) {
    s[pos] = expf(s[pos] - m);
    sum += s[pos];
  }
  sum = BlockSum(sum, scratch);
  for (int pos = threadIdx.x; pos < len; pos += kThreads) s[pos] = s[pos] / sum;
  __syncthreads();

  for (int j = threadIdx.x; j < R; j += kThreads) {
    float acc = 0.0f;
    for (int pos = 0; pos < len; ++pos) acc += s[pos] * row(pos)[j];
    o_lat[j] = acc;
  }
  __syncthreads();

  const float* wv = w_uv + static_cast<std::int64_t>(h) * dv * R;
  float* o = out + head_row * dv;
  for (int i = warp; i < dv; i += kThreads / 32) {
    float acc = 0.0f;
    for (int j = lane; j < R; j += 32) acc += wv[static_cast<std::int64_t>(i) * R + j] * o_lat[j];
    acc = WarpSum(acc);
    if (lane == 0) o[i] = acc;
  }
}

}  // namespace

void Mla(const MlaCache& cache, const float* q_nope, const float* q_pe, const float* w_uk, const float* w_uv,
         float* out, float* scores, const MlaShape& shape, int batch, int max_seq_len, float softmax_scale) {
  if (batch <= 0 || shape.rows <= 0 || shape.heads <= 0) return;
  if (MlaSharedBytes(shape) > kMlaMaxSharedBytes)
    throw MakeError("Mla: kv_lora_rank ", shape.latent, " and qk_rope_head_dim ", shape.rope,
                    " need more shared memory than ", kMlaMaxSharedBytes, " bytes");
  if (shape.heads > 65535) throw MakeError("Mla: n_heads ", shape.heads, " is more than a grid's 65535");
  const dim3 grid(static_cast<unsigned>(batch) * static_cast<unsigned>(shape.rows),
                  static_cast<unsigned>(shape.heads));
  MlaKernel<<<grid, kThreads, static_cast<std::size_t>(MlaSharedBytes(shape))>>>(
      cache, q_nope, q_pe, w_uk, w_uv, out, scores, shape, max_seq_len, softmax_scale);
  CheckLaunch("Mla");
}

}  // namespace plumb::cuda
