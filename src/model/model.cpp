// The forward pass of a Llama-family decoder, written to read like the math:
//
//   x = embed[token]
//   for each layer:   x += o_proj(attention(rope(q_proj(rmsnorm(x))), rope(k_proj(·)), v_proj(·)))
//                     x += down_proj(silu(gate_proj(rmsnorm(x))) ⊙ up_proj(rmsnorm(x)))
//   logits = lm_head(rmsnorm(x))
//
// Prefill and Decode below are the same math with different shapes, kept as two functions on purpose: the
// shape decides the cost (see include/plumb/model/model.h), and a reader should see the split in the code.
#include "plumb/model/model.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "plumb/core/error.h"
#include "plumb/kernels/kernels.h"

namespace plumb {
namespace {

namespace fs = std::filesystem;

// x[r][i] += bias[i] for each of `rows` rows; no-op for a model without biases.
void AddBias(float* x, int rows, const std::vector<float>& bias) {
  if (bias.empty()) return;
  const int n = static_cast<int>(bias.size());
  for (int r = 0; r < rows; ++r) {
    for (int i = 0; i < n; ++i) x[static_cast<std::size_t>(r) * n + i] += bias[i];
  }
}

void AddInPlace(float* x, const float* y, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) x[i] += y[i];
}

// Stores the keys and values of `rows` tokens ([rows][n_kv_heads·hd] each) at positions first_pos.. of
// `layer` (reserved by the caller).
void WriteToCache(KvSequence& kv, int layer, const float* k, const float* v, int rows, int first_pos) {
  const std::size_t row_floats = static_cast<std::size_t>(kv.n_kv_heads()) * kv.head_dim();
  for (int r = 0; r < rows; ++r) kv.Write(layer, first_pos + r, k + r * row_floats, v + r * row_floats);
}

// Y[rows][W.rows] = X[rows][W.cols] · Wᵀ as Step computes it (StepOptions::batch_invariant says why).
void Project(const WeightMatrix& W, const float* X, int rows, float* Y, bool batch_invariant) {
  if (batch_invariant) {
    kernels::GemvBatch(W, X, rows, Y);
  } else if (rows == 1) {
    kernels::Gemv(W, X, Y);
  } else {
    kernels::Gemm(X, rows, W, Y);
  }
}

// Grows v to at least n elements (never shrinks, so a steady state allocates nothing).
template <class T>
void GrowTo(std::vector<T>& v, std::size_t n) {
  if (v.size() < n) v.resize(n);
}

// Reports a pass to the model's ForwardObserver (model/forward_observer.h): each kernel's wall time as it
// finishes, and the residual stream at the layer boundaries. Without an observer every call returns at once.
class PassReport {
 public:
  PassReport(ForwardObserver* observer, ForwardPhase phase, int rows) : observer_(observer), rows_(rows) {
    if (!observer_) return;
    observer_->OnPassBegin(phase, rows);
    last_ = Clock::now();
  }
  ~PassReport() {
    if (observer_) observer_->OnPassEnd();
  }
  PassReport(const PassReport&) = delete;
  PassReport& operator=(const PassReport&) = delete;

  // `kernel` of `layer` (-1 outside the layers) just finished over `rows` rows (default: the pass's).
  void Done(ForwardKernel kernel, int layer, int rows = -1) {
    if (!observer_) return;
    const Clock::time_point now = Clock::now();
    observer_->OnKernel(
        {kernel, layer, rows < 0 ? rows_ : rows, std::chrono::duration<double>(now - last_).count()});
    last_ = Clock::now();
  }
  // [rows][cols] at `point`; the observer's own time is left out of the next kernel's.
  void Activation(ActivationPoint point, int layer, const float* data, int rows, int cols) {
    if (!observer_) return;
    observer_->OnActivation(point, layer, data, rows, cols);
    last_ = Clock::now();
  }

