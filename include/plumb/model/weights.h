// ModelWeights: every tensor of a Llama-family decoder, with its shape in the comment. Matrices are kept in
// the type they were stored in (FP32 from safetensors; FP32/FP16/BF16 or GGUF blocks from GGUF); vectors
// (norms, biases) are FP32.
// d = hidden_size, hd = head_dim, ffn = intermediate_size, V = vocab_size.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "plumb/kernels/weight_matrix.h"
#include "plumb/model/config.h"

namespace plumb {

// One routed expert of a mixture-of-experts layer: a SwiGLU MLP of width moe_ffn = moe_intermediate_size.
struct ExpertWeights {
  WeightMatrix w_gate;  // [moe_ffn, d]  mlp.experts.E.gate_proj
  WeightMatrix w_up;    // [moe_ffn, d]  mlp.experts.E.up_proj
  WeightMatrix w_down;  // [d, moe_ffn]  mlp.experts.E.down_proj
};

struct LayerWeights {
  std::vector<float> attn_norm;  // [d]                 input_layernorm
  WeightMatrix wq;               // [n_heads·hd, d]     self_attn.q_proj
  WeightMatrix wk;               // [n_kv_heads·hd, d]  self_attn.k_proj
  WeightMatrix wv;               // [n_kv_heads·hd, d]  self_attn.v_proj
  std::vector<float> bq;         // [n_heads·hd]        q_proj.bias (empty when the model has none)
  std::vector<float> bk;         // [n_kv_heads·hd]     k_proj.bias (empty when the model has none)
  std::vector<float> bv;         // [n_kv_heads·hd]     v_proj.bias (empty when the model has none)
  WeightMatrix wo;               // [d, n_heads·hd]     self_attn.o_proj
  std::vector<float>
      mlp_norm;  // [d]                 post_attention_layernorm (Gemma: pre_feedforward_layernorm)
  // Gemma 3 only (empty otherwise). The GGUF converter stores Gemma's norm weights as 1 + w, the factor
  // Gemma's RMSNorm multiplies by, so every norm here is x / rms(x) · weight.
  std::vector<float> q_norm;          // [hd]  self_attn.q_norm, shared by the query heads
  std::vector<float> k_norm;          // [hd]  self_attn.k_norm
  std::vector<float> post_attn_norm;  // [d]   post_attention_layernorm (Gemma's name)
  std::vector<float> post_mlp_norm;   // [d]   post_feedforward_layernorm
  WeightMatrix w_gate;                // [ffn, d]            mlp.gate_proj
  WeightMatrix w_up;                  // [ffn, d]            mlp.up_proj
  WeightMatrix w_down;                // [d, ffn]            mlp.down_proj
  // A mixture-of-experts layer (ModelConfig::IsMoeLayer) has these in place of w_gate, w_up and w_down.
  WeightMatrix router;                 // [experts, d]        mlp.gate (the router's logits)
  std::vector<ExpertWeights> experts;  // [experts]

  bool IsMoe() const { return !experts.empty(); }
};

struct ModelWeights {
  WeightMatrix token_embedding;  // [V, d]   model.embed_tokens
  std::vector<LayerWeights> layers;
  std::vector<float> final_norm;  // [d]  model.norm
  WeightMatrix lm_head;           // [V, d] lm_head; empty (0 rows) when tied to the embedding

  const WeightMatrix& LmHead() const { return lm_head.rows > 0 ? lm_head : token_embedding; }
  WeightMatrix& LmHead() { return lm_head.rows > 0 ? lm_head : token_embedding; }
  std::size_t Bytes() const;  // every weight, once (a tied head counted once)
  // Weight bytes one decode step reads: every matrix and vector once, except the token embedding, of which
  // only one row is read, unless the LM head is tied to it and reads it all, and a MoE layer's experts, of
  // which a token reads `experts_per_token` (counted as that many average experts).
  std::size_t BytesReadPerDecodeStep(int experts_per_token = 0) const;
};

// Loads Hugging Face tensor names from one or more .safetensors files (shards), checking every dtype and
// shape against the config. Errors name the file and the tensor. F16 and BF16 matrices stay in the file's
// mapping (the returned matrices keep it alive); F32 ones are copied. With config.packing, the matrices are
// FP8 or INT4 as docs/formats.md ("Packed checkpoints") defines; their scales and zeros are copied into
// aligned storage. Vectors (norms, biases) are converted to FP32.
ModelWeights LoadSafetensorsWeights(const ModelConfig& config, const std::vector<std::string>& files);
class SafetensorsFile;
// The same from files already open (or built in memory with SafetensorsFile::FromBytes), which the returned
// matrices keep alive.
ModelWeights LoadSafetensorsWeights(const ModelConfig& config,
                                    std::vector<std::shared_ptr<const SafetensorsFile>> files);

class GgufFile;
// Reads llama.cpp's tensor names (token_embd, blk.N.attn_q, ..., output) from a GGUF file, checking every
// type and shape against the config. Matrices stay in their stored type and point into the file's mapping,
// which `file` must keep alive (the returned matrices hold it), except attn_q / attn_k, whose rows are
// copied back from GGUF's RoPE-pair order into Hugging Face's (docs/formats.md "RoPE pairing").
ModelWeights LoadGgufWeights(const ModelConfig& config, const std::shared_ptr<const GgufFile>& file);

}  // namespace plumb
