// Mixture-of-experts routing, experts and vLLM's token → expert permutation (docs/fixtures.md "moe_route",
// "moe_experts", "moe_align_block_size"; the routing rules: include/plumb/model/moe_router.h, docs/models.md
// "Mixture-of-experts routing"). FP32 throughout.
#include "common.cuh"
#include "weights.cuh"

namespace plumb::cuda {
namespace {

// ---- routing ----------------------------------------------------------------------------------------------

// Whether candidate (v, id) ranks before (best_v, best_id): the larger score, of equal scores the lower id
// (a stable sort of ascending ids by descending score); id < 0 is no candidate.
__device__ bool Before(float v, int id, float best_v, int best_id) {
  if (id < 0) return false;
  if (best_id < 0) return true;
  return v > best_v || (v == best_v && id < best_id);
}

// The id of the best of the block's candidates (v, id) by Before, returned to every thread (-1: none).
// `v_scratch` and `id_scratch` are shared memory of kThreads / 32 each; like BlockSum, the function
// synchronises before reusing them.
__device__ int BlockBest(float v, int id, float* v_scratch, int* id_scratch) {
  for (int offset = 16; offset > 0; offset /= 2) {
    const float other_v = __shfl_xor_sync(0xffffffffu, v, offset);
    const int other_id = __shfl_xor_sync(0xffffffffu, id, offset);
    if (Before(other_v, other_id, v, id)) {
      v = other_v;
      id = other_id;
    }
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) {
    v_scratch[warp] = v;
    id_scratch[warp] = id;
  }
  __syncthreads();
  float best_v = 0.0f;
  int best_id = -1;
  for (int w = 0; w < kThreads / 32; ++w) {
    if (Before(v_scratch[w], id_scratch[w], best_v, best_id)) {
      best_v = v_scratch[w];
      best_id = id_scratch[w];
    }
  }
  return best_id;
}

// Item states in SelectTop: not a candidate, a candidate, selected.
constexpr unsigned char kOut = 0, kCandidate = 1, kSelected = 2;

// Selects the k best candidates of score[0, n) (state kCandidate) one after the other, by Before: so in
// the order of a stable sort by descending score over ascending ids. Each becomes kSelected, and where
// `ids` is not null thread 0 writes the i-th to ids[i]. Every thread of the block must call it.
__device__ void SelectTop(const float* score, unsigned char* state, int n, int k, std::int32_t* ids,
                          float* v_scratch, int* id_scratch) {
  for (int i = 0; i < k; ++i) {
    float best_v = 0.0f;
    int best_id = -1;
    for (int e = threadIdx.x; e < n; e += kThreads) {
      if (state[e] == kCandidate && Before(score[e], e, best_v, best_id)) {
        best_v = score[e];
        best_id = e;
      }
    }
    const int best = BlockBest(best_v, best_id, v_scratch, id_scratch);
    if (threadIdx.x == 0 && best >= 0) {  // best < 0 only for fewer than k candidates (the runner's checks)
      state[best] = kSelected;
      if (ids != nullptr) ids[i] = best;
    }
    __syncthreads();  // the state, before the next round reads it
  }
}

// One block per token. Dynamic shared memory: score and choice [experts] floats, group_score [groups]
// floats, then state [experts] and group_state [groups] bytes (MoeRoute sizes it).
//   softmax_topk        score = p = softmax(logits) (max, Σ e^(x − max), × 1 / Σ, as plumb's Softmax);
//                       select by p; weights p, or p / Σ selected p with renormalize
//   topk_softmax        score = logits; select; weights the softmax of the selected logits
//   sigmoid_group_topk  score = s = 1 / (1 + e^−x), choice c = s + bias; a group's score the sum of its two
//                       largest c; select top_groups groups, then top_k of their experts by c; weights s
//                       (renormalize: s / Σ s), then × scaling
// The weights are computed by thread 0 over the selected experts in selection order, the sums left to right,
// as plumb's RouteToken computes them.
__global__ void MoeRouteKernel(MoeRouteParams p, const float* logits, const float* bias, std::int32_t* ids,
                               float* weights) {
  extern __shared__ float shared[];
  __shared__ float v_scratch[kThreads / 32];
  __shared__ int id_scratch[kThreads / 32];
  const int n = p.experts, k = p.top_k;
  float* score = shared;
  float* choice = score + n;
  float* group_score = choice + n;
  auto* state = reinterpret_cast<unsigned char*>(group_score + p.groups);
  unsigned char* group_state = state + n;
  const float* x = logits + static_cast<std::int64_t>(blockIdx.x) * n;
  std::int32_t* ids_t = ids + static_cast<std::int64_t>(blockIdx.x) * k;
  float* w = weights + static_cast<std::int64_t>(blockIdx.x) * k;

  for (int e = threadIdx.x; e < n; e += kThreads) {
    state[e] = kCandidate;
    if (p.routing == MoeRouting::kSigmoidGroupTopK) {
      score[e] = 1.0f / (1.0f + expf(-x[e]));
      choice[e] = score[e] + bias[e];
    } else {
      score[e] = x[e];
    }
  }
  if (p.routing == MoeRouting::kSoftmaxTopK) {
    float m = -INFINITY;
    for (int e = threadIdx.x; e < n; e += kThreads) m = fmaxf(m, x[e]);
    m = BlockMax(m, v_scratch);
    float sum = 0.0f;
    for (int e = threadIdx.x; e < n; e += kThreads) {
      score[e] = expf(x[e] - m);
      sum += score[e];
    }
    const float inv_sum = 1.0f / BlockSum(sum, v_scratch);
    for (int e = threadIdx.x; e < n; e += kThreads) score[e] *= inv_sum;
  }
  __syncthreads();

  if (p.routing == MoeRouting::kSigmoidGroupTopK) {
    // Each group's score, one thread a group: its largest and second largest c (equal values both count).
    const int per_group = n / p.groups;
    for (int g = threadIdx.x; g < p.groups; g += kThreads) {
      float first = -INFINITY, second = -INFINITY;
      for (int e = g * per_group; e < (g + 1) * per_group; ++e) {
        if (choice[e] > first) {
          second = first;
          first = choice[e];
        } else if (choice[e] > second) {
          second = choice[e];
        }
      }
      group_score[g] = first + second;
      group_state[g] = kCandidate;
    }
    __syncthreads();
    SelectTop(group_score, group_state, p.groups, p.top_groups, nullptr, v_scratch, id_scratch);
    for (int e = threadIdx.x; e < n; e += kThreads)
      state[e] = group_state[e / per_group] == kSelected ? kCandidate : kOut;
    __syncthreads();
    SelectTop(choice, state, n, k, ids_t, v_scratch, id_scratch);  // chosen by c ...
  } else {
    SelectTop(score, state, n, k, ids_t, v_scratch, id_scratch);
  }
  if (threadIdx.x != 0) return;

  for (int i = 0; i < k; ++i) w[i] = score[ids_t[i]];  // ... weighed by s, without the bias
  if (p.routing == MoeRouting::kTopKSoftmax) {
    float m = w[0];
    for (int i = 1; i < k; ++i) m = fmaxf(m, w[i]);
    float sum = 0.0f;
    for (int i = 0; i < k; ++i) {
      w[i] = expf(w[i] - m);
      sum += w[i];
    }
    const float inv_sum = 1.0f / sum;
    for (int i = 0; i < k; ++i) w[i] *= inv_sum;
    return;
  }
  if (p.renormalize) {
    float sum = 0.0f;
    for (int i = 0; i < k; ++i) sum += w[i];
    for (int i = 0; i < k; ++i) w[i] = w[i] / sum;
  }
  if (p.routing == MoeRouting::kSigmoidGroupTopK)
    for (int i = 0; i < k; ++i) w[i] = w[i] * p.scaling;
}

// ---- experts ----------------------------------------------------------------------------------------------

// Expert e's [rows][cols] matrix of a stacked weight (SwigluExperts): the pointers moved past e experts.
__device__ GemvWeights ExpertMatrix(const GemvWeights& stacked, int e, int rows, int cols) {
  GemvWeights w = stacked;
  const std::int64_t first_row = static_cast<std::int64_t>(e) * rows;
  switch (stacked.dtype) {
    case WeightDtype::kF32:
      w.w = static_cast<const float*>(stacked.w) + first_row * cols;
      break;
    case WeightDtype::kF16:
    case WeightDtype::kBf16:
      w.w = static_cast<const std::uint16_t*>(stacked.w) + first_row * cols;
      break;
    case WeightDtype::kMxfp4:  // docs/formats.md "Microscaled formats": rows of ceil(cols/2) bytes
      w.w = static_cast<const std::uint8_t*>(stacked.w) + first_row * ((cols + 1) / 2);
      w.block_scales = stacked.block_scales + first_row * ((cols + 31) / 32);
      break;
    default:  // the runner passes no other dtype (kernels.h SwigluExperts)
      break;
  }
  return w;
}

// Σ_c W[row][c] · v[c] over the block, c < cols, returned to every thread (Gemv's dot, FP32).
__device__ float BlockDot(const GemvWeights& w, int rows, int cols, int row, const float* v, float* scratch) {
  float acc = 0.0f;
  for (int c = threadIdx.x; c < cols; c += kThreads) acc += WeightAt(w, rows, cols, row, c) * v[c];
  return BlockSum(acc, scratch);
}

// grid (f, top_k, tokens): block (r, j, t) computes row r of expert e = ids[t][j]'s hidden state,
// hidden[t][j][r] = silu(gate_e[r] · x_t) · (up_e[r] · x_t), silu(g) = g / (1 + e^−g) as plumb's SwiGlu.
// ids null: expert 0 (the shared expert, top_k = 1).
__global__ void ExpertHiddenKernel(SwigluExperts ex, const std::int32_t* ids, int top_k, const float* x,
                                   float* hidden, int d) {
  __shared__ float scratch[kThreads / 32];
  const int r = blockIdx.x, j = blockIdx.y, t = blockIdx.z;
  const int e = ids != nullptr ? ids[static_cast<std::int64_t>(t) * top_k + j] : 0;
  const float* xt = x + static_cast<std::int64_t>(t) * d;
  const float gate = BlockDot(ExpertMatrix(ex.gate, e, ex.f, d), ex.f, d, r, xt, scratch);
  const float up = BlockDot(ExpertMatrix(ex.up, e, ex.f, d), ex.f, d, r, xt, scratch);
  if (threadIdx.x == 0)
    hidden[(static_cast<std::int64_t>(t) * top_k + j) * ex.f + r] = gate / (1.0f + expf(-gate)) * up;
}

// grid (d, tokens): block (i, t) computes y[t][i] = Σ_j weights[t][j] · down_e[i] · hidden[t][j], j
// ascending from 0, then + g · down_s[i] · shared_hidden[t] (plumb's MoeExpertsOp's order of additions).
__global__ void ExpertCombineKernel(MoeLayer layer, const float* x, float* y, const float* hidden,
                                    const float* shared_hidden, int d) {
  __shared__ float scratch[kThreads / 32];
  const int i = blockIdx.x, t = blockIdx.y, k = layer.top_k, f = layer.routed.f;
  float out = 0.0f;
  for (int j = 0; j < k; ++j) {
    const std::int64_t tj = static_cast<std::int64_t>(t) * k + j;
    const GemvWeights down = ExpertMatrix(layer.routed.down, layer.ids[tj], d, f);
    out = out + layer.weights[tj] * BlockDot(down, d, f, i, hidden + tj * f, scratch);
  }
  if (layer.shared.f > 0) {
    const int sf = layer.shared.f;
    const float term = BlockDot(ExpertMatrix(layer.shared.down, 0, d, sf), d, sf, i,
                                shared_hidden + static_cast<std::int64_t>(t) * sf, scratch);
    if (layer.shared_gate != nullptr) {  // Qwen2-MoE's shared_expert_gate: sigmoid(shared_gate · x_t)
      const float* xt = x + static_cast<std::int64_t>(t) * d;
      float acc = 0.0f;
      for (int c = threadIdx.x; c < d; c += kThreads) acc += layer.shared_gate[c] * xt[c];
      const float g = 1.0f / (1.0f + expf(-BlockSum(acc, scratch)));
      out = out + g * term;
    } else {
      out = out + term;
    }
  }
  if (threadIdx.x == 0) y[static_cast<std::int64_t>(t) * d + i] = out;
}

// ---- moe_align_block_size ---------------------------------------------------------------------------------

// Slot i's (local) expert: topk_ids[i], through expert_map where there is one (−1: another rank's expert).
__device__ int LocalExpert(const std::int32_t* topk_ids, const std::int32_t* expert_map, int i) {
  const int e = topk_ids[i];
  return expert_map != nullptr ? expert_map[e] : e;
}

// One block (vLLM's moe_align_block_size_kernel): fills sorted_token_ids[0, capacity) with the pad `slots`,
// counts each expert's slots in shared memory (dynamic, [experts] ints), then writes cursor[e] = Σ_{e' < e}
// ⌈n_e' / B⌉·B (the exclusive cumsum of the padded counts, one tile of kThreads experts after the other),
// cursor[experts] = P = *num_tokens_post_padded, expert_ids[b] = e for each block b of e's segment and 0
// for the blocks past P (vLLM's CUDA kernel fills them so; fused_moe stops at P).
__global__ void MoeAlignCountKernel(const std::int32_t* topk_ids, const std::int32_t* expert_map, int slots,
                                    int experts, int block_size, std::int32_t* sorted_token_ids,
                                    std::int32_t* expert_ids, std::int32_t* num_tokens_post_padded,
                                    std::int32_t* cursor, int capacity) {
  extern __shared__ int align_counts[];
  __shared__ int warp_totals[kThreads / 32];
  for (int i = threadIdx.x; i < capacity; i += kThreads) sorted_token_ids[i] = slots;
  for (int e = threadIdx.x; e < experts; e += kThreads) align_counts[e] = 0;
  __syncthreads();
  for (int i = threadIdx.x; i < slots; i += kThreads) {
    const int e = LocalExpert(topk_ids, expert_map, i);
    if (e >= 0) atomicAdd(&align_counts[e], 1);
  }
  __syncthreads();

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int running = 0;  // Σ of the padded counts of the tiles before this one (the same in every thread)
  for (int base = 0; base < experts; base += kThreads) {
    const int e = base + threadIdx.x;
    const int padded = e < experts ? (align_counts[e] + block_size - 1) / block_size * block_size : 0;
    int inclusive = padded;  // the warp's inclusive scan, then the warps before it added
    for (int offset = 1; offset < 32; offset *= 2) {
      const int other = __shfl_up_sync(0xffffffffu, inclusive, offset);
      if (lane >= offset) inclusive += other;
    }
    if (lane == 31) warp_totals[warp] = inclusive;
    __syncthreads();
    int tile_total = 0;
    for (int w = 0; w < kThreads / 32; ++w) {
      if (w < warp) inclusive += warp_totals[w];
      tile_total += warp_totals[w];
    }
    if (e < experts) cursor[e] = running + inclusive - padded;
    running += tile_total;
    __syncthreads();  // warp_totals, before the next tile writes it
  }
  if (threadIdx.x == 0) {
    cursor[experts] = running;
    *num_tokens_post_padded = running;
  }
  __syncthreads();  // cursor[experts], read below as the end of the last segment
  for (int e = threadIdx.x; e < experts; e += kThreads)
    for (int i = cursor[e]; i < cursor[e + 1]; i += block_size) expert_ids[i / block_size] = e;
  const int blocks = (capacity + block_size - 1) / block_size;
  for (int b = running / block_size + threadIdx.x; b < blocks; b += kThreads) expert_ids[b] = 0;
}

// vLLM's count_and_sort_expert_tokens_kernel: each slot i claims the next free place of its expert's segment
// (an atomicAdd on the cursor MoeAlignCountKernel left at the segment's start) and writes i there; dropped
// slots (−1) go nowhere. The pads the count kernel wrote stay after each segment's n_e indices.
__global__ void MoeAlignScatterKernel(const std::int32_t* topk_ids, const std::int32_t* expert_map, int slots,
                                      std::int32_t* sorted_token_ids, std::int32_t* cursor) {
  for (int i = blockIdx.x * kThreads + threadIdx.x; i < slots; i += gridDim.x * kThreads) {
    const int e = LocalExpert(topk_ids, expert_map, i);
    if (e >= 0) sorted_token_ids[atomicAdd(&cursor[e], 1)] = i;
  }
}

}  // namespace

void MoeRoute(const MoeRouteParams& p, const float* logits, const float* bias, std::int32_t* ids,
              float* weights, int tokens) {
  if (tokens <= 0 || p.experts <= 0 || p.top_k <= 0) return;
  const int groups = p.routing == MoeRouting::kSigmoidGroupTopK ? p.groups : 0;
  MoeRouteParams q = p;
  q.groups = groups;
  const std::size_t shared = (2 * static_cast<std::size_t>(p.experts) + groups) * sizeof(float) +
                             static_cast<std::size_t>(p.experts) + groups;
  MoeRouteKernel<<<static_cast<unsigned>(tokens), kThreads, shared>>>(q, logits, bias, ids, weights);
  CheckLaunch("MoeRoute");
}

void MoeExperts(const MoeLayer& layer, const float* x, float* y, float* hidden, float* shared_hidden,
                int tokens, int d) {
  if (tokens <= 0 || d <= 0) return;
  if (layer.routed.f > 0 && layer.top_k > 0) {
    ExpertHiddenKernel<<<dim3(static_cast<unsigned>(layer.routed.f), static_cast<unsigned>(layer.top_k),
                              static_cast<unsigned>(tokens)),
                         kThreads>>>(layer.routed, layer.ids, layer.top_k, x, hidden, d);
    CheckLaunch("MoeExperts (routed hidden)");
  }
  if (layer.shared.f > 0) {
    ExpertHiddenKernel<<<dim3(static_cast<unsigned>(layer.shared.f), 1, static_cast<unsigned>(tokens)),
                         kThreads>>>(layer.shared, nullptr, 1, x, shared_hidden, d);
    CheckLaunch("MoeExperts (shared hidden)");
  }
  ExpertCombineKernel<<<dim3(static_cast<unsigned>(d), static_cast<unsigned>(tokens)), kThreads>>>(
      layer, x, y, hidden, shared_hidden, d);
  CheckLaunch("MoeExperts (combine)");
}

void MoeAlignBlockSize(const std::int32_t* topk_ids, const std::int32_t* expert_map, int slots, int experts,
                       int block_size, std::int32_t* sorted_token_ids, std::int32_t* expert_ids,
                       std::int32_t* num_tokens_post_padded, std::int32_t* cursor, int capacity) {
  if (experts <= 0 || block_size <= 0 || slots < 0) return;
  MoeAlignCountKernel<<<1, kThreads, static_cast<std::size_t>(experts) * sizeof(int)>>>(
      topk_ids, expert_map, slots, experts, block_size, sorted_token_ids, expert_ids, num_tokens_post_padded,
      cursor, capacity);
  CheckLaunch("MoeAlignBlockSize (count)");
  if (slots == 0) return;
  const int grid = (slots + kThreads - 1) / kThreads < 1024 ? (slots + kThreads - 1) / kThreads : 1024;
  MoeAlignScatterKernel<<<grid, kThreads>>>(topk_ids, expert_map, slots, sorted_token_ids, cursor);
  CheckLaunch("MoeAlignBlockSize (scatter)");
}

}  // namespace plumb::cuda