 private:
  using Clock = std::chrono::steady_clock;
  ForwardObserver* observer_;
  int rows_;
  Clock::time_point last_;
};

// The safetensors files of a checkpoint directory: the shards named by the index, or model.safetensors.
std::vector<std::string> SafetensorsFilesIn(const fs::path& dir) {
  const fs::path index = dir / "model.safetensors.index.json";
  if (fs::exists(index)) {
    std::ifstream in(index);
    nlohmann::json root;
    try {
      root = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      throw MakeError(index.string(), ": invalid JSON: ", e.what());
    }
    if (!root.contains("weight_map") || !root["weight_map"].is_object()) {
      throw MakeError(index.string(), ": missing object \"weight_map\"");
    }
    std::set<std::string> shards;
    for (const auto& [tensor, file] : root["weight_map"].items()) {
      if (!file.is_string())
        throw MakeError(index.string(), ": weight_map[\"", tensor, "\"] is not a file name");
      shards.insert((dir / file.get<std::string>()).string());
    }
    return {shards.begin(), shards.end()};
  }
  const fs::path single = dir / "model.safetensors";
  if (!fs::exists(single))
    throw MakeError(dir.string(), ": no model.safetensors or model.safetensors.index.json");
  return {single.string()};
}

}  // namespace

Model::Model(ModelConfig config, ModelWeights weights)
    : config_(std::move(config)), weights_(std::move(weights)) {
  const ModelConfig& c = config_;
  decode_.x.resize(c.hidden_size);
  decode_.x_norm.resize(c.hidden_size);
  decode_.q.resize(c.QueryDim());
  decode_.k.resize(c.KvDim());
  decode_.v.resize(c.KvDim());
  decode_.attention.resize(c.QueryDim());
  decode_.projected.resize(c.hidden_size);
  decode_.gate.resize(c.intermediate_size);
  decode_.up.resize(c.intermediate_size);
  decode_.logits.resize(c.vocab_size);
}

Model Model::FromGguf(const std::shared_ptr<const GgufFile>& file) {
  ModelConfig config = ConfigFromGguf(*file);
  ModelWeights weights = LoadGgufWeights(config, file);
  return Model(std::move(config), std::move(weights));
}

Model Model::Load(const std::string& path) {
  const fs::path p(path);
  if (!fs::exists(p)) throw MakeError(path, ": model path does not exist");
  if (p.extension() == ".gguf") return FromGguf(std::make_shared<const GgufFile>(GgufFile::Open(path)));
  const fs::path dir = fs::is_directory(p) ? p : p.parent_path();
  const fs::path config_path = dir / "config.json";
  if (!fs::exists(config_path)) throw MakeError(path, ": no config.json in ", dir.string());
  ModelConfig config = LoadConfigJson(config_path.string());
  std::vector<std::string> files =
      fs::is_directory(p) ? SafetensorsFilesIn(p) : std::vector<std::string>{path};
  ModelWeights weights = LoadSafetensorsWeights(config, files);
  return Model(std::move(config), std::move(weights));
}

ContiguousKvCache Model::NewKvCache(int max_positions, KvDtype dtype) const {
  if (max_positions <= 0) max_positions = config_.max_position_embeddings;
  return ContiguousKvCache(config_.num_layers, config_.num_kv_heads, max_positions, config_.head_dim, dtype);
}

void CheckTokenIds(std::span<const int> tokens, int vocab_size) {
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= vocab_size) {
      throw MakeError("token id ", tokens[i], " at index ", i, " is outside the vocabulary [0, ", vocab_size,
                      ")");
    }
  }
}

void Model::CheckTokens(std::span<const int> tokens, const KvSequence& kv) const {
  CheckTokenIds(tokens, config_.vocab_size);
  const std::size_t end = static_cast<std::size_t>(kv.length()) + tokens.size();
  if (end > static_cast<std::size_t>(kv.max_positions())) {
    throw MakeError("context overflow: ", kv.length(), " cached + ", tokens.size(), " new tokens exceed the ",
                    kv.max_positions(), "-position KV cache");
  }
  if (kv.n_layers() != config_.num_layers || kv.n_kv_heads() != config_.num_kv_heads ||
      kv.head_dim() != config_.head_dim) {
    throw MakeError("KV cache shape does not match the model");
  }
}

