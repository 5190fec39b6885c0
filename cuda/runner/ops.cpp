// See ops.h. Every tensor's dtype and shape, and every index the kernels follow (block tables, page indices,
// slots, positions), is checked here on the host, so that a malformed fixture is a plumb::Error naming the
// value and never an out-of-bounds read on the GPU.
#include "ops.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <limits>
#include <optional>
#include <vector>

#include "../kernels.h"
#include "device.h"
#include "model.h"
#include "plumb/core/error.h"

namespace plumb::cuda {
namespace {

using fixtures::Case;
using fixtures::Tensor;
using fixtures::TensorFile;

// ---- gemv / gemm (docs/fixtures.md "gemv and gemm") ----------------------------------------------------

std::map<std::string, Tensor> RunGemv(const Case& c, const CaseIo& io) {
  const bool gemm = c.op == "gemm";
  const std::int64_t n = io.Int("n"), k = io.Int("k"), m = gemm ? io.Int("m") : 1;
  const std::string dtype = io.String("weight_dtype");
  const Shape x_shape = gemm ? Shape{m, k} : Shape{k};
  const DeviceBuffer x(io.Get("x", "F32", x_shape));
  std::deque<DeviceBuffer>
      held;  // the weight's tensors, alive until the kernel has run (a deque never moves them)
  auto upload = [&](const char* name, const char* type, const Shape& shape) {
    return held.emplace_back(io.Get(name, type, shape)).as<void>();
  };
  GemvWeights w;
  auto group_size = [&] {
    w.group_size = io.Int32("group_size");
    return std::int64_t{w.group_size};
  };
  if (dtype == "f32" || dtype == "f16" || dtype == "bf16") {
    w.dtype = dtype == "f32" ? WeightDtype::kF32 : dtype == "f16" ? WeightDtype::kF16 : WeightDtype::kBf16;
    w.w = upload("w", dtype == "f32" ? "F32" : dtype == "f16" ? "F16" : "BF16", {n, k});
  } else if (dtype == "fp8_e4m3" || dtype == "fp8_e5m2") {
    w.dtype = dtype == "fp8_e4m3" ? WeightDtype::kFp8E4m3 : WeightDtype::kFp8E5m2;
    const std::string scale = io.String("fp8_scale");
    if (scale != "per_row" && scale != "per_tensor")
      io.Fail("fp8_scale \"", scale, "\" is not per_row or per_tensor");
    w.fp8_per_row = scale == "per_row";
    w.w = upload("w", "U8", {n, k});
    w.fp8_scale = static_cast<const float*>(upload("w_scale", "F32", {w.fp8_per_row ? n : 1}));
  } else if (dtype == "int4_sym" || dtype == "int4_asym") {
    w.dtype = dtype == "int4_sym" ? WeightDtype::kInt4Sym : WeightDtype::kInt4Asym;
    const std::int64_t groups = CeilDiv(k, group_size());
    w.w = upload("w", "U8", {n, CeilDiv(k, 2)});
    w.scales = static_cast<const std::uint16_t*>(upload("w_scales", "F16", {n, groups}));
    if (dtype == "int4_asym")
      w.int4_zeros = static_cast<const std::uint8_t*>(upload("w_zeros", "U8", {n, CeilDiv(groups, 2)}));
  } else if (dtype == "gptq" || dtype == "awq") {
    w.dtype = dtype == "gptq" ? WeightDtype::kGptq : WeightDtype::kAwq;
    const std::int64_t g = group_size();
    if (k % 8 != 0 || k % g != 0 || n % 8 != 0)
      io.Fail(dtype, " needs k a multiple of 8 and of group_size and n a multiple of 8 (k = ", k, ", n = ", n,
              ", group_size = ", g, ")");
    w.w = upload("qweight", "I32", dtype == "gptq" ? Shape{k / 8, n} : Shape{k, n / 8});
    w.qzeros = static_cast<const std::int32_t*>(upload("qzeros", "I32", {k / g, n / 8}));
    w.scales = static_cast<const std::uint16_t*>(upload("scales", "F16", {k / g, n}));
  } else if (dtype == "mxfp4" || dtype == "nvfp4" || dtype == "mxfp8_e4m3" || dtype == "mxfp8_e5m2") {
    w.dtype = dtype == "mxfp4"        ? WeightDtype::kMxfp4
              : dtype == "nvfp4"      ? WeightDtype::kNvfp4
              : dtype == "mxfp8_e4m3" ? WeightDtype::kMxfp8E4m3
                                      : WeightDtype::kMxfp8E5m2;
    const bool fp4 = dtype == "mxfp4" || dtype == "nvfp4";
    const std::int64_t block = dtype == "nvfp4" ? 16 : 32;
    w.w = upload("w", "U8", {n, fp4 ? CeilDiv(k, 2) : k});
    w.block_scales = static_cast<const std::uint8_t*>(upload("w_scales", "U8", {n, CeilDiv(k, block)}));
    if (dtype == "nvfp4") w.tensor_scale = static_cast<const float*>(upload("w_tensor_scale", "F32", {1}));
  } else if (dtype == "fp8_block128") {  // docs/formats.md "Block-scaled FP8 (128×128)"
    w.dtype = WeightDtype::kFp8Block128;
    w.w = upload("w", "U8", {n, k});
    w.block128_scales =
        static_cast<const float*>(upload("w_scales", "F32", {CeilDiv(n, 128), CeilDiv(k, 128)}));
  } else {  // q4_0, q4_1, q8_0 (UnsupportedReason let nothing else through)
    w.dtype = dtype == "q4_0"   ? WeightDtype::kQ4_0
              : dtype == "q4_1" ? WeightDtype::kQ4_1
                                : WeightDtype::kQ8_0;
    if (k % 32 != 0) io.Fail(dtype, " needs k a multiple of 32 (k = ", k, ")");
    const std::int64_t block_bytes = dtype == "q4_0" ? 18 : dtype == "q4_1" ? 20 : 34;
    w.w = upload("w", "U8", {n, k / 32 * block_bytes});
  }
  DeviceBuffer y(static_cast<std::size_t>(m * n) * sizeof(float));
  if (!check_only_pass)
    Gemv(w, x.as<float>(), y.as<float>(), static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
         run_precision);
  return {{"y", y.Download("F32", gemm ? Shape{m, n} : Shape{n})}};
}

// ---- softmax, swiglu, kv_quant (docs/fixtures.md "swiglu, softmax", "kv_quant")
// -----------------------------

std::map<std::string, Tensor> RunSoftmax(const CaseIo& io) {
  const std::int64_t rows = io.Int("rows"), n = io.Int("n");
  const DeviceBuffer x(io.Get("x", "F32", {rows, n}));
  DeviceBuffer out(static_cast<std::size_t>(rows * n) * sizeof(float));
  if (!check_only_pass)
    Softmax(x.as<float>(), out.as<float>(), static_cast<int>(rows), static_cast<int>(n), run_precision);
  return {{"out", out.Download("F32", {rows, n})}};
}

std::map<std::string, Tensor> RunSwiglu(const CaseIo& io) {
  const std::int64_t n = io.Int("n");
  const DeviceBuffer gate(io.Get("gate", "F32", {n})), up(io.Get("up", "F32", {n}));
  DeviceBuffer out(static_cast<std::size_t>(n) * sizeof(float));
  if (!check_only_pass)
    Swiglu(gate.as<float>(), up.as<float>(), out.as<float>(), static_cast<int>(n), run_precision);
  return {{"out", out.Download("F32", {n})}};
}

std::map<std::string, Tensor> RunKvQuant(const CaseIo& io) {
  const std::int64_t rows = io.Int("rows"), n = io.Int("n");
  const KvDtype dtype = io.String("format") == "fp8_e4m3" ? KvDtype::kFp8E4m3 : KvDtype::kFp8E5m2;
  const Tensor& scale_t = io.Get("scale", "F32", {1});
  const float scale = scale_t.As<float>()[0];
  if (!std::isfinite(scale) || !(scale > 0.0f)) io.Fail("scale ", scale, " must be finite and > 0");
  const DeviceBuffer x(io.Get("x", "F32", {rows, n})), scale_d(scale_t);
  DeviceBuffer codes(static_cast<std::size_t>(rows * n));
  if (!check_only_pass)
    KvQuant(x.as<float>(), codes.as<std::uint8_t>(), rows * n, dtype, scale_d.as<float>());
  return {{"codes", codes.Download("U8", {rows, n})}};
}

// ---- rmsnorm, rope ---------------------------------------------------------------------------------------

std::map<std::string, Tensor> RunRmsNorm(const CaseIo& io) {
  const std::int64_t rows = io.Int("rows"), n = io.Int("n");
  const DeviceBuffer x(io.Get("x", "F32", {rows, n})), weight(io.Get("weight", "F32", {n}));
  DeviceBuffer out(static_cast<std::size_t>(rows * n) * sizeof(float));
  if (!check_only_pass)
    RmsNorm(x.as<float>(), weight.as<float>(), out.as<float>(), static_cast<int>(rows), static_cast<int>(n),
            static_cast<float>(io.Number("eps")), run_precision);
  return {{"out", out.Download("F32", {rows, n})}};
}

std::map<std::string, Tensor> RunRope(const CaseIo& io) {
  const std::int64_t rows = io.Int("rows"), heads = io.Int("n_heads"), head_dim = io.Int("head_dim");
  if (head_dim % 2 != 0) io.Fail("head_dim ", head_dim, " is odd; RoPE rotates pairs");
  const std::string pairing = io.String("pairing");
  const Tensor& positions = io.Get("positions", "I32", {rows});
  for (std::int32_t p : positions.As<std::int32_t>())
    if (p < 0) io.Fail("position ", p, " is negative");
  const DeviceBuffer x(io.Get("x", "F32", {rows, heads, head_dim})), pos(positions);
  // RoPE scaling: the per-pair divisors, when the case has them (params.scaling says how they were made).
  std::optional<DeviceBuffer> factors;
  if (io.Has("freq_factors")) {
    const Tensor& f = io.Get("freq_factors", "F32", {head_dim / 2});
    for (float v : f.As<float>())
      if (!std::isfinite(v) || !(v > 0.0f)) io.Fail("freq_factors holds ", v, "; each divisor must be > 0");
    factors.emplace(f);
  } else if (io.HasParam("scaling")) {
    io.Fail("params.scaling without the freq_factors input it describes");
  }
  DeviceBuffer out(static_cast<std::size_t>(rows * heads * head_dim) * sizeof(float));
  if (!check_only_pass)
    Rope(x.as<float>(), pos.as<std::int32_t>(), out.as<float>(), static_cast<int>(rows),
         static_cast<int>(heads), static_cast<int>(head_dim), static_cast<float>(io.Number("theta")),
         pairing == "rotate_half" ? RopePairing::kRotateHalf : RopePairing::kInterleaved,
         factors ? factors->as<float>() : nullptr, run_precision);
  return {{"out", out.Download("F32", {rows, heads, head_dim})}};
}

// ---- the paged cache: attention_decode, reshape_and_cache
// --------------------------------------------------

// The cache geometry both ops share, with the tensors' dtype and shapes for its layout.
struct CacheSpec {
  KvLayout layout = KvLayout::kNhd;
  KvDtype dtype = KvDtype::kF32;
  std::string tensor_dtype;  // F32, F16, BF16, or U8 for FP8 codes
  std::int64_t n_kv_heads = 0, head_dim = 0, block_size = 0, num_blocks = 0;
  Shape k_shape, v_shape;

