// PackModel: a loaded model's weights as the tensors of a packed checkpoint (docs/formats.md "Packed
// checkpoints").
#include "plumb/model/pack.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>

#include "families.h"
#include "plumb/core/error.h"
#include "plumb/core/extent.h"
#include "plumb/formats/dtype.h"
#include "plumb/kernels/kernels.h"
#include "plumb/model/model.h"

namespace plumb {
namespace {

template <typename T>
std::vector<std::uint8_t> AsBytes(const std::vector<T>& values) {
  std::vector<std::uint8_t> bytes(values.size() * sizeof(T));
  if (!bytes.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// fn(begin, end) over [0, rows) split into contiguous blocks, one per thread. Every row is computed the same
// way whatever the split, so the output does not depend on the thread count.
template <typename Fn>
void ForRowBlocks(int rows, int threads, Fn fn) {
  threads = std::max(1, std::min(threads, rows / 64));  // small matrices are not worth a thread
  if (threads == 1) {
    fn(0, rows);
    return;
  }
  std::vector<std::thread> pool;
  std::exception_ptr failure;
  std::mutex mutex;
  for (int t = 0; t < threads; ++t) {
    const int begin = static_cast<int>(static_cast<long long>(rows) * t / threads);
    const int end = static_cast<int>(static_cast<long long>(rows) * (t + 1) / threads);
    pool.emplace_back([&, begin, end] {
      try {
        fn(begin, end);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!failure) failure = std::current_exception();
      }
    });
  }
  for (std::thread& thread : pool) thread.join();
  if (failure) std::rethrow_exception(failure);
}

std::vector<float> DequantizedMatrix(const WeightMatrix& w) {
  std::vector<float> values(Extent(w.rows, w.cols));
  for (int r = 0; r < w.rows; ++r) kernels::DequantizeRowOf(w, r, values.data() + Extent(r, w.cols));
  return values;
}

std::vector<std::uint16_t> ToHalf(const std::vector<float>& values, bool bf16, const std::string& name) {
  std::vector<std::uint16_t> out(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    out[i] = bf16 ? F32ToBF16(values[i]) : F32ToF16(values[i]);
    if (!bf16 && std::isfinite(values[i]) && (out[i] & 0x7C00u) == 0x7C00u) {
      throw MakeError(name, ": element ", i, " = ", values[i], " is beyond the F16 range (±65504)");
    }
  }
  return out;
}

class Packer {
 public:
  Packer(const PackOptions& options, int count, const std::function<void(const PackProgress&)>& progress)
      : options_(options), count_(count), progress_(progress) {}

  // `prefix` packed as `format` (kind F32/F16/BF16 gives `prefix`.weight in that dtype).
  void Matrix(const std::string& prefix, const WeightMatrix& w, const PackFormat& format) {
    const std::vector<float> values = DequantizedMatrix(w);
    const std::int64_t rows = w.rows, cols = w.cols;
    switch (format.kind) {
      case PackKind::kF32:
        Add(prefix + ".weight", DType::F32, {rows, cols}, AsBytes(values));
        break;
      case PackKind::kF16:
      case PackKind::kBF16: {
        const bool bf16 = format.kind == PackKind::kBF16;
        Add(prefix + ".weight", bf16 ? DType::BF16 : DType::F16, {rows, cols},
            AsBytes(ToHalf(values, bf16, prefix + ".weight")));
        break;
      }
      case PackKind::kFp8: {
        Fp8Matrix q = Fp8(values, w.rows, w.cols, format);
        Add(prefix + ".weight", format.fp8 == Fp8Format::kE4M3 ? DType::F8_E4M3 : DType::F8_E5M2,
            {rows, cols}, std::move(q.codes));
        Add(prefix + ".weight_scale", DType::F32,
            format.fp8_per_row ? std::vector<std::int64_t>{rows} : std::vector<std::int64_t>{},
            AsBytes(q.scales));
        break;
      }
      case PackKind::kInt4:
        Int4(prefix, values, w.rows, w.cols, format.int4);
        break;
      case PackKind::kMicroscaled:
        Microscaled(prefix, values, w.rows, w.cols, format.mx);
        break;
      case PackKind::kBlockFp8: {
        // DeepSeek-V3's tensors: the E4M3 codes and the dequantization multipliers it calls
        // weight_scale_inv, [⌈rows/128⌉][⌈cols/128⌉]. One piece: a block's scale spans 128 rows.
        BlockFp8Matrix q = QuantizeBlockFp8(values.data(), w.rows, w.cols);
        Add(prefix + ".weight", DType::F8_E4M3, {rows, cols}, std::move(q.codes));
        Add(prefix + ".weight_scale_inv", DType::F32, {Fp8BlockCount(w.rows), Fp8BlockCount(w.cols)},
            AsBytes(q.scales));
        break;
      }
    }
    Done(prefix);
  }

  void Vector(const std::string& name, const std::vector<float>& values) {
    Add(name, DType::F32, {static_cast<std::int64_t>(values.size())}, AsBytes(values));
    Done(name);
  }

  std::vector<TensorToWrite> Take() { return std::move(tensors_); }

 private:
  // Per-channel scales make rows independent, so blocks of rows are quantized side by side; a per-tensor
  // scale needs the whole matrix's amax, so that case runs as one block.
  Fp8Matrix Fp8(const std::vector<float>& values, int rows, int cols, const PackFormat& format) const {
    if (!format.fp8_per_row) return QuantizeFp8(values.data(), rows, cols, format.fp8, false);
    Fp8Matrix out{format.fp8,
                  rows,
                  cols,
                  true,
                  std::vector<std::uint8_t>(Extent(rows, cols)),
                  std::vector<float>(rows)};
    ForRowBlocks(rows, options_.threads, [&](int begin, int end) {
      const Fp8Matrix q =
          QuantizeFp8(values.data() + Extent(begin, cols), end - begin, cols, format.fp8, true);
      std::copy(q.codes.begin(), q.codes.end(), out.codes.begin() + Extent(begin, cols));
      std::copy(q.scales.begin(), q.scales.end(), out.scales.begin() + begin);
    });
    return out;
  }

  // Rows are independent in every INT4 scheme, so blocks of rows are quantized side by side and appended.
  void Int4(const std::string& prefix, const std::vector<float>& values, int rows, int cols,
            Int4Params params) {
    const int groups = Int4Groups(cols, params.group_size);
    const std::size_t code_row = Int4RowBytes(cols), zero_row = Int4ZeroRowBytes(params, cols);
    std::vector<std::uint8_t> codes(code_row * rows), zeros(zero_row * rows);
    std::vector<std::uint16_t> scales(Extent(groups, rows));
    ForRowBlocks(rows, options_.threads, [&](int begin, int end) {
      const Int4Matrix q = QuantizeInt4(values.data() + Extent(begin, cols), end - begin, cols, params);
      std::copy(q.codes.begin(), q.codes.end(), codes.begin() + code_row * begin);
      std::copy(q.scales.begin(), q.scales.end(), scales.begin() + Extent(groups, begin));
      std::copy(q.zeros.begin(), q.zeros.end(), zeros.begin() + zero_row * begin);
    });
    Add(prefix + ".qweight", DType::U8, {rows, static_cast<std::int64_t>(code_row)}, std::move(codes));
    Add(prefix + ".scales", DType::F16, {rows, groups}, AsBytes(scales));
    if (params.scheme == Int4Scheme::kAsymmetric) {
      Add(prefix + ".qzeros", DType::U8, {rows, static_cast<std::int64_t>(zero_row)}, std::move(zeros));
    } else if (params.scheme == Int4Scheme::kAsymmetricF16Zero) {
      Add(prefix + ".qzeros", DType::F16, {rows, groups}, std::move(zeros));
    }
  }

  // docs/formats.md "Packed checkpoints": `prefix`.weight U8 [rows][row bytes] (the element codes),
  // .weight_scale [rows][blocks] (E8M0 codes as U8; NVFP4's as F8_E4M3), and NVFP4's tensor scale as
  // .weight_scale_2 F32 [] (NVIDIA Model Optimizer's names). The MX schemes' rows are independent, so blocks
  // of rows are quantized side by side; NVFP4's tensor scale needs the whole matrix's amax.
  void Microscaled(const std::string& prefix, const std::vector<float>& values, int rows, int cols,
                   MicroscalingScheme scheme) {
    const std::size_t row_bytes = MicroscaledRowBytes(scheme, cols);
    const int blocks = MicroscaledBlocks(scheme, cols);
    MicroscaledMatrix q;
    if (scheme == MicroscalingScheme::kNvfp4) {
      q = QuantizeMicroscaled(values.data(), rows, cols, scheme);
    } else {
      q = {scheme,
           rows,
           cols,
           std::vector<std::uint8_t>(Extent(rows, row_bytes)),
           std::vector<std::uint8_t>(Extent(rows, blocks)),
           1.0f};
      ForRowBlocks(rows, options_.threads, [&](int begin, int end) {
        const MicroscaledMatrix part =
            QuantizeMicroscaled(values.data() + Extent(begin, cols), end - begin, cols, scheme);
        std::copy(part.codes.begin(), part.codes.end(), q.codes.begin() + Extent(begin, row_bytes));
        std::copy(part.scales.begin(), part.scales.end(), q.scales.begin() + Extent(begin, blocks));
      });
    }
    Add(prefix + ".weight", DType::U8, {rows, static_cast<std::int64_t>(row_bytes)}, std::move(q.codes));
    Add(prefix + ".weight_scale", scheme == MicroscalingScheme::kNvfp4 ? DType::F8_E4M3 : DType::U8,
        {rows, blocks}, std::move(q.scales));
    if (scheme == MicroscalingScheme::kNvfp4) {
      Add(prefix + ".weight_scale_2", DType::F32, {}, AsBytes(std::vector<float>{q.tensor_scale}));
    }
  }

  void Add(std::string name, DType dtype, std::vector<std::int64_t> shape, std::vector<std::uint8_t> bytes) {
    bytes_ += bytes.size();
    tensors_.push_back({std::move(name), dtype, std::move(shape), std::move(bytes)});
  }

  void Done(const std::string& name) {
    ++index_;
    if (progress_) progress_({index_, count_, name, bytes_});
  }

  const PackOptions& options_;
  int count_;
  const std::function<void(const PackProgress&)>& progress_;
  int index_ = 0;
  std::size_t bytes_ = 0;
  std::vector<TensorToWrite> tensors_;
};

}  // namespace

PackedCheckpoint PackModel(const ModelConfig& config, const ModelWeights& weights, const PackOptions& options,
                           const std::function<void(const PackProgress&)>& progress) {
  const PackFormat& format = options.format;
  if (options.keep_embedding && !format.IsQuantized()) {
    throw MakeError("--keep-embedding applies to the FP8, INT4 and microscaled formats only (", format.Name(),
                    " stores the embedding as ", format.Name(), " already)");
  }
  if (const Family& family = FamilyOf(config); !family.writes_config_json) {
    // Its switches (extra norms, soft-caps, fused tensors, ...) have no place in the config.json a pack
    // writes.
    throw MakeError("plumb pack writes ", HfModelTypeNames(&Family::writes_config_json), " models; ",
                    family.name, " runs from its own checkpoint");
  }
  PackedCheckpoint out{config, {}};
  out.config.packing.reset();
  if (format.IsQuantized()) out.config.packing = WeightPacking{format, !options.keep_embedding};
  PackFormat embedding = format;
  if (options.keep_embedding)
    embedding = PackFormat{.kind = PackKind::kF16, .fp8 = {}, .fp8_per_row = true, .int4 = {}, .mx = {}};

  const bool untied_head = weights.lm_head.rows > 0;
  int count = 2 + (untied_head ? 1 : 0);
  for (const LayerWeights& l : weights.layers) {
    count += 9 + (l.bq.empty() ? 0 : 3) + (l.q_norm.empty() ? 0 : 2);
    if (l.IsMoe()) count += 1 + 3 * static_cast<int>(l.experts.size()) - 3;
  }
  // The router stays exact (F32 holds any stored type): its logits choose the experts, and quantizing it
  // would change which experts a token reaches, as vLLM and llm-compressor leave it unquantized too.
  const PackFormat router{.kind = PackKind::kF32, .fp8 = {}, .fp8_per_row = true, .int4 = {}, .mx = {}};
  Packer packer(options, count, progress);
  packer.Matrix("model.embed_tokens", weights.token_embedding, embedding);
  for (std::size_t i = 0; i < weights.layers.size(); ++i) {
    const LayerWeights& l = weights.layers[i];
    const std::string p = "model.layers." + std::to_string(i) + ".";
    packer.Vector(p + "input_layernorm.weight", l.attn_norm);
    packer.Matrix(p + "self_attn.q_proj", l.wq, format);
    packer.Matrix(p + "self_attn.k_proj", l.wk, format);
    packer.Matrix(p + "self_attn.v_proj", l.wv, format);
    if (!l.bq.empty()) {
      packer.Vector(p + "self_attn.q_proj.bias", l.bq);
      packer.Vector(p + "self_attn.k_proj.bias", l.bk);
      packer.Vector(p + "self_attn.v_proj.bias", l.bv);
    }
    packer.Matrix(p + "self_attn.o_proj", l.wo, format);
    if (!l.q_norm.empty()) {
      packer.Vector(p + "self_attn.q_norm.weight", l.q_norm);
      packer.Vector(p + "self_attn.k_norm.weight", l.k_norm);
    }
    packer.Vector(p + "post_attention_layernorm.weight", l.mlp_norm);
    if (l.IsMoe()) {
      packer.Matrix(p + "mlp.gate", l.router, router);
      for (std::size_t e = 0; e < l.experts.size(); ++e) {
        const std::string x = p + "mlp.experts." + std::to_string(e) + ".";
        packer.Matrix(x + "gate_proj", l.experts[e].w_gate, format);
        packer.Matrix(x + "up_proj", l.experts[e].w_up, format);
        packer.Matrix(x + "down_proj", l.experts[e].w_down, format);
      }
      continue;
    }
    packer.Matrix(p + "mlp.gate_proj", l.w_gate, format);
    packer.Matrix(p + "mlp.up_proj", l.w_up, format);
    packer.Matrix(p + "mlp.down_proj", l.w_down, format);
  }
  packer.Vector("model.norm.weight", weights.final_norm);
  if (untied_head) packer.Matrix("lm_head", weights.lm_head, embedding);
  out.tensors = packer.Take();
  return out;
}

Model RepackModel(const Model& source, const PackOptions& options) {
  PackedCheckpoint packed = PackModel(source.config(), source.weights(), options);
  auto file = std::make_shared<const SafetensorsFile>(
      SafetensorsFile::FromBytes(SerializeSafetensors(std::move(packed.tensors), {{"format", "pt"}}),
                                 "repacked " + options.format.Name()));
  ModelWeights weights = LoadSafetensorsWeights(packed.config, {file});
  return Model(std::move(packed.config), std::move(weights));
}

}  // namespace plumb