// ---------------------------------------------------------------------------------------------------------
// Prefill: P tokens, every projection a GEMM [P, in] × [in, out]. A weight fetched from memory is reused P
// times, so for long prompts the step is limited by arithmetic, not by memory traffic.
// ---------------------------------------------------------------------------------------------------------
std::vector<float> Model::Prefill(std::span<const int> tokens, KvSequence& kv, PrefillLogits which,
                                  PrefillTrace* trace) {
  if (tokens.empty()) throw MakeError("prefill needs at least one token");
  CheckTokens(tokens, kv);
  const ModelConfig& c = config_;
  const int P = static_cast<int>(tokens.size());
  const int first_pos = kv.length();
  kv.Reserve(P);  // may throw (a full pool): nothing computed or committed yet
  const int d = c.hidden_size;
  const auto rows = [P](int width) { return static_cast<std::size_t>(P) * width; };

  std::vector<float> x(rows(d));                       // [P][d] residual stream
  std::vector<float> x_norm(rows(d));                  // [P][d]
  std::vector<float> q(rows(c.QueryDim()));            // [P][n_heads·hd]
  std::vector<float> k(rows(c.KvDim()));               // [P][n_kv_heads·hd]
  std::vector<float> v(rows(c.KvDim()));               // [P][n_kv_heads·hd]
  std::vector<float> attention(rows(c.QueryDim()));    // [P][n_heads·hd]
  std::vector<float> projected(rows(d));               // [P][d]
  std::vector<float> gate(rows(c.intermediate_size));  // [P][ffn]
  std::vector<float> up(rows(c.intermediate_size));    // [P][ffn]

  PassReport report(observer_, ForwardPhase::kPrefill, P);
  for (int r = 0; r < P; ++r) {
    kernels::DequantizeRowOf(weights_.token_embedding, tokens[r], &x[static_cast<std::size_t>(r) * d]);
  }
  report.Done(ForwardKernel::kEmbedding, -1);
  if (trace) trace->embedding = x;

  for (int l = 0; l < c.num_layers; ++l) {
    const LayerWeights& w = weights_.layers[l];
    report.Activation(ActivationPoint::kLayerInput, l, x.data(), P, d);

    // Attention block.
    kernels::RmsNorm(x.data(), w.attn_norm.data(), x_norm.data(), P, d, c.rms_norm_eps);
    report.Done(ForwardKernel::kAttnNorm, l);
    kernels::Gemm(x_norm.data(), P, w.wq, q.data());
    AddBias(q.data(), P, w.bq);
    report.Done(ForwardKernel::kQProj, l);
    kernels::Gemm(x_norm.data(), P, w.wk, k.data());
    AddBias(k.data(), P, w.bk);
    report.Done(ForwardKernel::kKProj, l);
    kernels::Gemm(x_norm.data(), P, w.wv, v.data());
    AddBias(v.data(), P, w.bv);
    report.Done(ForwardKernel::kVProj, l);
    kernels::RopeRotateHalf(q.data(), P, c.num_heads, c.head_dim, first_pos, c.rope_theta);
    kernels::RopeRotateHalf(k.data(), P, c.num_kv_heads, c.head_dim, first_pos, c.rope_theta);
    report.Done(ForwardKernel::kRope, l);
    WriteToCache(kv, l, k.data(), v.data(), P, first_pos);
    report.Done(ForwardKernel::kKvWrite, l);
    kernels::CausalAttention(q.data(), P, first_pos, kv.Layer(l), c.num_heads, attention.data());
    report.Done(ForwardKernel::kAttention, l);
    kernels::Gemm(attention.data(), P, w.wo, projected.data());
    AddInPlace(x.data(), projected.data(), rows(d));
    report.Done(ForwardKernel::kOProj, l);
    report.Activation(ActivationPoint::kAfterAttention, l, x.data(), P, d);

    // MLP block.
    kernels::RmsNorm(x.data(), w.mlp_norm.data(), x_norm.data(), P, d, c.rms_norm_eps);
    report.Done(ForwardKernel::kMlpNorm, l);
    kernels::Gemm(x_norm.data(), P, w.w_gate, gate.data());
    report.Done(ForwardKernel::kGateProj, l);
    kernels::Gemm(x_norm.data(), P, w.w_up, up.data());
    report.Done(ForwardKernel::kUpProj, l);
    kernels::SwiGlu(gate.data(), up.data(), gate.data(),
                    static_cast<std::int64_t>(rows(c.intermediate_size)));
    report.Done(ForwardKernel::kSwiGlu, l);
    kernels::Gemm(gate.data(), P, w.w_down, projected.data());
    AddInPlace(x.data(), projected.data(), rows(d));
    report.Done(ForwardKernel::kDownProj, l);
    report.Activation(ActivationPoint::kAfterMlp, l, x.data(), P, d);

    if (trace) trace->layer_outputs.push_back(x);
  }
  kv.Commit(tokens);

  kernels::RmsNorm(x.data(), weights_.final_norm.data(), x_norm.data(), P, d, c.rms_norm_eps);
  report.Done(ForwardKernel::kFinalNorm, -1);
  report.Activation(ActivationPoint::kFinalNorm, -1, x_norm.data(), P, d);
  if (trace) trace->final_norm = x_norm;

  const int logit_rows = which == PrefillLogits::kAllRows ? P : 1;
  const float* head_input = x_norm.data() + static_cast<std::size_t>(P - logit_rows) * d;
  std::vector<float> logits(static_cast<std::size_t>(logit_rows) * c.vocab_size);
  kernels::Gemm(head_input, logit_rows, weights_.LmHead(), logits.data());
  report.Done(ForwardKernel::kLmHead, -1, logit_rows);
  return logits;
}