  // The element type of kv_dtype (f32, f16, bf16, fp8_e4m3, fp8_e5m2; options.h admits no other) and the
  // safetensors dtype the cache tensors are stored as.
  void SetDtype(const std::string& name) {
    dtype = name == "f32"        ? KvDtype::kF32
            : name == "f16"      ? KvDtype::kF16
            : name == "bf16"     ? KvDtype::kBf16
            : name == "fp8_e4m3" ? KvDtype::kFp8E4m3
                                 : KvDtype::kFp8E5m2;
    tensor_dtype = name == "f32" ? "F32" : name == "f16" ? "F16" : name == "bf16" ? "BF16" : "U8";
  }

  static CacheSpec Read(const CaseIo& io) {
    CacheSpec s;
    const std::string layout = io.String("layout"), dtype = io.String("kv_dtype");
    s.layout = layout == "vllm" ? KvLayout::kVllm : KvLayout::kNhd;
    s.SetDtype(dtype);
    s.n_kv_heads = io.Int("n_kv_heads");
    s.head_dim = io.Int("head_dim");
    s.block_size = io.Int("block_size");
    s.num_blocks = io.Int("num_blocks");
    if (s.layout == KvLayout::kNhd) {
      s.k_shape = s.v_shape = {s.num_blocks, s.block_size, s.n_kv_heads, s.head_dim};
    } else {
      const std::int64_t x = 16 / KvElementBytes(s.dtype);
      if (s.head_dim % x != 0)
        io.Fail("vllm layout needs head_dim a multiple of x = ", x, " (head_dim = ", s.head_dim, ")");
      s.k_shape = {s.num_blocks, s.n_kv_heads, s.head_dim / x, s.block_size, x};
      s.v_shape = {s.num_blocks, s.n_kv_heads, s.head_dim, s.block_size};
    }
    return s;
  }
  // The scales, checked finite and positive (FP8 divides and multiplies by them).
  const Tensor& Scale(const CaseIo& io, const char* name) const {
    const Tensor& t = io.Get(name, "F32", {n_kv_heads});
    for (float v : t.As<float>())
      if (!(std::isfinite(v) && v > 0))
        io.Fail(name, " holds ", v, "; a KV scale must be finite and positive");
    return t;
  }
  PagedKv View(const DeviceBuffer& k, const DeviceBuffer& v, const DeviceBuffer& k_scale,
               const DeviceBuffer& v_scale) const {
    PagedKv kv;
    kv.layout = layout;
    kv.dtype = dtype;
    kv.k = k.as<void>();
    kv.v = v.as<void>();
    kv.k_scale = k_scale.as<float>();
    kv.v_scale = v_scale.as<float>();
    kv.n_kv_heads = static_cast<int>(n_kv_heads);
    kv.head_dim = static_cast<int>(head_dim);
    kv.block_size = static_cast<int>(block_size);
    return kv;
  }
};

// The pages of `batch` sequences, both views checked against each other and against the pool, so that the
// kernels follow only indices inside it, and uploaded: vLLM's block tables and seq_lens (each length in
// [min_len, max_blocks_per_seq · block_size]) and, required for the NHD layout (the kernel reads NHD pages
// through them), FlashInfer's indptr / indices / last_page_len, which must describe the same pages.
struct PagedSequences {
  std::int64_t max_len = 0;
  std::vector<std::int32_t> lens;
  std::optional<DeviceBuffer> tables_d, lens_d, indptr_d, indices_d, last_d;

