// ModelWeights: every tensor of a Llama-family decoder, in FP32, with its shape in the comment.
// d = hidden_size, hd = head_dim, ffn = intermediate_size, V = vocab_size.
#pragma once

#include <string>
#include <vector>

#include "plumb/kernels/matrix.h"
#include "plumb/model/config.h"

namespace plumb {

struct LayerWeights {
  std::vector<float> attn_norm;  // [d]                 input_layernorm
  MatrixF32 wq;                  // [n_heads·hd, d]     self_attn.q_proj
  MatrixF32 wk;                  // [n_kv_heads·hd, d]  self_attn.k_proj
  MatrixF32 wv;                  // [n_kv_heads·hd, d]  self_attn.v_proj
  std::vector<float> bq;         // [n_heads·hd]        q_proj.bias (empty when the model has none)
  std::vector<float> bk;         // [n_kv_heads·hd]     k_proj.bias (empty when the model has none)
  std::vector<float> bv;         // [n_kv_heads·hd]     v_proj.bias (empty when the model has none)
  MatrixF32 wo;                  // [d, n_heads·hd]     self_attn.o_proj
  std::vector<float> mlp_norm;   // [d]                 post_attention_layernorm
  MatrixF32 w_gate;              // [ffn, d]            mlp.gate_proj
  MatrixF32 w_up;                // [ffn, d]            mlp.up_proj
  MatrixF32 w_down;              // [d, ffn]            mlp.down_proj
};

struct ModelWeights {
  MatrixF32 token_embedding;  // [V, d]   model.embed_tokens
  std::vector<LayerWeights> layers;
  std::vector<float> final_norm;  // [d]  model.norm
  MatrixF32 lm_head;              // [V, d] lm_head; empty (0 rows) when tied to the embedding

  const MatrixF32& LmHead() const { return lm_head.rows > 0 ? lm_head : token_embedding; }
  std::size_t Bytes() const;  // every weight, once (a tied head counted once)
  // Weight bytes one decode step reads: every matrix and vector once, except the token embedding, of which
  // only one row is read, unless the LM head is tied to it and reads it all.
  std::size_t BytesReadPerDecodeStep() const;
};

// Loads Hugging Face tensor names from one or more .safetensors files (shards), converting F32, F16 and
// BF16 to FP32 and checking every shape against the config. Errors name the file and the tensor.
ModelWeights LoadSafetensorsWeights(const ModelConfig& config, const std::vector<std::string>& files);

}  // namespace plumb