// ---------------------------------------------------------------------------------------------------------
// Decode: one token, every projection a GEMV [out, in] · [in]. Each weight is read once and used for one
// multiply-add, so the step is limited by how fast memory delivers the weights (and the KV cache).
// ---------------------------------------------------------------------------------------------------------
std::span<const float> Model::Decode(int token, KvSequence& kv) {
  const int one_token[] = {token};
  CheckTokens(one_token, kv);
  const ModelConfig& c = config_;
  const int pos = kv.length();
  const int d = c.hidden_size;
  DecodeBuffers& b = decode_;
  kv.Reserve(1);  // may throw (a full pool): nothing computed or committed yet

  PassReport report(observer_, ForwardPhase::kDecode, 1);
  kernels::DequantizeRowOf(weights_.token_embedding, token, b.x.data());
  report.Done(ForwardKernel::kEmbedding, -1);

  for (int l = 0; l < c.num_layers; ++l) {
    const LayerWeights& w = weights_.layers[l];
    report.Activation(ActivationPoint::kLayerInput, l, b.x.data(), 1, d);

    // Attention block.
    kernels::RmsNorm(b.x.data(), w.attn_norm.data(), b.x_norm.data(), 1, d, c.rms_norm_eps);
    report.Done(ForwardKernel::kAttnNorm, l);
    kernels::Gemv(w.wq, b.x_norm.data(), b.q.data());
    AddBias(b.q.data(), 1, w.bq);
    report.Done(ForwardKernel::kQProj, l);
    kernels::Gemv(w.wk, b.x_norm.data(), b.k.data());
    AddBias(b.k.data(), 1, w.bk);
    report.Done(ForwardKernel::kKProj, l);
    kernels::Gemv(w.wv, b.x_norm.data(), b.v.data());
    AddBias(b.v.data(), 1, w.bv);
    report.Done(ForwardKernel::kVProj, l);
    kernels::RopeRotateHalf(b.q.data(), 1, c.num_heads, c.head_dim, pos, c.rope_theta);
    kernels::RopeRotateHalf(b.k.data(), 1, c.num_kv_heads, c.head_dim, pos, c.rope_theta);
    report.Done(ForwardKernel::kRope, l);
    kv.Write(l, pos, b.k.data(), b.v.data());
    report.Done(ForwardKernel::kKvWrite, l);
    kernels::CausalAttention(b.q.data(), 1, pos, kv.Layer(l), c.num_heads, b.attention.data());
    report.Done(ForwardKernel::kAttention, l);
    kernels::Gemv(w.wo, b.attention.data(), b.projected.data());
    AddInPlace(b.x.data(), b.projected.data(), d);
    report.Done(ForwardKernel::kOProj, l);
    report.Activation(ActivationPoint::kAfterAttention, l, b.x.data(), 1, d);

    // MLP block.
    kernels::RmsNorm(b.x.data(), w.mlp_norm.data(), b.x_norm.data(), 1, d, c.rms_norm_eps);
    report.Done(ForwardKernel::kMlpNorm, l);
    kernels::Gemv(w.w_gate, b.x_norm.data(), b.gate.data());
    report.Done(ForwardKernel::kGateProj, l);
    kernels::Gemv(w.w_up, b.x_norm.data(), b.up.data());
    report.Done(ForwardKernel::kUpProj, l);
    kernels::SwiGlu(b.gate.data(), b.up.data(), b.gate.data(), c.intermediate_size);
    report.Done(ForwardKernel::kSwiGlu, l);
    kernels::Gemv(w.w_down, b.gate.data(), b.projected.data());
    AddInPlace(b.x.data(), b.projected.data(), d);
    report.Done(ForwardKernel::kDownProj, l);
    report.Activation(ActivationPoint::kAfterMlp, l, b.x.data(), 1, d);
  }
  kv.Commit(one_token);

  kernels::RmsNorm(b.x.data(), weights_.final_norm.data(), b.x_norm.data(), 1, d, c.rms_norm_eps);
  report.Done(ForwardKernel::kFinalNorm, -1);
  report.Activation(ActivationPoint::kFinalNorm, -1, b.x_norm.data(), 1, d);
  kernels::Gemv(weights_.LmHead(), b.x_norm.data(), b.logits.data());
  report.Done(ForwardKernel::kLmHead, -1);
  return b.logits;
}