  PagedSequences(const CaseIo& io, const CacheSpec& spec, std::int64_t batch, std::int64_t max_blocks,
                 std::int64_t min_len) {
    const Tensor& tables_t = io.Get("block_tables", "I32", {batch, max_blocks});
    const Tensor& lens_t = io.Get("seq_lens", "I32", {batch});
    const std::vector<std::int32_t> tables = tables_t.As<std::int32_t>();
    lens = lens_t.As<std::int32_t>();
    for (std::int64_t b = 0; b < batch; ++b) {
      const std::int64_t len = lens[static_cast<std::size_t>(b)];
      if (len < min_len || len > max_blocks * spec.block_size)
        io.Fail("seq_lens[", b, "] = ", len, " outside [", min_len, ", max_blocks_per_seq · block_size]");
      max_len = std::max(max_len, len);
      for (std::int64_t i = 0; i < CeilDiv(len, spec.block_size); ++i) {
        const std::int32_t block = tables[static_cast<std::size_t>(b * max_blocks + i)];
        if (block < 0 || block >= spec.num_blocks)
          io.Fail("block_tables[", b, "][", i, "] = ", block, " outside the pool");
      }
    }
    if (spec.layout == KvLayout::kNhd || io.Has("kv_indptr")) {
      const std::vector<std::int32_t> indptr = io.Get("kv_indptr", "I32", {batch + 1}).As<std::int32_t>();
      const Tensor& last_t = io.Get("kv_last_page_len", "I32", {batch});
      const std::vector<std::int32_t> last = last_t.As<std::int32_t>();
      const Tensor& indices_t = io.Get("kv_indices", "I32", {std::max<std::int64_t>(indptr.back(), 0)});
      const std::vector<std::int32_t> indices = indices_t.As<std::int32_t>();
      // indptr first, whole, so that every page index below lies inside kv_indices.
      if (indptr[0] != 0) io.Fail("kv_indptr[0] = ", indptr[0], ", not 0");
      for (std::int64_t b = 0; b < batch; ++b) {
        const auto bi = static_cast<std::size_t>(b);
        const std::int64_t len = lens[bi], pages = CeilDiv(len, spec.block_size);
        if (indptr[bi + 1] - indptr[bi] != pages || last[bi] != len - (pages - 1) * spec.block_size)
          io.Fail("sequence ", b, ": kv_indptr / kv_last_page_len do not describe seq_lens[", b, "] = ", len);
      }
      for (std::int64_t b = 0; b < batch; ++b) {
        const auto bi = static_cast<std::size_t>(b);
        for (std::int64_t i = 0; i < indptr[bi + 1] - indptr[bi]; ++i)
          if (indices[static_cast<std::size_t>(indptr[bi] + i)] !=
              tables[static_cast<std::size_t>(b * max_blocks + i)])
            io.Fail("sequence ", b, ": kv_indices page ", i, " differs from block_tables");
      }
      indptr_d.emplace(io.Get("kv_indptr", "I32", {batch + 1}));
      indices_d.emplace(indices_t);
      last_d.emplace(last_t);
    }
    tables_d.emplace(tables_t);
    lens_d.emplace(lens_t);
  }

