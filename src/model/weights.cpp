// Hugging Face safetensors → ModelWeights.
#include "plumb/model/weights.h"

#include <cstdint>
#include <map>
#include <string_view>

#include "plumb/core/error.h"
#include "plumb/formats/safetensors.h"

namespace plumb {
namespace {

// Finds each tensor name in whichever shard holds it.
class ShardSet {
 public:
  explicit ShardSet(const std::vector<std::string>& files) {
    if (files.empty()) throw MakeError("no .safetensors files given");
    for (const std::string& path : files) {
      shards_.push_back(SafetensorsFile::Open(path));
      for (const TensorInfo& info : shards_.back().tensors()) {
        auto [it, inserted] = owner_.emplace(info.name, shards_.size() - 1);
        if (!inserted) {
          throw MakeError(path, ": tensor \"", info.name, "\" also appears in ", shards_[it->second].path());
        }
      }
    }
  }

  bool Contains(const std::string& name) const { return owner_.count(name) != 0; }

  std::vector<float> Vector(const std::string& name, int length) const {
    const std::int64_t shape[] = {length};
    return Shard(name).ReadF32(name, shape);
  }

  WeightMatrix Matrix(const std::string& name, int rows, int cols) const {
    const std::int64_t shape[] = {rows, cols};
    return WeightMatrix::FromF32(MatrixF32{rows, cols, Shard(name).ReadF32(name, shape)});
  }

 private:
  const SafetensorsFile& Shard(const std::string& name) const {
    auto it = owner_.find(name);
    if (it == owner_.end()) {
      throw MakeError(shards_.front().path(), shards_.size() > 1 ? " (and other shards)" : "",
                      ": missing tensor \"", name, "\"");
    }
    return shards_[it->second];
  }

  std::vector<SafetensorsFile> shards_;
  std::map<std::string, std::size_t> owner_;
};

}  // namespace

std::size_t ModelWeights::Bytes() const {
  std::size_t bytes = token_embedding.Bytes() + lm_head.Bytes() + final_norm.size() * sizeof(float);
  for (const LayerWeights& l : layers) {
    bytes += l.wq.Bytes() + l.wk.Bytes() + l.wv.Bytes() + l.wo.Bytes() + l.w_gate.Bytes() + l.w_up.Bytes() +
             l.w_down.Bytes();
    bytes +=
        (l.attn_norm.size() + l.mlp_norm.size() + l.bq.size() + l.bk.size() + l.bv.size()) * sizeof(float);
  }
  return bytes;
}

std::size_t ModelWeights::BytesReadPerDecodeStep() const {
  if (lm_head.rows == 0) return Bytes();  // the tied head reads the whole embedding matrix
  return Bytes() - token_embedding.Bytes() + token_embedding.row_bytes;
}

ModelWeights LoadSafetensorsWeights(const ModelConfig& c, const std::vector<std::string>& files) {
  const ShardSet shards(files);
  const int d = c.hidden_size;
  ModelWeights w;
  w.token_embedding = shards.Matrix("model.embed_tokens.weight", c.vocab_size, d);
  w.layers.resize(c.num_layers);
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    LayerWeights& l = w.layers[i];
    l.attn_norm = shards.Vector(p + "input_layernorm.weight", d);
    l.wq = shards.Matrix(p + "self_attn.q_proj.weight", c.QueryDim(), d);
    l.wk = shards.Matrix(p + "self_attn.k_proj.weight", c.KvDim(), d);
    l.wv = shards.Matrix(p + "self_attn.v_proj.weight", c.KvDim(), d);
    if (c.attention_bias) {
      l.bq = shards.Vector(p + "self_attn.q_proj.bias", c.QueryDim());
      l.bk = shards.Vector(p + "self_attn.k_proj.bias", c.KvDim());
      l.bv = shards.Vector(p + "self_attn.v_proj.bias", c.KvDim());
    }
    l.wo = shards.Matrix(p + "self_attn.o_proj.weight", d, c.QueryDim());
    l.mlp_norm = shards.Vector(p + "post_attention_layernorm.weight", d);
    l.w_gate = shards.Matrix(p + "mlp.gate_proj.weight", c.intermediate_size, d);
    l.w_up = shards.Matrix(p + "mlp.up_proj.weight", c.intermediate_size, d);
    l.w_down = shards.Matrix(p + "mlp.down_proj.weight", d, c.intermediate_size);
  }
  w.final_norm = shards.Vector("model.norm.weight", d);
  // Some tied checkpoints still store lm_head.weight (a copy); reading it is correct either way.
  if (shards.Contains("lm_head.weight")) {
    w.lm_head = shards.Matrix("lm_head.weight", c.vocab_size, d);
  } else if (!c.tie_word_embeddings) {
    throw MakeError(files.front(),
                    ": missing tensor \"lm_head.weight\" (config says tie_word_embeddings = false)");
  }
  return w;
}

}  // namespace plumb
