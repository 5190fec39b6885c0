// Hugging Face safetensors → ModelWeights: plain checkpoints (F32, F16, BF16) and the packed checkpoints
// plumb pack writes (FP8, INT4; docs/formats.md "Packed checkpoints").
#include "plumb/model/weights.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string_view>

#include "families.h"
#include "plumb/core/error.h"
#include "plumb/formats/safetensors.h"

namespace plumb {
namespace {

std::string ShapeText(const std::vector<std::int64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

// An array copied out of the mapping into storage aligned for T: the kernels read FP16 scales as
// std::uint16_t and FP8 scales as float, and safetensors promises no alignment.
template <typename T>
std::shared_ptr<const std::vector<T>> AlignedCopy(std::span<const std::uint8_t> bytes) {
  auto out = std::make_shared<std::vector<T>>(bytes.size() / sizeof(T));
  if (!bytes.empty()) std::memcpy(out->data(), bytes.data(), bytes.size());
  return out;
}

// Keeps several owners alive as one.
struct Owners {
  std::shared_ptr<const void> file, a, b;
};

// Finds each tensor name in whichever shard holds it.
class ShardSet {
 public:
  explicit ShardSet(std::vector<std::shared_ptr<const SafetensorsFile>> shards) : shards_(std::move(shards)) {
    if (shards_.empty()) throw MakeError("no .safetensors files given");
    for (std::size_t s = 0; s < shards_.size(); ++s) {
      for (const TensorInfo& info : shards_[s]->tensors()) {
        auto [it, inserted] = owner_.emplace(info.name, s);
        if (!inserted) {
          throw MakeError(shards_[s]->path(), ": tensor \"", info.name, "\" also appears in ",
                          shards_[it->second]->path());
        }
      }
    }
  }

  bool Contains(const std::string& name) const { return owner_.count(name) != 0; }

  // Throws naming the first tensor no read took: a part of the model plumb does not compute (Qwen3's
  // q_norm, a bias, a vision tower) must refuse the checkpoint, not be left out in silence. The RoPE
  // buffers older checkpoints saved (rotary_emb.inv_freq) are the exception: transformers itself ignores
  // them on load and derives the frequencies from config.json, as plumb does.
  void RequireAllUsed(const std::string& model_type) const {
    for (const auto& [name, shard] : owner_) {
      if (used_.count(name) != 0 || name.ends_with("rotary_emb.inv_freq")) continue;
      throw MakeError(shards_[shard]->path(), ": tensor \"", name, "\" is not part of the ", model_type,
                      " model plumb computes; refusing a checkpoint it does not fully understand "
                      "(docs/models.md \"What plumb refuses\")");
    }
  }

  std::vector<float> Vector(const std::string& name, int length) const {
    const std::int64_t shape[] = {length};
    return Shard(name).ReadF32(name, shape);
  }

  // `prefix`.weight as stored: F32 copied into an owned matrix (kernels read it as floats, which need
  // alignment), F16 and BF16 viewed in place in the mapping (RowDot reads any alignment).
  WeightMatrix Plain(const std::string& prefix, int rows, int cols) const {
    return PlainRows(prefix, rows, cols, 0, rows);
  }

  // Rows [first, first + rows) of `prefix`.weight, a [total_rows, cols] matrix, as Plain reads a whole one:
  // the parts of one that fuses several (Phi-3's qkv_proj and gate_up_proj).
  WeightMatrix PlainRows(const std::string& prefix, int total_rows, int cols, int first, int rows) const {
    const std::string name = prefix + ".weight";
    const TensorInfo& info = Checked(name, {total_rows, cols}, nullptr);
    if (info.dtype == DType::F32) {
      const std::int64_t shape[] = {total_rows, cols};
      std::vector<float> all = Shard(name).ReadF32(name, shape);
      if (first == 0 && rows == total_rows)
        return WeightMatrix::FromF32(MatrixF32{rows, cols, std::move(all)});
      const auto begin = all.begin() + static_cast<std::ptrdiff_t>(first) * cols;
      return WeightMatrix::FromF32(
          MatrixF32{rows, cols, std::vector<float>(begin, begin + static_cast<std::ptrdiff_t>(rows) * cols)});
    }
    if (info.dtype != DType::F16 && info.dtype != DType::BF16) {
      throw Fail(
          name, "has dtype ", DTypeName(info.dtype),
          ", expected F32, F16 or BF16 (or FP8 / INT4 tensors with a quantization_config in config.json)");
    }
    const std::uint8_t* data = Shard(name).Bytes(name).data() + static_cast<std::size_t>(first) * cols * 2;
    return WeightMatrix::View(info.dtype == DType::F16 ? GgmlType::F16 : GgmlType::BF16, rows, cols, data,
                              ShardOwner(name));
  }

  // `prefix`.weight (F8_E4M3 / F8_E5M2, [rows, cols]) and `prefix`.weight_scale (F32, [rows] or [] / [1]).
  WeightMatrix Fp8(const std::string& prefix, int rows, int cols, const PackFormat& format) const {
    const std::string name = prefix + ".weight";
    const DType dtype = format.fp8 == Fp8Format::kE4M3 ? DType::F8_E4M3 : DType::F8_E5M2;
    Checked(name, {rows, cols}, &dtype);
    const std::string scale_name = prefix + ".weight_scale";
    const DType f32 = DType::F32;
    const TensorInfo& scale = Checked(scale_name, {}, &f32);
    const bool shape_ok = format.fp8_per_row
                              ? scale.shape == std::vector<std::int64_t>{rows}
                              : scale.shape.empty() || scale.shape == std::vector<std::int64_t>{1};
    if (!shape_ok) {
      throw Fail(scale_name, "has shape ", ShapeText(scale.shape), ", expected ",
                 format.fp8_per_row
                     ? "[" + std::to_string(rows) + "] (quantization_config.weight_scale = channel)"
                     : std::string("[] or [1] (quantization_config.weight_scale = tensor)"));
    }
    auto scales = AlignedCopy<float>(Shard(scale_name).Bytes(scale_name));
    const float* scale_data = scales->data();
    auto owner = std::make_shared<const Owners>(Owners{ShardOwner(name), scales, nullptr});
    return WeightMatrix::Fp8View(format.fp8, rows, cols, Shard(name).Bytes(name).data(), scale_data,
                                 format.fp8_per_row, owner);
  }

  // `prefix`.qweight (U8 [rows, ceil(cols/2)]), .scales (F16 [rows, groups]) and, for the asymmetric schemes,
  // .qzeros (U8 [rows, ceil(groups/2)] or F16 [rows, groups]); the layout of formats/int4.h.
  WeightMatrix Int4(const std::string& prefix, int rows, int cols, const Int4Params& params) const {
    const int groups = Int4Groups(cols, params.group_size);
    const DType u8 = DType::U8, f16 = DType::F16;
    const std::string codes_name = prefix + ".qweight", scales_name = prefix + ".scales",
                      zeros_name = prefix + ".qzeros";
    Checked(codes_name, {rows, static_cast<std::int64_t>(Int4RowBytes(cols))}, &u8);
    Checked(scales_name, {rows, groups}, &f16);
    auto scales = AlignedCopy<std::uint16_t>(Shard(scales_name).Bytes(scales_name));
    std::shared_ptr<const std::vector<std::uint8_t>> zeros;
    if (params.scheme == Int4Scheme::kAsymmetric) {
      Checked(zeros_name, {rows, static_cast<std::int64_t>(Int4RowBytes(groups))}, &u8);
      zeros = AlignedCopy<std::uint8_t>(Shard(zeros_name).Bytes(zeros_name));
    } else if (params.scheme == Int4Scheme::kAsymmetricF16Zero) {
      Checked(zeros_name, {rows, groups}, &f16);
      zeros = AlignedCopy<std::uint8_t>(Shard(zeros_name).Bytes(zeros_name));
    } else if (Contains(zeros_name)) {
      throw Fail(zeros_name, "is present, but the symmetric scheme has no zero points");
    }
    const std::uint16_t* scale_data = scales->data();
    const std::uint8_t* zero_data = zeros ? zeros->data() : nullptr;
    auto owner = std::make_shared<const Owners>(Owners{ShardOwner(codes_name), scales, zeros});
    return WeightMatrix::Int4View(params, rows, cols, Shard(codes_name).Bytes(codes_name).data(), scale_data,
                                  zero_data, owner);
  }

  // `prefix`.weight (U8 [rows, row bytes]: the element codes), .weight_scale ([rows, blocks], U8 E8M0 codes,
  // or F8_E4M3 for NVFP4) and NVFP4's .weight_scale_2 (F32 [] or [1]); formats/microscaling.h's layout.
  WeightMatrix Microscaled(const std::string& prefix, int rows, int cols, MicroscalingScheme scheme) const {
    const bool nvfp4 = scheme == MicroscalingScheme::kNvfp4;
    const DType u8 = DType::U8, scale_dtype = nvfp4 ? DType::F8_E4M3 : DType::U8;
    const std::string codes_name = prefix + ".weight", scales_name = prefix + ".weight_scale",
                      tensor_scale_name = prefix + ".weight_scale_2";
    Checked(codes_name, {rows, static_cast<std::int64_t>(MicroscaledRowBytes(scheme, cols))}, &u8);
    Checked(scales_name, {rows, MicroscaledBlocks(scheme, cols)}, &scale_dtype);
    float tensor_scale = 1.0f;
    if (nvfp4) {
      const DType f32 = DType::F32;
      const TensorInfo& info = Checked(tensor_scale_name, {}, &f32);
      if (!info.shape.empty() && info.shape != std::vector<std::int64_t>{1}) {
        throw Fail(tensor_scale_name, "has shape ", ShapeText(info.shape), ", expected [] or [1]");
      }
      std::memcpy(&tensor_scale, Shard(tensor_scale_name).Bytes(tensor_scale_name).data(),
                  sizeof tensor_scale);
      if (!(std::isfinite(tensor_scale) && tensor_scale > 0.0f)) {
        throw Fail(tensor_scale_name, "is ", tensor_scale, ", expected a positive finite number");
      }
    } else if (Contains(tensor_scale_name)) {
      throw Fail(tensor_scale_name, "is present, but ", MicroscalingSchemeName(scheme),
                 " has no tensor scale");
    }
    auto owner =
        std::make_shared<const Owners>(Owners{ShardOwner(codes_name), ShardOwner(scales_name), nullptr});
    return WeightMatrix::MicroscaledView(scheme, rows, cols, Shard(codes_name).Bytes(codes_name).data(),
                                         Shard(scales_name).Bytes(scales_name).data(), tensor_scale, owner);
  }

  // `prefix`.weight (F8_E4M3 [rows, cols]) and .weight_scale_inv (F32 [⌈rows/128⌉, ⌈cols/128⌉], the
  // dequantization multipliers: DeepSeek-V3's names and layout; formats/block_fp8.h). The scales are copied
  // into aligned storage (kernels read them as floats), the codes used in place.
  WeightMatrix BlockFp8(const std::string& prefix, int rows, int cols) const {
    const std::string name = prefix + ".weight", scale_name = prefix + ".weight_scale_inv";
    const DType e4m3 = DType::F8_E4M3, f32 = DType::F32;
    Checked(name, {rows, cols}, &e4m3);
    Checked(scale_name, {Fp8BlockCount(rows), Fp8BlockCount(cols)}, &f32);
    auto scales = AlignedCopy<float>(Shard(scale_name).Bytes(scale_name));
    const float* scale_data = scales->data();
    auto owner = std::make_shared<const Owners>(Owners{ShardOwner(name), scales, nullptr});
    return WeightMatrix::BlockFp8View(rows, cols, Shard(name).Bytes(name).data(), scale_data, owner);
  }

  // A matrix stored as `packing` says (plain when it is null).
  WeightMatrix Matrix(const std::string& prefix, int rows, int cols, const WeightPacking* packing) const {
    if (packing == nullptr) return Plain(prefix, rows, cols);
    switch (packing->format.kind) {
      case PackKind::kFp8:
        return Fp8(prefix, rows, cols, packing->format);
      case PackKind::kMicroscaled:
        return Microscaled(prefix, rows, cols, packing->format.mx);
      case PackKind::kBlockFp8:
        return BlockFp8(prefix, rows, cols);
      case PackKind::kInt4:
        return Int4(prefix, rows, cols, packing->format.int4);
      default:
        throw MakeError(prefix, ": ", packing->format.Name(), " is not a packed format");
    }
  }

 private:
  const SafetensorsFile& Shard(const std::string& name) const { return *shards_[Index(name)]; }
  std::shared_ptr<const void> ShardOwner(const std::string& name) const { return shards_[Index(name)]; }

  std::size_t Index(const std::string& name) const {
    auto it = owner_.find(name);
    if (it == owner_.end()) {
      throw MakeError(shards_.front()->path(), shards_.size() > 1 ? " (and other shards)" : "",
                      ": missing tensor \"", name, "\"");
    }
    used_.insert(name);
    return it->second;
  }

  template <typename... Parts>
  Error Fail(const std::string& name, const Parts&... parts) const {
    return MakeError(Shard(name).path(), ": tensor \"", name, "\" ", parts...);
  }

  // The tensor's info, its shape checked (when `shape` is non-empty) and its dtype (when given).
  const TensorInfo& Checked(const std::string& name, const std::vector<std::int64_t>& shape,
                            const DType* dtype) const {
    const TensorInfo& info = Shard(name).Info(name);
    if (dtype != nullptr && info.dtype != *dtype) {
      throw Fail(name, "has dtype ", DTypeName(info.dtype), ", expected ", DTypeName(*dtype),
                 " (config.json quantization_config)");
    }
    if (!shape.empty() && info.shape != shape) {
      throw Fail(name, "has shape ", ShapeText(info.shape), ", expected ", ShapeText(shape));
    }
    return info;
  }

  std::vector<std::shared_ptr<const SafetensorsFile>> shards_;
  std::map<std::string, std::size_t> owner_;
  mutable std::set<std::string> used_;  // every tensor read so far
};

}  // namespace

namespace {

std::size_t ExpertBytes(const LayerWeights& l) {
  std::size_t bytes = 0;
  for (const ExpertWeights& e : l.experts) bytes += e.w_gate.Bytes() + e.w_up.Bytes() + e.w_down.Bytes();
  return bytes;
}

}  // namespace

std::size_t ModelWeights::Bytes() const {
  std::size_t bytes = token_embedding.Bytes() + lm_head.Bytes() + final_norm.size() * sizeof(float);
  for (const LayerWeights& l : layers) {
    bytes += l.wq.Bytes() + l.wk.Bytes() + l.wv.Bytes() + l.wo.Bytes() + l.w_gate.Bytes() + l.w_up.Bytes() +
             l.w_down.Bytes() + l.router.Bytes() + ExpertBytes(l);
    bytes += (l.attn_norm.size() + l.mlp_norm.size() + l.bq.size() + l.bk.size() + l.bv.size() +
              l.q_norm.size() + l.k_norm.size() + l.post_attn_norm.size() + l.post_mlp_norm.size()) *
             sizeof(float);
  }
  return bytes;
}

std::size_t ModelWeights::BytesReadPerDecodeStep(int experts_per_token) const {
  std::size_t bytes = Bytes();
  for (const LayerWeights& l : layers) {
    if (!l.IsMoe()) continue;
    const std::size_t all = ExpertBytes(l);
    bytes -= all - all / l.experts.size() * static_cast<std::size_t>(experts_per_token);
  }
  if (lm_head.rows == 0) return bytes;  // the tied head reads the whole embedding matrix
  return bytes - token_embedding.Bytes() + token_embedding.row_bytes;
}

ModelWeights LoadSafetensorsWeights(const ModelConfig& config, const std::vector<std::string>& files) {
  std::vector<std::shared_ptr<const SafetensorsFile>> shards;
  for (const std::string& path : files) {
    shards.push_back(std::make_shared<const SafetensorsFile>(SafetensorsFile::Open(path)));
  }
  return LoadSafetensorsWeights(config, std::move(shards));
}

ModelWeights LoadSafetensorsWeights(const ModelConfig& c,
                                    std::vector<std::shared_ptr<const SafetensorsFile>> files) {
  const ShardSet shards(files);
  const int d = c.hidden_size;
  // Linear weights follow quantization_config; the embedding and LM head too unless it says "f16".
  const WeightPacking* linear = c.packing ? &*c.packing : nullptr;
  const WeightPacking* embedding = c.packing && c.packing->embedding_packed ? linear : nullptr;
  const Family& family = FamilyOf(c);
  const bool fused = family.fused_projections, mixtral = family.experts == ExpertLayout::kMixtral;
  if (fused && linear != nullptr) {
    throw MakeError(files.front()->path(), ": a packed ", family.name,
                    " checkpoint (fused qkv_proj, gate_up_proj) is not supported");
  }
  // Gemma's RMSNorm multiplies by (1 + w) (transformers' Gemma2RMSNorm): the 1 is added here, in FP32, so
  // the forward pass multiplies by the weight as for every other family (llama.cpp's converter stores
  // the same sums in a Gemma GGUF).
  const auto norm = [&](const std::string& name, int length) {
    std::vector<float> weight = shards.Vector(name, length);
    if (family.norm_one_plus_w) {
      for (float& x : weight) x += 1.0f;
    }
    return weight;
  };
  ModelWeights w;
  w.token_embedding = shards.Matrix("model.embed_tokens", c.vocab_size, d, embedding);
  w.layers.resize(c.num_layers);
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    LayerWeights& l = w.layers[i];
    if (c.pre_norm) l.attn_norm = norm(p + "input_layernorm.weight", d);
    if (fused) {  // q, k and v stacked as the rows of one matrix
      const int rows = c.QueryDim() + 2 * c.KvDim();
      l.wq = shards.PlainRows(p + "self_attn.qkv_proj", rows, d, 0, c.QueryDim());
      l.wk = shards.PlainRows(p + "self_attn.qkv_proj", rows, d, c.QueryDim(), c.KvDim());
      l.wv = shards.PlainRows(p + "self_attn.qkv_proj", rows, d, c.QueryDim() + c.KvDim(), c.KvDim());
    } else {
      l.wq = shards.Matrix(p + "self_attn.q_proj", c.QueryDim(), d, linear);
      l.wk = shards.Matrix(p + "self_attn.k_proj", c.KvDim(), d, linear);
      l.wv = shards.Matrix(p + "self_attn.v_proj", c.KvDim(), d, linear);
    }
    if (c.attention_bias) {
      l.bq = shards.Vector(p + "self_attn.q_proj.bias", c.QueryDim());
      l.bk = shards.Vector(p + "self_attn.k_proj.bias", c.KvDim());
      l.bv = shards.Vector(p + "self_attn.v_proj.bias", c.KvDim());
    }
    l.wo = shards.Matrix(p + "self_attn.o_proj", d, c.QueryDim(), linear);
    if (c.qk_norm) {  // per head (head_dim) or, for OLMo 2, over the whole projection
      l.q_norm = norm(p + "self_attn.q_norm.weight", c.qk_norm_whole ? c.QueryDim() : c.head_dim);
      l.k_norm = norm(p + "self_attn.k_norm.weight", c.qk_norm_whole ? c.KvDim() : c.head_dim);
    }
    // The norms around the MLP and after attention, by each family's names: Llama's post_attention_layernorm
    // is the norm before the MLP; Gemma's and OLMo 2's is the norm of the attention output.
    if (!c.sandwich_norm) {
      l.mlp_norm = norm(p + "post_attention_layernorm.weight", d);
    } else {
      l.post_attn_norm = norm(p + "post_attention_layernorm.weight", d);
      l.post_mlp_norm = norm(p + "post_feedforward_layernorm.weight", d);
      if (c.pre_norm) l.mlp_norm = norm(p + "pre_feedforward_layernorm.weight", d);
    }
    if (c.IsMoeLayer(i)) {
      // The router stays as stored, whatever the packing: its logits choose the experts. Mixtral's names:
      // block_sparse_moe.gate, experts.e.w1 (gate), w3 (up), w2 (down).
      const std::string moe = p + (mixtral ? "block_sparse_moe." : "mlp.");
      l.router = shards.Plain(moe + "gate", c.num_experts, d);
      l.experts.resize(c.num_experts);
      for (int e = 0; e < c.num_experts; ++e) {
        const std::string x = moe + "experts." + std::to_string(e) + ".";
        const int ffn = c.moe_intermediate_size;
        l.experts[e] = {shards.Matrix(x + (mixtral ? "w1" : "gate_proj"), ffn, d, linear),
                        shards.Matrix(x + (mixtral ? "w3" : "up_proj"), ffn, d, linear),
                        shards.Matrix(x + (mixtral ? "w2" : "down_proj"), d, ffn, linear)};
      }
      continue;
    }
    if (fused) {  // gate and up stacked: gate_up_proj's first intermediate_size rows are the gate
      const int ffn = c.intermediate_size;
      l.w_gate = shards.PlainRows(p + "mlp.gate_up_proj", 2 * ffn, d, 0, ffn);
      l.w_up = shards.PlainRows(p + "mlp.gate_up_proj", 2 * ffn, d, ffn, ffn);
    } else {
      l.w_gate = shards.Matrix(p + "mlp.gate_proj", c.intermediate_size, d, linear);
      l.w_up = shards.Matrix(p + "mlp.up_proj", c.intermediate_size, d, linear);
    }
    l.w_down = shards.Matrix(p + "mlp.down_proj", d, c.intermediate_size, linear);
  }
  w.final_norm = norm("model.norm.weight", d);
  // Some tied checkpoints still store lm_head.weight (a copy); reading it is correct either way.
  const bool has_head = shards.Contains("lm_head.weight") || shards.Contains("lm_head.qweight");
  if (has_head) {
    w.lm_head = shards.Matrix("lm_head", c.vocab_size, d, embedding);
  } else if (!c.tie_word_embeddings) {
    throw MakeError(files.front()->path(),
                    ": missing tensor \"lm_head.weight\" (config says tie_word_embeddings = false)");
  }
  shards.RequireAllUsed(family.name);
  return w;
}

}  // namespace plumb