  PageTable View(std::int64_t max_blocks) const {
    PageTable pages;
    pages.block_tables = tables_d->as<std::int32_t>();
    pages.seq_lens = lens_d->as<std::int32_t>();
    pages.max_blocks_per_seq = static_cast<int>(max_blocks);
    if (indptr_d) {
      pages.kv_indptr = indptr_d->as<std::int32_t>();
      pages.kv_indices = indices_d->as<std::int32_t>();
      pages.kv_last_page_len = last_d->as<std::int32_t>();
    }
    return pages;
  }
};

std::map<std::string, Tensor> RunAttentionDecode(const CaseIo& io) {
  const CacheSpec spec = CacheSpec::Read(io);
  const std::int64_t batch = io.Int("batch"), heads = io.Int("n_heads"),
                     max_blocks = io.Int("max_blocks_per_seq");
  if (heads % spec.n_kv_heads != 0)
    io.Fail("n_heads ", heads, " is not a multiple of n_kv_heads ", spec.n_kv_heads);
  if (batch > 65535) io.Fail("batch = ", batch, " is more than the kernel's grid takes (65535)");
  const PagedSequences seqs(io, spec, batch, max_blocks, 1);
  const DeviceBuffer k(io.Get("k_cache", spec.tensor_dtype, spec.k_shape));
  const DeviceBuffer v(io.Get("v_cache", spec.tensor_dtype, spec.v_shape));
  const DeviceBuffer k_scale(spec.Scale(io, "k_scale")), v_scale(spec.Scale(io, "v_scale"));
  const DeviceBuffer q(io.Get("q", "F32", {batch, heads, spec.head_dim}));
  DeviceBuffer scores(static_cast<std::size_t>(batch * heads * seqs.max_len) * sizeof(float));
  DeviceBuffer out(static_cast<std::size_t>(batch * heads * spec.head_dim) * sizeof(float));
  if (!check_only_pass)
    AttentionDecode(spec.View(k, v, k_scale, v_scale), seqs.View(max_blocks), q.as<float>(), out.as<float>(),
                    scores.as<float>(), static_cast<int>(batch), static_cast<int>(heads),
                    static_cast<int>(seqs.max_len), static_cast<float>(io.Number("softmax_scale")),
                    io.HasParam("window") ? io.Int32("window", 0) : 0, run_precision);
  return {{"out", out.Download("F32", {batch, heads, spec.head_dim})}};
}

// One sequence of first_pos + rows positions, the last `rows` of them queries (docs/fixtures.md
// "attention_prefill"). Paged (nhd): seq_lens[0] must be first_pos + rows, its pages checked as for
// attention_decode. Contiguous: k_cache / v_cache [n_kv_heads][capacity][head_dim], capacity ≥ first_pos +
// rows, read as one block of `capacity` positions through the table {0}; positions ≥ first_pos + rows (NaN)
// are never read.
std::map<std::string, Tensor> RunAttentionPrefill(const CaseIo& io) {
  const bool contiguous = io.String("layout") == "contiguous";
  CacheSpec spec;
  std::int64_t max_blocks = 1;
  if (contiguous) {
    spec.layout = KvLayout::kContiguous;
    spec.SetDtype(io.String("kv_dtype"));
    spec.n_kv_heads = io.Int("n_kv_heads");
    spec.head_dim = io.Int("head_dim");
    spec.block_size = io.Int("capacity");
    spec.num_blocks = 1;
    spec.k_shape = spec.v_shape = {spec.n_kv_heads, spec.block_size, spec.head_dim};
  } else {
    spec = CacheSpec::Read(io);
    max_blocks = io.Int("max_blocks_per_seq");
  }
  const std::int64_t heads = io.Int("n_heads"), rows = io.Int("rows"), first_pos = io.Int("first_pos", 0);
  const std::int64_t len = first_pos + rows;
  if (heads % spec.n_kv_heads != 0)
    io.Fail("n_heads ", heads, " is not a multiple of n_kv_heads ", spec.n_kv_heads);
  if (rows > 65535) io.Fail("rows = ", rows, " is more than the kernel's grid takes (65535)");
  if (len > std::numeric_limits<std::int32_t>::max())
    io.Fail("first_pos + rows = ", len, " does not fit the kernel's int32 positions");

  std::optional<PagedSequences> seqs;
  std::optional<DeviceBuffer> table_d, len_d;
  PageTable pages;
  if (contiguous) {
    if (len > spec.block_size)
      io.Fail("first_pos + rows = ", len, " is more than capacity = ", spec.block_size);
    const std::vector<std::int32_t> table{0}, lens{static_cast<std::int32_t>(len)};
    table_d.emplace(Tensor::From<std::int32_t>("I32", {1, 1}, table));
    len_d.emplace(Tensor::From<std::int32_t>("I32", {1}, lens));
    pages.block_tables = table_d->as<std::int32_t>();
    pages.seq_lens = len_d->as<std::int32_t>();
    pages.max_blocks_per_seq = 1;
  } else {
    seqs.emplace(io, spec, 1, max_blocks, rows);
    if (seqs->lens[0] != len) io.Fail("seq_lens[0] = ", seqs->lens[0], ", not first_pos + rows = ", len);
    pages = seqs->View(max_blocks);
  }
  const DeviceBuffer k(io.Get("k_cache", spec.tensor_dtype, spec.k_shape));
  const DeviceBuffer v(io.Get("v_cache", spec.tensor_dtype, spec.v_shape));
  const DeviceBuffer k_scale(spec.Scale(io, "k_scale")), v_scale(spec.Scale(io, "v_scale"));
  const DeviceBuffer q(io.Get("q", "F32", {rows, heads, spec.head_dim}));
  DeviceBuffer scores(static_cast<std::size_t>(rows * heads * len) * sizeof(float));
  DeviceBuffer out(static_cast<std::size_t>(rows * heads * spec.head_dim) * sizeof(float));
  if (!check_only_pass)
    AttentionPrefill(spec.View(k, v, k_scale, v_scale), pages, q.as<float>(), out.as<float>(),
                     scores.as<float>(), static_cast<int>(rows), static_cast<int>(heads),
                     static_cast<int>(len), static_cast<float>(io.Number("softmax_scale")),
                     io.HasParam("window") ? io.Int32("window", 0) : 0, run_precision);
  return {{"out", out.Download("F32", {rows, heads, spec.head_dim})}};
}

std::map<std::string, Tensor> RunReshapeAndCache(const CaseIo& io) {
  const CacheSpec spec = CacheSpec::Read(io);
  const std::int64_t tokens = io.Int("tokens");
  const Tensor& slots_t = io.Get("slot_mapping", "I64", {tokens});
  for (std::int64_t slot : slots_t.As<std::int64_t>())
    if (slot >= spec.num_blocks * spec.block_size) io.Fail("slot ", slot, " is past the pool's last slot");
  const Shape rows{tokens, spec.n_kv_heads, spec.head_dim};
  const DeviceBuffer key(io.Get("key", "F32", rows)), value(io.Get("value", "F32", rows)), slots(slots_t);
  const DeviceBuffer k(io.Get("k_cache_in", spec.tensor_dtype, spec.k_shape));
  const DeviceBuffer v(io.Get("v_cache_in", spec.tensor_dtype, spec.v_shape));
  const DeviceBuffer k_scale(spec.Scale(io, "k_scale")), v_scale(spec.Scale(io, "v_scale"));
  if (!check_only_pass)
    ReshapeAndCache(spec.View(k, v, k_scale, v_scale), key.as<float>(), value.as<float>(),
                    slots.as<std::int64_t>(), static_cast<int>(tokens));
  return {{"k_cache", k.Download(spec.tensor_dtype, spec.k_shape)},
          {"v_cache", v.Download(spec.tensor_dtype, spec.v_shape)}};
}

// ---- multi-head latent attention (docs/fixtures.md "mla_decode and mla_prefill") -------------------------

// Both ops: mla_decode's `rows` is 1, mla_prefill's the chunk's length. Every table entry the kernel follows
// (those of a sequence's first ceil(seq_len / block_size) pages) lies in the pool and every seq_len in
// [rows, max_blocks_per_seq · block_size], so that it reads only written rows of the cache.
std::map<std::string, Tensor> RunMla(const CaseIo& io) {
  const std::int64_t heads = io.Int("n_heads"), latent = io.Int("kv_lora_rank"),
                     nope = io.Int("qk_nope_head_dim"), rope = io.Int("qk_rope_head_dim"),
                     v = io.Int("v_head_dim"), block_size = io.Int("block_size"),
                     num_blocks = io.Int("num_blocks"), max_blocks = io.Int("max_blocks_per_seq"),
                     batch = io.Int("batch"), rows = io.Int("rows");
  const std::int64_t tokens = batch * rows;
  MlaShape shape;
  shape.heads = static_cast<int>(heads);
  shape.latent = static_cast<int>(latent);
  shape.nope = static_cast<int>(nope);
  shape.rope = static_cast<int>(rope);
  shape.v = static_cast<int>(v);
  shape.rows = static_cast<int>(rows);
  if (heads > 65535) io.Fail("n_heads = ", heads, " is more than the kernel's grid takes (65535)");
  if (tokens > std::numeric_limits<std::int32_t>::max())
    io.Fail("batch · rows = ", tokens, " query tokens do not fit the kernel's grid");
  if (MlaSharedBytes(shape) > kMlaMaxSharedBytes)
    io.Fail("kv_lora_rank = ", latent, " with qk_rope_head_dim = ", rope, " needs more than the kernel's ",
            kMlaMaxSharedBytes, " bytes of shared memory");
  const Tensor& tables_t = io.Get("block_tables", "I32", {batch, max_blocks});
  const Tensor& lens_t = io.Get("seq_lens", "I32", {batch});
  const std::vector<std::int32_t> tables = tables_t.As<std::int32_t>(), lens = lens_t.As<std::int32_t>();
  std::int64_t max_len = 0;
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::int64_t len = lens[static_cast<std::size_t>(b)];
    if (len < rows || len > max_blocks * block_size)
      io.Fail("seq_lens[", b, "] = ", len, " outside [rows = ", rows,
              ", max_blocks_per_seq · block_size = ", max_blocks * block_size, "]");
    max_len = std::max(max_len, len);
    for (std::int64_t i = 0; i < CeilDiv(len, block_size); ++i) {
      const std::int32_t block = tables[static_cast<std::size_t>(b * max_blocks + i)];
      if (block < 0 || block >= num_blocks)
        io.Fail("block_tables[", b, "][", i, "] = ", block, " outside the pool [0, ", num_blocks, ")");
    }
  }
  const DeviceBuffer q_nope(io.Get("q_nope", "F32", {tokens, heads, nope}));
  const DeviceBuffer q_pe(io.Get("q_pe", "F32", {tokens, heads, rope}));
  const DeviceBuffer kv(io.Get("kv_cache", "F32", {num_blocks, block_size, latent + rope}));
  const DeviceBuffer w_uk(io.Get("w_uk", "F32", {heads, nope, latent}));
  const DeviceBuffer w_uv(io.Get("w_uv", "F32", {heads, v, latent}));
  const DeviceBuffer tables_d(tables_t), lens_d(lens_t);
  MlaCache cache;
  cache.kv = kv.as<float>();
  cache.block_tables = tables_d.as<std::int32_t>();
  cache.seq_lens = lens_d.as<std::int32_t>();
  cache.block_size = static_cast<int>(block_size);
  cache.max_blocks_per_seq = static_cast<int>(max_blocks);
  DeviceBuffer scores(static_cast<std::size_t>(tokens * heads * max_len) * sizeof(float));
  DeviceBuffer out(static_cast<std::size_t>(tokens * heads * v) * sizeof(float));
  if (!check_only_pass)
    Mla(cache, q_nope.as<float>(), q_pe.as<float>(), w_uk.as<float>(), w_uv.as<float>(), out.as<float>(),
        scores.as<float>(), shape, static_cast<int>(batch), static_cast<int>(max_len),
        static_cast<float>(io.Number("softmax_scale")));
  return {{"out", out.Download("F32", {tokens, heads, v})}};
}

// ---- mixture of experts (docs/fixtures.md "moe_route", "moe_experts", "moe_align_block_size") -----------

std::map<std::string, Tensor> RunMoeRoute(const CaseIo& io) {
  const std::string routing = io.String("routing");
  MoeRouteParams p;
  p.routing = routing == "softmax_topk"   ? MoeRouting::kSoftmaxTopK
              : routing == "topk_softmax" ? MoeRouting::kTopKSoftmax
                                          : MoeRouting::kSigmoidGroupTopK;
  const std::int64_t tokens = io.Int("tokens"), experts = io.Int("experts"), top_k = io.Int("top_k");
  if (experts > kMoeRouteMaxExperts)
    io.Fail("experts = ", experts, " is more than the kernel's ", kMoeRouteMaxExperts);
  if (top_k > experts) io.Fail("top_k = ", top_k, " outside [1, experts = ", experts, "]");
  p.experts = static_cast<int>(experts);
  p.top_k = static_cast<int>(top_k);
  const bool sigmoid = p.routing == MoeRouting::kSigmoidGroupTopK;
  if (p.routing != MoeRouting::kTopKSoftmax) p.renormalize = io.Bool("renormalize");
  if (sigmoid) {
    // moe_router.h CheckMoeRouterParams' conditions: groups of at least two, enough experts to choose from.
    p.groups = io.Int32("groups");
    p.top_groups = io.Int32("top_groups");
    p.scaling = static_cast<float>(io.Number("scaling"));
    if (experts % p.groups != 0 || experts / p.groups < 2)
      io.Fail("groups = ", p.groups, " does not divide experts = ", experts, " into groups of at least 2");
    if (p.top_groups > p.groups) io.Fail("top_groups = ", p.top_groups, " is more than groups = ", p.groups);
    if (p.top_groups * (experts / p.groups) < top_k)
      io.Fail("top_groups = ", p.top_groups, " groups hold fewer experts than top_k = ", top_k);
  }
  const DeviceBuffer logits(io.Get("logits", "F32", {tokens, experts}));
  std::optional<DeviceBuffer> bias;
  if (sigmoid) bias.emplace(io.Get("bias", "F32", {experts}));
  DeviceBuffer ids(static_cast<std::size_t>(tokens * top_k) * sizeof(std::int32_t));
  DeviceBuffer weights(static_cast<std::size_t>(tokens * top_k) * sizeof(float));
  if (!check_only_pass)
    MoeRoute(p, logits.as<float>(), bias ? bias->as<float>() : nullptr, ids.as<std::int32_t>(),
             weights.as<float>(), static_cast<int>(tokens));
  return {{"ids", ids.Download("I32", {tokens, top_k})},
          {"weights", weights.Download("F32", {tokens, top_k})}};
}

std::map<std::string, Tensor> RunMoeExperts(const CaseIo& io) {
  const std::string dtype = io.String("weight_dtype");
  const std::int64_t tokens = io.Int("tokens"), d = io.Int("d"), f = io.Int("f"), experts = io.Int("experts"),
                     top_k = io.Int("top_k");
  const std::int64_t shared_f = io.HasParam("shared_f") ? io.Int("shared_f") : 0;
  if (shared_f == 0 && (io.Has("shared_gate") || io.Has("w_shared_gate")))
    io.Fail("a shared expert's inputs without params.shared_f");
  const DeviceBuffer x(io.Get("x", "F32", {tokens, d}));
  const Tensor& ids_t = io.Get("ids", "I32", {tokens, top_k});
  const std::vector<std::int32_t> ids = ids_t.As<std::int32_t>();
  for (std::size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= experts)
      io.Fail("ids[", i / static_cast<std::size_t>(top_k), "][", i % static_cast<std::size_t>(top_k),
              "] = ", ids[i], " outside [0, experts = ", experts, ")");
  const DeviceBuffer ids_d(ids_t), weights(io.Get("weights", "F32", {tokens, top_k}));

  // The stacked weights `name` ([count][rows][cols]) as docs/fixtures.md stores them: F32, BF16, or MXFP4
  // codes [count][rows][ceil(cols/2)] with E8M0 block scales `name`_scales [count][rows][ceil(cols/32)].
  std::deque<DeviceBuffer> held;  // alive until the kernels have run (a deque never moves them)
  auto stacked = [&](const std::string& name, std::int64_t count, std::int64_t rows, std::int64_t cols) {
    GemvWeights w;
    if (dtype == "mxfp4") {
      w.dtype = WeightDtype::kMxfp4;
      w.w = held.emplace_back(io.Get(name, "U8", {count, rows, CeilDiv(cols, 2)})).as<void>();
      w.block_scales = held.emplace_back(io.Get(name + "_scales", "U8", {count, rows, CeilDiv(cols, 32)}))
                           .as<std::uint8_t>();
    } else {
      w.dtype = dtype == "f32" ? WeightDtype::kF32 : WeightDtype::kBf16;
      w.w = held.emplace_back(io.Get(name, dtype == "f32" ? "F32" : "BF16", {count, rows, cols})).as<void>();
    }
    return w;
  };
  MoeLayer layer;
  layer.routed = {stacked("w_gate", experts, f, d), stacked("w_up", experts, f, d),
                  stacked("w_down", experts, d, f), static_cast<int>(f)};
  layer.ids = ids_d.as<std::int32_t>();
  layer.weights = weights.as<float>();
  layer.top_k = static_cast<int>(top_k);
  std::optional<DeviceBuffer> shared_gate;
  if (shared_f > 0) {
    layer.shared = {stacked("w_shared_gate", 1, shared_f, d), stacked("w_shared_up", 1, shared_f, d),
                    stacked("w_shared_down", 1, d, shared_f), static_cast<int>(shared_f)};
    if (io.Has("shared_gate"))
      layer.shared_gate = shared_gate.emplace(io.Get("shared_gate", "F32", {d})).as<float>();
  }
  DeviceBuffer hidden(static_cast<std::size_t>(tokens * top_k * f) * sizeof(float));
  DeviceBuffer shared_hidden(static_cast<std::size_t>(tokens * shared_f) * sizeof(float));
  DeviceBuffer y(static_cast<std::size_t>(tokens * d) * sizeof(float));
  if (!check_only_pass)
    MoeExperts(layer, x.as<float>(), y.as<float>(), hidden.as<float>(), shared_hidden.as<float>(),
               static_cast<int>(tokens), static_cast<int>(d));
  return {{"y", y.Download("F32", {tokens, d})}};
}

// vLLM's permutation. Every id and map entry is checked here (the kernels index counts and segments by
// them); the outputs are cut to the P = num_tokens_post_padded the kernel returns, as an engine hands them
// over (under --check-only, to the P the routing implies, computed here, since no kernel runs).
std::map<std::string, Tensor> RunMoeAlignBlockSize(const CaseIo& io) {
  const std::int64_t tokens = io.Int("tokens"), top_k = io.Int("top_k"), experts = io.Int("experts"),
                     block = io.Int("block_size");
  if (experts > kMoeAlignMaxExperts)
    io.Fail("experts = ", experts, " is more than the kernel's ", kMoeAlignMaxExperts);
  const std::int64_t slots = tokens * top_k, capacity = MoeAlignCapacity(slots, experts, block);
  if (capacity > std::numeric_limits<std::int32_t>::max())  // every index and the pad are int32 (vLLM's)
    io.Fail("tokens·top_k = ", slots, " with experts·(block_size − 1) does not fit int32 indices");
  // The map (expert parallelism): each entry −1 or a local id in [0, experts), no local id twice.
  std::vector<std::int32_t> local(static_cast<std::size_t>(experts));
  for (std::int64_t e = 0; e < experts; ++e)
    local[static_cast<std::size_t>(e)] = static_cast<std::int32_t>(e);
  std::optional<DeviceBuffer> map_d;
  if (io.Has("expert_map")) {
    const Tensor& map_t = io.Get("expert_map", "I32", {experts});
    local = map_t.As<std::int32_t>();
    std::vector<bool> taken(local.size(), false);
    for (std::size_t e = 0; e < local.size(); ++e) {
      const std::int32_t l = local[e];
      if (l == -1) continue;
      if (l < 0 || l >= experts)
        io.Fail("expert_map[", e, "] = ", l, " is neither −1 nor in [0, ", experts, ")");
      if (taken[static_cast<std::size_t>(l)]) io.Fail("expert_map gives local id ", l, " to two experts");
      taken[static_cast<std::size_t>(l)] = true;
    }
    if (io.HasParam("ep_size") && io.Int("ep_rank", 0) >= io.Int("ep_size"))
      io.Fail("ep_rank = ", io.Int("ep_rank", 0), " is not below ep_size = ", io.Int("ep_size"));
    map_d.emplace(map_t);
  } else if (io.HasParam("ep_size") || io.HasParam("ep_rank")) {
    io.Fail("params.ep_size / ep_rank without the expert_map input they describe");
  }
  const Tensor& ids_t = io.Get("topk_ids", "I32", {tokens, top_k});
  const std::vector<std::int32_t> ids = ids_t.As<std::int32_t>();
  std::vector<std::int64_t> count(static_cast<std::size_t>(experts), 0);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= experts)
      io.Fail("topk_ids[", i / static_cast<std::size_t>(top_k), "][", i % static_cast<std::size_t>(top_k),
              "] = ", ids[i], " outside [0, experts = ", experts, ")");
    const std::int32_t l = local[static_cast<std::size_t>(ids[i])];
    if (l >= 0) ++count[static_cast<std::size_t>(l)];
  }
  std::int64_t host_p = 0;  // what the outputs' shapes are under --check-only
  for (std::int64_t n : count) host_p += CeilDiv(n, block) * block;

  const DeviceBuffer ids_d(ids_t);
  DeviceBuffer sorted(static_cast<std::size_t>(capacity) * sizeof(std::int32_t));
  DeviceBuffer expert_ids(static_cast<std::size_t>(CeilDiv(capacity, block)) * sizeof(std::int32_t));
  DeviceBuffer post(sizeof(std::int32_t));
  DeviceBuffer cursor(static_cast<std::size_t>(experts + 1) * sizeof(std::int32_t));
  if (!check_only_pass)
    MoeAlignBlockSize(ids_d.as<std::int32_t>(), map_d ? map_d->as<std::int32_t>() : nullptr,
                      static_cast<int>(slots), static_cast<int>(experts), static_cast<int>(block),
                      sorted.as<std::int32_t>(), expert_ids.as<std::int32_t>(), post.as<std::int32_t>(),
                      cursor.as<std::int32_t>(), static_cast<int>(capacity));
  Tensor post_t = post.Download("I32", {1});
  const std::int64_t p = check_only_pass ? host_p : post_t.As<std::int32_t>()[0];
  if (check_only_pass) {
    const std::vector<std::int32_t> p_value{static_cast<std::int32_t>(p)};
    post_t = Tensor::From<std::int32_t>("I32", {1}, p_value);
  }
  if (p < 0 || p > capacity || p % block != 0)  // the kernel's own P: cut nothing it did not write
    io.Fail("the kernel returned num_tokens_post_padded = ", p, ", not a multiple of block_size = ", block,
            " in [0, ", capacity, "]");
  return {{"sorted_token_ids",
           sorted.DownloadFirst("I32", {p}, static_cast<std::size_t>(p) * sizeof(std::int32_t))},
          {"expert_ids", expert_ids.DownloadFirst(
                             "I32", {p / block}, static_cast<std::size_t>(p / block) * sizeof(std::int32_t))},
          {"num_tokens_post_padded", std::move(post_t)}};
}