// ---------------------------------------------------------------------------------------------------------
// Step: the chunks of several sequences (decodes of one token, prefill chunks of many) in one pass. The
// rows of all chunks are concatenated, [T][d], so every projection and the MLP read each weight once for
// the whole step (a GEMM, or GemvBatch when batch-invariant); RoPE, the cache writes and attention are per
// chunk, at that sequence's positions and over its own cache.
// ---------------------------------------------------------------------------------------------------------
std::span<const float> Model::Step(std::span<const SequenceChunk> chunks, StepOptions options) {
  if (chunks.empty()) throw MakeError("step needs at least one sequence chunk");
  const ModelConfig& c = config_;
  int T = 0;           // rows of the step
  int logit_rows = 0;  // rows whose logits are returned
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    const SequenceChunk& chunk = chunks[i];
    if (!chunk.kv) throw MakeError("step: chunk ", i, " has no KV sequence");
    if (chunk.tokens.empty()) throw MakeError("step: chunk ", i, " has no tokens");
    for (std::size_t j = 0; j < i; ++j) {
      if (chunks[j].kv == chunk.kv) throw MakeError("step: chunks ", j, " and ", i, " are the same sequence");
    }
    CheckTokens(chunk.tokens, *chunk.kv);
    const int n = static_cast<int>(chunk.tokens.size());
    T += n;
    logit_rows += chunk.all_logits ? n : 1;
  }
  // Reserve everything before writing anything: a pool that runs dry throws here, with no commit made.
  for (const SequenceChunk& chunk : chunks) chunk.kv->Reserve(static_cast<int>(chunk.tokens.size()));
  GrowStepBuffers(T, logit_rows, chunks.size());

  StepBuffers& b = step_;
  const int d = c.hidden_size;
  const bool invariant = options.batch_invariant;
  const std::size_t q_dim = c.QueryDim(), kv_dim = c.KvDim();
  PassReport report(observer_, ForwardPhase::kStep, T);
  {
    int row = 0;
    for (const SequenceChunk& chunk : chunks) {
      for (int token : chunk.tokens) {
        kernels::DequantizeRowOf(weights_.token_embedding, token, &b.x[static_cast<std::size_t>(row++) * d]);
      }
    }
  }
  report.Done(ForwardKernel::kEmbedding, -1);
  const std::size_t all = static_cast<std::size_t>(T);
  for (int l = 0; l < c.num_layers; ++l) {
    const LayerWeights& w = weights_.layers[l];
    report.Activation(ActivationPoint::kLayerInput, l, b.x.data(), T, d);

    // Attention block: projections over all rows, then each chunk at its own positions and cache.
    kernels::RmsNorm(b.x.data(), w.attn_norm.data(), b.x_norm.data(), T, d, c.rms_norm_eps);
    report.Done(ForwardKernel::kAttnNorm, l);
    Project(w.wq, b.x_norm.data(), T, b.q.data(), invariant);
    AddBias(b.q.data(), T, w.bq);
    report.Done(ForwardKernel::kQProj, l);
    Project(w.wk, b.x_norm.data(), T, b.k.data(), invariant);
    AddBias(b.k.data(), T, w.bk);
    report.Done(ForwardKernel::kKProj, l);
    Project(w.wv, b.x_norm.data(), T, b.v.data(), invariant);
    AddBias(b.v.data(), T, w.bv);
    report.Done(ForwardKernel::kVProj, l);
    int row = 0;
    for (const SequenceChunk& chunk : chunks) {
      const int n = static_cast<int>(chunk.tokens.size());
      const int first_pos = chunk.kv->length();
      kernels::RopeRotateHalf(b.q.data() + row * q_dim, n, c.num_heads, c.head_dim, first_pos, c.rope_theta);
      kernels::RopeRotateHalf(b.k.data() + row * kv_dim, n, c.num_kv_heads, c.head_dim, first_pos,
                              c.rope_theta);
      row += n;
    }
    report.Done(ForwardKernel::kRope, l);
    row = 0;
    for (std::size_t i = 0; i < chunks.size(); ++i) {
      KvSequence& kv = *chunks[i].kv;
      const int n = static_cast<int>(chunks[i].tokens.size());
      const int first_pos = kv.length();
      WriteToCache(kv, l, b.k.data() + row * kv_dim, b.v.data() + row * kv_dim, n, first_pos);
      b.items[i] = {b.q.data() + row * q_dim, b.attention.data() + row * q_dim, n, first_pos, kv.Layer(l)};
      row += n;
    }
    report.Done(ForwardKernel::kKvWrite, l);
    kernels::CausalAttention(std::span(b.items.data(), chunks.size()), c.num_heads);
    report.Done(ForwardKernel::kAttention, l);
    Project(w.wo, b.attention.data(), T, b.projected.data(), invariant);
    AddInPlace(b.x.data(), b.projected.data(), all * d);
    report.Done(ForwardKernel::kOProj, l);
    report.Activation(ActivationPoint::kAfterAttention, l, b.x.data(), T, d);

    // MLP block.
    kernels::RmsNorm(b.x.data(), w.mlp_norm.data(), b.x_norm.data(), T, d, c.rms_norm_eps);
    report.Done(ForwardKernel::kMlpNorm, l);
    Project(w.w_gate, b.x_norm.data(), T, b.gate.data(), invariant);
    report.Done(ForwardKernel::kGateProj, l);
    Project(w.w_up, b.x_norm.data(), T, b.up.data(), invariant);
    report.Done(ForwardKernel::kUpProj, l);
    kernels::SwiGlu(b.gate.data(), b.up.data(), b.gate.data(),
                    static_cast<std::int64_t>(all * c.intermediate_size));
    report.Done(ForwardKernel::kSwiGlu, l);
    Project(w.w_down, b.gate.data(), T, b.projected.data(), invariant);
    AddInPlace(b.x.data(), b.projected.data(), all * d);
    report.Done(ForwardKernel::kDownProj, l);
    report.Activation(ActivationPoint::kAfterMlp, l, b.x.data(), T, d);
  }
  for (const SequenceChunk& chunk : chunks) chunk.kv->Commit(chunk.tokens);

  // The final norm and LM head only for the rows whose logits are returned: all of a chunk's, or its last.
  int out_row = 0, row = 0;
  for (const SequenceChunk& chunk : chunks) {
    const int n = static_cast<int>(chunk.tokens.size());
    for (int r = chunk.all_logits ? 0 : n - 1; r < n; ++r) {
      kernels::RmsNorm(b.x.data() + static_cast<std::size_t>(row + r) * d, weights_.final_norm.data(),
                       b.head_input.data() + static_cast<std::size_t>(out_row++) * d, 1, d, c.rms_norm_eps);
    }
    row += n;
  }
  report.Done(ForwardKernel::kFinalNorm, -1, logit_rows);
  report.Activation(ActivationPoint::kFinalNorm, -1, b.head_input.data(), logit_rows, d);
  Project(weights_.LmHead(), b.head_input.data(), logit_rows, b.logits.data(), invariant);
  report.Done(ForwardKernel::kLmHead, -1, logit_rows);
  return std::span<const float>(b.logits.data(), static_cast<std::size_t>(logit_rows) * c.vocab_size);
}

void Model::GrowStepBuffers(int rows, int logit_rows, std::size_t chunks) {
  const ModelConfig& c = config_;
  StepBuffers& b = step_;
  if (rows > b.rows) {
    const auto grow = [rows](std::vector<float>& v, int width) {
      v.resize(static_cast<std::size_t>(rows) * width);
    };
    grow(b.x, c.hidden_size);
    grow(b.x_norm, c.hidden_size);
    grow(b.q, c.QueryDim());
    grow(b.k, c.KvDim());
    grow(b.v, c.KvDim());
    grow(b.attention, c.QueryDim());
    grow(b.projected, c.hidden_size);
    grow(b.gate, c.intermediate_size);
    grow(b.up, c.intermediate_size);
    b.rows = rows;
  }
  GrowTo(b.head_input, static_cast<std::size_t>(logit_rows) * c.hidden_size);
  GrowTo(b.logits, static_cast<std::size_t>(logit_rows) * c.vocab_size);
  GrowTo(b.items, chunks);
}

}  // namespace plumb
