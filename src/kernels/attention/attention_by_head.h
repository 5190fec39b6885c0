// Attention split by (row, KV heads) units, for batches with rows enough to keep every thread busy
// (src/kernels/attention/attention_by_head.cpp), and the softmax both splits share. Internal to src/kernels.
#pragma once

#include <cstdint>
#include <span>

#include "plumb/kernels/kernels.h"

namespace plumb::kernels {

// Computes CausalAttention(items, n_heads) and returns true when the items hold enough (row, KV head) pairs
// for every thread to have several; returns false, computing nothing, otherwise. The items are checked.
bool AttendByKvHeads(std::span<const AttentionItem> items, int n_heads);

// scalar::Softmax(x, n) in place, bit for bit (attention.cpp).
void SoftmaxRow(float* x, int n);
// SoftmaxRow of `count` rows of n floats, row r at x + r · stride (their sums interleaved: attention.cpp).
void SoftmaxRows(float* x, int count, int n, std::int64_t stride);

}  // namespace plumb::kernels