// ---- sampling, speculative_verify (docs/fixtures.md "sampling", "speculative_verify") ---------------------

// What the definition rejects is an error here (sampler.h ValidateSamplingParams on the params as floats; a
// NaN logit, a row of −inf logits, a uniform outside [0, 1)), so the kernel never meets it.
std::map<std::string, Tensor> RunSampling(const CaseIo& io) {
  const std::int64_t rows = io.Int("rows"), vocab = io.Int("vocab");
  SamplingConfig config;
  config.temperature = static_cast<float>(io.Number("temperature"));
  config.top_k = io.Int32("top_k", 0);
  config.top_p = static_cast<float>(io.Number("top_p"));
  config.min_p = static_cast<float>(io.Number("min_p"));
  if (!std::isfinite(config.temperature) || config.temperature < 0.0f)
    io.Fail("temperature ", config.temperature, " must be finite and >= 0 (0: greedy)");
  if (!(config.top_p > 0.0f && config.top_p <= 1.0f)) io.Fail("top_p ", config.top_p, " outside (0, 1]");
  if (!(config.min_p >= 0.0f && config.min_p <= 1.0f)) io.Fail("min_p ", config.min_p, " outside [0, 1]");
  const Tensor& logits_t = io.Get("logits", "F32", {rows, vocab});
  const Tensor& uniforms_t = io.Get("uniforms", "F64", {rows});
  const std::vector<float> logits = logits_t.As<float>();
  const std::vector<double> uniforms = uniforms_t.As<double>();
  for (std::int64_t r = 0; r < rows; ++r) {
    bool finite_or_plus_inf = false;
    for (std::int64_t t = 0; t < vocab; ++t) {
      const float l = logits[static_cast<std::size_t>(r * vocab + t)];
      if (std::isnan(l)) io.Fail("logits[", r, "][", t, "] is NaN");
      finite_or_plus_inf = finite_or_plus_inf || l > -std::numeric_limits<float>::infinity();
    }
    if (!finite_or_plus_inf) io.Fail("logits[", r, "] are all −inf: nothing can be sampled");
    const double u = uniforms[static_cast<std::size_t>(r)];
    if (!(u >= 0.0 && u < 1.0)) io.Fail("uniforms[", r, "] = ", u, " outside [0, 1)");
  }
  const DeviceBuffer logits_d(logits_t), uniforms_d(uniforms_t);
  DeviceBuffer weights(static_cast<std::size_t>(rows * vocab) * sizeof(double));
  DeviceBuffer order(static_cast<std::size_t>(rows * vocab) * sizeof(std::int32_t));
  DeviceBuffer tokens(static_cast<std::size_t>(rows) * sizeof(std::int32_t));
  if (!check_only_pass)
    Sample(config, logits_d.as<float>(), uniforms_d.as<double>(), tokens.as<std::int32_t>(),
           weights.as<double>(), order.as<std::int32_t>(), static_cast<int>(rows), static_cast<int>(vocab));
  return {{"tokens", tokens.Download("I32", {rows})}};
}

// What VerifyDraft rejects is an error here: a draft token outside [0, vocab), a uniform outside [0, 1), a
// probability that is negative or not finite, a distribution with no positive entry (an empty candidate
// list). So the kernel indexes the distributions only by checked ids.
std::map<std::string, Tensor> RunSpeculativeVerify(const CaseIo& io) {
  const std::int64_t rows = io.Int("rows"), k = io.Int("k", 0), vocab = io.Int("vocab");
  const Tensor& draft_t = io.Get("draft_probs", "F32", {rows, k, vocab});
  const Tensor& target_t = io.Get("target_probs", "F32", {rows, k + 1, vocab});
  const Tensor& tokens_t = io.Get("draft_tokens", "I32", {rows, k});
  const Tensor& uniforms_t = io.Get("uniforms", "F64", {rows, k + 1});
  auto check_distributions = [&](const Tensor& t, const char* name, std::int64_t count) {
    const std::vector<float> probs = t.As<float>();
    for (std::int64_t d = 0; d < rows * count; ++d) {
      bool positive = false;
      for (std::int64_t v = 0; v < vocab; ++v) {
        const float prob = probs[static_cast<std::size_t>(d * vocab + v)];
        if (!std::isfinite(prob) || prob < 0.0f)
          io.Fail(name, "[", d / count, "][", d % count, "][", v, "] = ", prob, "; must be finite and >= 0");
        positive = positive || prob > 0.0f;
      }
      if (!positive) io.Fail(name, "[", d / count, "][", d % count, "] has no token of positive probability");
    }
  };
  check_distributions(draft_t, "draft_probs", k);
  check_distributions(target_t, "target_probs", k + 1);
  const std::vector<std::int32_t> draft_tokens = tokens_t.As<std::int32_t>();
  for (std::size_t i = 0; i < draft_tokens.size(); ++i)
    if (draft_tokens[i] < 0 || draft_tokens[i] >= vocab)
      io.Fail("draft_tokens[", i / static_cast<std::size_t>(k), "][", i % static_cast<std::size_t>(k),
              "] = ", draft_tokens[i], " outside [0, vocab = ", vocab, ")");
  const std::vector<double> uniforms = uniforms_t.As<double>();
  for (std::size_t i = 0; i < uniforms.size(); ++i)
    if (!(uniforms[i] >= 0.0 && uniforms[i] < 1.0))
      io.Fail("uniforms[", i / static_cast<std::size_t>(k + 1), "][", i % static_cast<std::size_t>(k + 1),
              "] = ", uniforms[i], " outside [0, 1)");
  const DeviceBuffer draft(draft_t), target(target_t), tokens_in(tokens_t), uniforms_d(uniforms_t);
  DeviceBuffer accepted(static_cast<std::size_t>(rows) * sizeof(std::int32_t));
  DeviceBuffer tokens(static_cast<std::size_t>(rows * (k + 1)) * sizeof(std::int32_t));
  DeviceBuffer residual(static_cast<std::size_t>(rows * vocab) * sizeof(float));
  DeviceBuffer order(static_cast<std::size_t>(rows * vocab) * sizeof(std::int32_t));
  if (!check_only_pass)
    SpeculativeVerify(draft.as<float>(), target.as<float>(), tokens_in.as<std::int32_t>(),
                      uniforms_d.as<double>(), accepted.as<std::int32_t>(), tokens.as<std::int32_t>(),
                      residual.as<float>(), order.as<std::int32_t>(), static_cast<int>(rows),
                      static_cast<int>(k), static_cast<int>(vocab));
  return {{"accepted", accepted.Download("I32", {rows})},
          {"tokens", tokens.Download("I32", {rows, k + 1})},
          {"residual", residual.Download("F32", {rows, vocab})}};
}

}  // namespace

std::map<std::string, Tensor> RunCase(const Case& c, const TensorFile& in, bool check_only,
                                      Precision precision, const ModelSource& models) {
  check_only_pass = check_only;
  run_precision = precision;
  const CaseIo io(c, in);
  if (c.op == "gemv" || c.op == "gemm") return RunGemv(c, io);
  if (c.op == "rmsnorm") return RunRmsNorm(io);
  if (c.op == "softmax") return RunSoftmax(io);
  if (c.op == "swiglu") return RunSwiglu(io);
  if (c.op == "kv_quant") return RunKvQuant(io);
  if (c.op == "rope") return RunRope(io);
  if (c.op == "attention_decode") return RunAttentionDecode(io);
  if (c.op == "attention_prefill") return RunAttentionPrefill(io);
  if (c.op == "sampling") return RunSampling(io);
  if (c.op == "speculative_verify") return RunSpeculativeVerify(io);
  if (c.op == "reshape_and_cache") return RunReshapeAndCache(io);
  if (c.op == "mla_decode" || c.op == "mla_prefill") return RunMla(io);
  if (c.op == "moe_route") return RunMoeRoute(io);
  if (c.op == "moe_experts") return RunMoeExperts(io);
  if (c.op == "moe_align_block_size") return RunMoeAlignBlockSize(io);
  if (c.op == "layer" || c.op == "end_to_end" || c.op == "kv_handoff" || c.op == "tp_layer")
    return RunModelCase(io, models);  // model.cpp
  throw MakeError("case ", c.name, ": op ", c.op, " is not implemented by the CUDA harness");
}

}  // namespace plumb::cuda
