// See model.h. The forward pass is docs/models.md "Llama (and Mistral, Qwen2)", one kernel of cuda/kernels.h
// per step; python/examples/torch_engine.py (llama_pass, op_tp_layer) is the same computation in PyTorch.
//
// Every step goes through a small host function here that checks the sizes of the device ranges it hands
// the kernel (DeviceSpan), then launches it unless this is a --check-only pass. So --check-only runs this
// whole file but the launches: it reads and checks the GGUF file and the hand-off file, builds the weight
// layout, sizes every buffer and walks every pass of every case with its offsets, which is as much of the
// harness as can be checked without a GPU.
#include "model.h"

#include <cmath>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gguf.h"
#include "plumb/core/sha256.h"

namespace plumb::cuda {
namespace {

using fixtures::Tensor;

template <class T>
std::span<const std::uint8_t> BytesOf(std::span<const T> values) {
  return {reinterpret_cast<const std::uint8_t*>(values.data()), values.size_bytes()};
}
template <class T>
std::span<const std::uint8_t> BytesOf(const std::vector<T>& values) {
  return BytesOf(std::span<const T>(values));
}

// A size the kernels take as an int (grid dimensions, strides): checked to fit.
int Narrow(std::int64_t v, const char* what) {
  if (v < 0 || v > std::numeric_limits<int>::max())
    throw MakeError("runner: ", what, " = ", v, " is not an int");
  return static_cast<int>(v);
}

// 1/√head_dim, attention's softmax scale (rounded once, from double).
float SoftmaxScale(std::int64_t head_dim) {
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
}

// ==== 1. The model, read from its GGUF file on the host ====================================================

struct LlamaConfig {
  std::int64_t n_layers = 0, d = 0, ffn = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0, vocab = 0;
  float eps = 0.0f, theta = 0.0f;
};

// A weight matrix [n][k] as Gemv reads it: rows one after the other, in the GGUF type's own bytes.
struct HostMatrix {
  WeightDtype dtype = WeightDtype::kF32;
  std::int64_t n = 0, k = 0;
  std::span<const std::uint8_t> stored;  // the file's bytes
  std::vector<std::uint8_t> reordered;   // W_q and W_k: the rows un-permuted (UnpermuteQkRows); else empty

  std::span<const std::uint8_t> Bytes() const {
    return reordered.empty() ? stored : std::span<const std::uint8_t>(reordered);
  }
};

struct HostLayer {
  std::span<const std::uint8_t> attn_norm, ffn_norm;  // F32 [d]
  HostMatrix q, k, v, o, gate, up, down;
};

struct LlamaModel {
  std::string path;
  std::vector<std::uint8_t> file;  // the whole GGUF file; every span below points into it
  std::string sha256;              // of the file: what a KV hand-off file and the suite's manifest name
  LlamaConfig config;
  HostMatrix embed;                  // token_embd [vocab][d]
  std::optional<HostMatrix> output;  // output.weight [vocab][d]; absent: tied to the embedding (SmolLM2)
  std::span<const std::uint8_t> out_norm;
  std::vector<HostLayer> layers;
};

// The GEMV weight dtype that decodes a GGUF tensor's bytes as they are (docs/formats.md "GGUF blocks").
WeightDtype GemvDtypeOf(const GgufTensor& t, const std::string& file) {
  switch (static_cast<GgmlType>(t.type)) {
    case GgmlType::kF32:
      return WeightDtype::kF32;
    case GgmlType::kF16:
      return WeightDtype::kF16;
    case GgmlType::kBf16:
      return WeightDtype::kBf16;
    case GgmlType::kQ4_0:
      return WeightDtype::kQ4_0;
    case GgmlType::kQ4_1:
      return WeightDtype::kQ4_1;
    case GgmlType::kQ8_0:
      return WeightDtype::kQ8_0;
  }
  throw MakeError(file, ": tensor \"", t.name, "\" is ", GgmlTypeName(t.type),
                  ", which the harness's kernels do not decode (F32, F16, BF16, Q4_0, Q4_1, Q8_0)");
}

// Tensor `name`, a matrix of n rows of k columns (GGUF dims {k, n}) of a type Gemv decodes.
HostMatrix ReadMatrix(const GgufFile& g, const std::string& name, std::int64_t n, std::int64_t k) {
  const GgufTensor* t = g.Find(name);
  if (t == nullptr) throw MakeError(g.name(), ": tensor \"", name, "\" is missing");
  if (t->dims.size() != 2 || t->dims[0] != static_cast<std::uint64_t>(k) ||
      t->dims[1] != static_cast<std::uint64_t>(n))
    throw MakeError(g.name(), ": tensor \"", name, "\" does not have GGUF dims {", k, ", ", n, "} ([", n,
                    " rows][", k, " columns])");
  HostMatrix m;
  m.dtype = GemvDtypeOf(*t, g.name());
  m.n = n;
  m.k = k;
  m.stored = g.Data(*t);
  return m;
}

// Tensor `name`, an F32 vector of n elements (the RMSNorm weights).
std::span<const std::uint8_t> ReadVector(const GgufFile& g, const std::string& name, std::int64_t n) {
  const GgufTensor* t = g.Find(name);
  if (t == nullptr) throw MakeError(g.name(), ": tensor \"", name, "\" is missing");
  if (t->dims.size() != 1 || t->dims[0] != static_cast<std::uint64_t>(n) ||
      static_cast<GgmlType>(t->type) != GgmlType::kF32)
    throw MakeError(g.name(), ": tensor \"", name, "\" is not an F32 vector of ", n, " elements");
  return g.Data(*t);
}

// llama.cpp's converter stores W_q and W_k with each head's rows permuted for interleaved RoPE pairs
// (docs/formats.md "RoPE pairing"); the suite's keys are in Hugging Face's rotate-half order, as plumb loads
// them. So the rows are put back here, once, on the host: within head h, GGUF row h·hd + 2j + s becomes row
// h·hd + s·hd/2 + j (s = 0, 1; j < hd/2). A row is whole GGUF blocks, so moving rows moves bytes only.
void UnpermuteQkRows(HostMatrix& m, std::int64_t heads, std::int64_t head_dim) {
  if (m.n != heads * head_dim || head_dim % 2 != 0)
    throw MakeError("runner: Q/K un-permutation of ", m.n, " rows as ", heads, " heads of ", head_dim);
  const auto row_bytes = static_cast<std::size_t>(m.stored.size() / static_cast<std::size_t>(m.n));
  m.reordered.resize(m.stored.size());
  for (std::int64_t h = 0; h < heads; ++h)
    for (std::int64_t s = 0; s < 2; ++s)
      for (std::int64_t j = 0; j < head_dim / 2; ++j) {
        const auto from = static_cast<std::size_t>(h * head_dim + 2 * j + s);
        const auto to = static_cast<std::size_t>(h * head_dim + s * head_dim / 2 + j);
        std::memcpy(m.reordered.data() + to * row_bytes, m.stored.data() + from * row_bytes, row_bytes);
      }
}

// The hyper-parameters of docs/models.md's Llama from the GGUF metadata. Like plumb, the reader refuses a
// file it does not understand: another architecture, or an `llama.` key that would change the math (RoPE
// scaling, experts, a partial rotary dimension) and that this pass does not implement.
LlamaConfig ReadConfig(const GgufFile& g) {
  if (g.String("general.architecture") != "llama")
    throw MakeError(g.name(), ": general.architecture \"", g.String("general.architecture"),
                    "\"; the harness runs llama only");
  static const std::set<std::string> kUnderstood = {
      "llama.context_length",       "llama.embedding_length",       "llama.block_count",
      "llama.feed_forward_length",  "llama.attention.head_count",   "llama.attention.head_count_kv",
      "llama.rope.freq_base",       "llama.rope.dimension_count",   "llama.attention.layer_norm_rms_epsilon",
      "llama.attention.key_length", "llama.attention.value_length", "llama.vocab_size",
      "llama.expert_count",         "llama.expert_used_count",      "llama.rope.scaling.type"};
  for (const auto& [key, value] : g.metadata())
    if (key.rfind("llama.", 0) == 0 && kUnderstood.count(key) == 0)
      throw MakeError(g.name(), ": GGUF metadata \"", key, "\" is not one the harness's Llama pass reads");
  if (g.Has("llama.expert_count") && g.Uint("llama.expert_count") != 0)
    throw MakeError(g.name(), ": llama.expert_count ", g.Uint("llama.expert_count"), " (experts: not run)");
  if (g.Has("llama.rope.scaling.type") && g.String("llama.rope.scaling.type") != "none")
    throw MakeError(g.name(), ": llama.rope.scaling.type \"", g.String("llama.rope.scaling.type"),
                    "\" (RoPE scaling: not run by the model cases)");

  auto dim = [&](const char* key) {  // a positive size that the kernels can take as an int
    const std::uint64_t v = g.Uint(key);
    if (v == 0 || v > (1u << 24)) throw MakeError(g.name(), ": ", key, " = ", v, " is out of range");
    return static_cast<std::int64_t>(v);
  };
  LlamaConfig c;
  c.n_layers = dim("llama.block_count");
  c.d = dim("llama.embedding_length");
  c.ffn = dim("llama.feed_forward_length");
  c.n_heads = dim("llama.attention.head_count");
  c.n_kv_heads = g.Has("llama.attention.head_count_kv") ? dim("llama.attention.head_count_kv") : c.n_heads;
  if (c.d % c.n_heads != 0 || c.n_heads % c.n_kv_heads != 0)
    throw MakeError(g.name(), ": ", c.n_heads, " query heads, ", c.n_kv_heads, " KV heads and d = ", c.d,
                    " do not split evenly");
  c.head_dim = c.d / c.n_heads;
  if (c.head_dim % 2 != 0)
    throw MakeError(g.name(), ": head_dim ", c.head_dim, " is odd; RoPE rotates pairs");
  for (const char* key :
       {"llama.rope.dimension_count", "llama.attention.key_length", "llama.attention.value_length"})
    if (g.Has(key) && g.Uint(key) != static_cast<std::uint64_t>(c.head_dim))
      throw MakeError(g.name(), ": ", key, " = ", g.Uint(key), ", not head_dim = ", c.head_dim);
  c.eps = static_cast<float>(g.Float("llama.attention.layer_norm_rms_epsilon"));
  c.theta = g.Has("llama.rope.freq_base") ? static_cast<float>(g.Float("llama.rope.freq_base")) : 10000.0f;
  if (!(c.eps > 0.0f) || !(c.theta > 0.0f) || !std::isfinite(c.theta))
    throw MakeError(g.name(), ": RMSNorm eps ", c.eps, " or RoPE theta ", c.theta, " is not positive");
  return c;
}

// Reads the GGUF file at `path` whole, its hash, and every tensor of docs/models.md's Llama; a tensor the
// pass would not read (a bias, rope_freqs.weight) is refused, naming it, as plumb refuses it.
std::unique_ptr<LlamaModel> LoadLlama(const std::filesystem::path& path) {
  auto m = std::make_unique<LlamaModel>();
  m->path = path.string();
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw MakeError(m->path, ": cannot open the model file");
  const std::streamoff size = in.tellg();
  if (size <= 0) throw MakeError(m->path, ": empty or unreadable");
  m->file.resize(static_cast<std::size_t>(size));
  in.seekg(0);
  if (!in.read(reinterpret_cast<char*>(m->file.data()), size)) throw MakeError(m->path, ": read failed");
  {
    Sha256 digest;  // plumb's own (src/core/sha256.cpp, compiled into the runner on both build paths)
    digest.Update(m->file);
    m->sha256 = digest.HexDigest();
  }

  const GgufFile g = GgufFile::Parse(m->file, m->path);
  LlamaConfig& c = m->config;
  c = ReadConfig(g);
  const GgufTensor* embd = g.Find("token_embd.weight");
  if (embd == nullptr || embd->dims.size() != 2 || embd->dims[1] > (1u << 24))
    throw MakeError(m->path, ": token_embd.weight missing or not [vocab][d] of at most 2^24 rows");
  c.vocab = static_cast<std::int64_t>(embd->dims[1]);
  if (g.Has("llama.vocab_size") && g.Uint("llama.vocab_size") != static_cast<std::uint64_t>(c.vocab))
    throw MakeError(m->path, ": llama.vocab_size ", g.Uint("llama.vocab_size"), " but token_embd has ",
                    c.vocab, " rows");

  std::set<std::string> read;  // every tensor name the pass uses, to refuse the others
  auto matrix = [&](const std::string& name, std::int64_t n, std::int64_t k) {
    read.insert(name);
    return ReadMatrix(g, name, n, k);
  };
  auto vector = [&](const std::string& name, std::int64_t n) {
    read.insert(name);
    return ReadVector(g, name, n);
  };
  m->embed = matrix("token_embd.weight", c.vocab, c.d);
  if (g.Find("output.weight") != nullptr) m->output = matrix("output.weight", c.vocab, c.d);
  m->out_norm = vector("output_norm.weight", c.d);
  const std::int64_t q_rows = c.n_heads * c.head_dim, kv_rows = c.n_kv_heads * c.head_dim;
  for (std::int64_t l = 0; l < c.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    HostLayer& layer = m->layers.emplace_back();
    layer.attn_norm = vector(p + "attn_norm.weight", c.d);
    layer.ffn_norm = vector(p + "ffn_norm.weight", c.d);
    layer.q = matrix(p + "attn_q.weight", q_rows, c.d);
    layer.k = matrix(p + "attn_k.weight", kv_rows, c.d);
    layer.v = matrix(p + "attn_v.weight", kv_rows, c.d);
    layer.o = matrix(p + "attn_output.weight", c.d, q_rows);
    layer.gate = matrix(p + "ffn_gate.weight", c.ffn, c.d);
    layer.up = matrix(p + "ffn_up.weight", c.ffn, c.d);
    layer.down = matrix(p + "ffn_down.weight", c.d, c.ffn);
    UnpermuteQkRows(layer.q, c.n_heads, c.head_dim);
    UnpermuteQkRows(layer.k, c.n_kv_heads, c.head_dim);
  }
  for (const GgufTensor& t : g.tensors())
    if (read.count(t.name) == 0)
      throw MakeError(m->path, ": tensor \"", t.name, "\" is not one the harness's Llama pass reads");
  return m;
}

// The model at `path`, read once per run (the model cases share it; the runner is single-threaded).
const LlamaModel& Model(const std::filesystem::path& path) {
  static std::map<std::string, std::unique_ptr<LlamaModel>> loaded;
  std::unique_ptr<LlamaModel>& m = loaded[path.string()];
  if (!m) m = LoadLlama(path);
  return *m;
}

// The case's params against the model file (a different model is another model, not a kernel bug), and the
// file against the suite manifest's record of it (size and SHA-256) when the manifest names that file.
void CheckModelAgainstCase(const CaseIo& io, const LlamaModel& m, const ModelSource& source) {
  const LlamaConfig& c = m.config;
  const std::pair<const char*, std::int64_t> expected[] = {{"n_layers", c.n_layers},
                                                           {"hidden_size", c.d},
                                                           {"n_kv_heads", c.n_kv_heads},
                                                           {"head_dim", c.head_dim},
                                                           {"vocab_size", c.vocab}};
  for (const auto& [key, value] : expected)
    if (io.Int(key) != value) io.Fail("param ", key, " = ", io.Int(key), " but ", m.path, " has ", value);
  if (io.HasParam("n_heads") && io.Int("n_heads") != c.n_heads)
    io.Fail("param n_heads = ", io.Int("n_heads"), " but ", m.path, " has ", c.n_heads);
  const nlohmann::json& s = source.suite_model;
  if (!s.is_object() || !s.contains("file") || s["file"] != io.String("model")) return;
  if (s.contains("sha256") && s["sha256"].is_string() && s["sha256"].get<std::string>() != m.sha256)
    io.Fail(m.path, " has SHA-256 ", m.sha256, ", the suite's model ", s["sha256"].get<std::string>(),
            " (another file of that name: check it before blaming a kernel)");
  if (s.contains("bytes") && s["bytes"].is_number_unsigned() &&
      s["bytes"].get<std::uint64_t>() != m.file.size())
    io.Fail(m.path, " has ", m.file.size(), " bytes, the suite's model ", s["bytes"].get<std::uint64_t>());
}

// ==== 2. On the device: weights, the KV cache, activations ================================================

// A weight matrix on the device, as Gemv reads it.
class DeviceMatrix {
 public:
  DeviceMatrix(WeightDtype dtype, std::int64_t n, std::int64_t k, std::span<const std::uint8_t> bytes)
      : dtype_(dtype), n_(n), k_(k), data_(bytes) {}
  explicit DeviceMatrix(const HostMatrix& m) : DeviceMatrix(m.dtype, m.n, m.k, m.Bytes()) {}

  std::int64_t n() const { return n_; }
  std::int64_t k() const { return k_; }
  // The kernels' view (device pointers: for a launch only).
  GemvWeights View() const {
    GemvWeights w;
    w.dtype = dtype_;
    w.w = data_.Span<std::uint8_t>().get();
    return w;
  }

 private:
  WeightDtype dtype_;
  std::int64_t n_, k_;
  DeviceBuffer data_;
};

struct DeviceLayer {
  explicit DeviceLayer(const HostLayer& h)
      : attn_norm(h.attn_norm),
        ffn_norm(h.ffn_norm),
        q(h.q),
        k(h.k),
        v(h.v),
        o(h.o),
        gate(h.gate),
        up(h.up),
        down(h.down) {}
  DeviceBuffer attn_norm, ffn_norm;
  DeviceMatrix q, k, v, o, gate, up, down;
};

// The model's weights uploaded (about the GGUF file's size: the formats stay packed, as an engine keeps
// them).
struct DeviceModel {
  explicit DeviceModel(const LlamaModel& m) : config(m.config), embed(m.embed), out_norm(m.out_norm) {
    if (m.output) output.emplace(*m.output);
    for (const HostLayer& layer : m.layers) layers.emplace_back(layer);
  }
  const DeviceMatrix& LmHead() const { return output ? *output : embed; }

  LlamaConfig config;
  DeviceMatrix embed;
  std::optional<DeviceMatrix> output;
  DeviceBuffer out_norm;
  std::deque<DeviceLayer> layers;  // a deque: never moves its elements (DeviceBuffer is not movable)
};

// One sequence's KV cache for every layer, in the contiguous layout (kernels.h KvLayout::kContiguous, as
// plumb's ContiguousKvCache): [n_layers][n_kv_heads][capacity][head_dim] elements of `dtype`, one layer after
// the other, position p in slot p of the layer's one block; scales [n_layers][n_kv_heads] (FP8: value =
// code · scale; 1 for the other dtypes, whose kernels ignore them).
struct CacheShape {
  KvDtype dtype = KvDtype::kF32;
  std::int64_t n_layers = 0, n_kv_heads = 0, capacity = 0, head_dim = 0;

  std::int64_t LayerElements() const { return n_kv_heads * capacity * head_dim; }
  std::int64_t LayerBytes() const { return LayerElements() * KvElementBytes(dtype); }
  std::int64_t Bytes() const { return n_layers * LayerBytes(); }
};

// The bytes of a cache of this shape with every element NaN (a NaN of its dtype: f32 0x7FC00000, f16 0x7E00,
// bf16 0x7FC0, FP8 0x7F), as the suite poisons its unused slots: a position read before it is written shows
// as a NaN in the outputs.
std::vector<std::uint8_t> PoisonedCache(const CacheShape& s) {
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(s.Bytes()));
  std::vector<std::uint8_t> nan;
  switch (s.dtype) {
    case KvDtype::kF32:
      nan = {0x00, 0x00, 0xC0, 0x7F};
      break;
    case KvDtype::kF16:
      nan = {0x00, 0x7E};
      break;
    case KvDtype::kBf16:
      nan = {0xC0, 0x7F};
      break;
    case KvDtype::kFp8E4m3:
    case KvDtype::kFp8E5m2:
      nan = {0x7F};
      break;
  }
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = nan[i % nan.size()];
  return bytes;
}

std::vector<std::int32_t> Iota32(std::int64_t n) {
  std::vector<std::int32_t> v(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::int32_t>(i);
  return v;
}
std::vector<std::int64_t> Iota64(std::int64_t n) {
  std::vector<std::int64_t> v(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::int64_t>(i);
  return v;
}

class SequenceCache {
 public:
  // A cache that starts as k_bytes / v_bytes (each shape.Bytes() in the layout above: PoisonedCache for an
  // empty one, the imported positions for a hand-off) with these scales ([n_layers][n_kv_heads] each).
  SequenceCache(const CacheShape& shape, std::span<const std::uint8_t> k_bytes,
                std::span<const std::uint8_t> v_bytes, std::span<const float> k_scales,
                std::span<const float> v_scales)
      : shape_(Checked(shape, k_bytes, v_bytes, k_scales, v_scales)),
        k_(k_bytes),
        v_(v_bytes),
        k_scales_(BytesOf(k_scales)),
        v_scales_(BytesOf(v_scales)),
        counting_(BytesOf(Iota32(shape.capacity + 1))),
        slots_(BytesOf(Iota64(shape.capacity))),
        table_(BytesOf(Iota32(1))) {}

  const CacheShape& shape() const { return shape_; }
  const DeviceBuffer& keys() const { return k_; }
  const DeviceBuffer& values() const { return v_; }

  // Layer l as the kernels read it (device pointers: for a launch only).
  PagedKv Layer(std::int64_t l) const {
    PagedKv kv;
    kv.layout = KvLayout::kContiguous;
    kv.dtype = shape_.dtype;
    kv.k = k_.Span<std::uint8_t>().Slice(l * shape_.LayerBytes(), shape_.LayerBytes()).get();
    kv.v = v_.Span<std::uint8_t>().Slice(l * shape_.LayerBytes(), shape_.LayerBytes()).get();
    kv.k_scale = k_scales_.Span<float>().Slice(l * shape_.n_kv_heads, shape_.n_kv_heads).get();
    kv.v_scale = v_scales_.Span<float>().Slice(l * shape_.n_kv_heads, shape_.n_kv_heads).get();
    kv.n_kv_heads = static_cast<int>(shape_.n_kv_heads);
    kv.head_dim = static_cast<int>(shape_.head_dim);
    kv.block_size = static_cast<int>(shape_.capacity);
    return kv;
  }
  // The sequence's one block {0}, and seq_lens pointing at `length` in the array 0, 1, …, capacity (which
  // is also every pass's positions): a pass reads its length from the device without a copy of its own.
  PageTable Pages(std::int64_t length) const {
    PageTable pages;
    pages.block_tables = table_.Span<std::int32_t>().get();
    pages.seq_lens = counting_.Span<std::int32_t>().Slice(length, 1).get();
    pages.max_blocks_per_seq = 1;
    return pages;
  }
  // Positions pos0 … pos0 + rows − 1 (RoPE's input), and their slots (ReshapeAndCache's: slot p is position
  // p).
  DeviceSpan<std::int32_t> Positions(std::int64_t pos0, std::int64_t rows) const {
    return counting_.Span<std::int32_t>().Slice(pos0, rows);
  }
  DeviceSpan<std::int64_t> Slots(std::int64_t pos0, std::int64_t rows) const {
    return slots_.Span<std::int64_t>().Slice(pos0, rows);
  }

 private:
  static CacheShape Checked(const CacheShape& s, std::span<const std::uint8_t> k,
                            std::span<const std::uint8_t> v, std::span<const float> k_scales,
                            std::span<const float> v_scales) {
    if (s.capacity < 1 || s.capacity > std::numeric_limits<std::int32_t>::max() - 1 ||
        static_cast<std::int64_t>(k.size()) != s.Bytes() ||
        static_cast<std::int64_t>(v.size()) != s.Bytes() ||
        static_cast<std::int64_t>(k_scales.size()) != s.n_layers * s.n_kv_heads ||
        static_cast<std::int64_t>(v_scales.size()) != s.n_layers * s.n_kv_heads)
      throw MakeError("runner: a KV cache of ", s.n_layers, " layers, ", s.n_kv_heads, " heads and ",
                      s.capacity, " positions given ", k.size(), " / ", v.size(), " bytes and ",
                      k_scales.size(), " / ", v_scales.size(), " scales");
    return s;
  }

  CacheShape shape_;
  DeviceBuffer k_, v_, k_scales_, v_scales_;
  DeviceBuffer counting_;  // I32 0, 1, …, capacity: positions and sequence lengths
  DeviceBuffer slots_;     // I64 0, 1, …, capacity − 1
  DeviceBuffer table_;     // I32 {0}
};

std::vector<float> Ones(std::int64_t n) {
  return std::vector<float>(static_cast<std::size_t>(n), 1.0f);
}

// The activations of one pass of up to `rows` tokens over a cache of `capacity` positions.
struct Workspace {
  Workspace(const LlamaConfig& c, std::int64_t rows_, std::int64_t capacity)
      : rows(rows_),
        x(Floats(rows * c.d)),
        h(Floats(rows * c.d)),
        q(Floats(rows * c.n_heads * c.head_dim)),
        k(Floats(rows * c.n_kv_heads * c.head_dim)),
        v(Floats(rows * c.n_kv_heads * c.head_dim)),
        attn(Floats(rows * c.n_heads * c.head_dim)),
        o(Floats(rows * c.d)),
        gate(Floats(rows * c.ffn)),
        up(Floats(rows * c.ffn)),
        act(Floats(rows * c.ffn)),
        mlp(Floats(rows * c.d)),
        scores(Floats(rows * c.n_heads * capacity)),
        final_norm(Floats(c.d)),
        logits(Floats(c.vocab)) {}
  static std::size_t Floats(std::int64_t n) { return static_cast<std::size_t>(n) * sizeof(float); }

  std::int64_t rows;
  DeviceBuffer x, h, q, k, v, attn, o, gate, up, act, mlp, scores, final_norm, logits;
};

// ==== 3. The steps: one kernel each, its ranges checked on the host =======================================

// y[rows][w.n] = x[rows][w.k] · Wᵀ (rounded as --precision says).
void Linear(const DeviceMatrix& w, DeviceSpan<float> x, DeviceSpan<float> y, std::int64_t rows) {
  x.Expect(rows * w.k(), "a projection's input");
  y.Expect(rows * w.n(), "a projection's output");
  if (check_only_pass) return;
  Gemv(w.View(), x.get(), y.get(), Narrow(rows, "rows"), Narrow(w.n(), "n"), Narrow(w.k(), "k"),
       run_precision);
}

// out[rows][n] = RMSNorm(x) ⊙ weight.
void Norm(DeviceSpan<float> x, DeviceSpan<float> weight, DeviceSpan<float> out, std::int64_t rows,
          std::int64_t n, float eps) {
  x.Expect(rows * n, "RMSNorm's input");
  weight.Expect(n, "RMSNorm's weight");
  out.Expect(rows * n, "RMSNorm's output");
  if (check_only_pass) return;
  RmsNorm(x.get(), weight.get(), out.get(), Narrow(rows, "rows"), Narrow(n, "n"), eps, run_precision);
}

// x [rows][heads][head_dim] rotated in place, rotate-half pairs (Hugging Face's order: the Q/K rows were
// un-permuted on load). In place is safe: each thread reads the two elements of its pair, then writes them.
void RotateHalf(DeviceSpan<float> x, DeviceSpan<std::int32_t> positions, std::int64_t rows,
                std::int64_t heads, std::int64_t head_dim, float theta) {
  x.Expect(rows * heads * head_dim, "RoPE's input");
  positions.Expect(rows, "RoPE's positions");
  if (check_only_pass) return;
  Rope(x.get(), positions.get(), x.get(), Narrow(rows, "rows"), Narrow(heads, "heads"),
       Narrow(head_dim, "head_dim"), theta, RopePairing::kRotateHalf, nullptr, run_precision);
}

// out = a + b (FP32: the residual stream and the all-reduce stay FP32 under either precision).
void Sum(DeviceSpan<float> a, DeviceSpan<float> b, DeviceSpan<float> out) {
  b.Expect(a.count(), "an addend");
  out.Expect(a.count(), "a sum");
  if (check_only_pass) return;
  Add(a.get(), b.get(), out.get(), a.count());
}

void Copy(DeviceSpan<float> from, DeviceSpan<float> to) {
  to.Expect(from.count(), "a copy's destination");
  if (check_only_pass || from.count() == 0) return;
  CheckCuda(cudaMemcpy(to.get(), from.get(), static_cast<std::size_t>(from.count()) * sizeof(float),
                       cudaMemcpyDeviceToDevice),
            "copy on the device");
}

// out = silu(gate) ⊙ up, elementwise over every row.
void SwiGlu(DeviceSpan<float> gate, DeviceSpan<float> up, DeviceSpan<float> out) {
  up.Expect(gate.count(), "SwiGLU's up");
  out.Expect(gate.count(), "SwiGLU's output");
  if (check_only_pass) return;
  Swiglu(gate.get(), up.get(), out.get(), Narrow(gate.count(), "SwiGLU's length"), run_precision);
}

// out[rows][d] = the embedding rows of `tokens` (each checked in [0, vocab) by the caller).
void Embedding(const DeviceMatrix& table, DeviceSpan<std::int32_t> tokens, DeviceSpan<float> out,
               std::int64_t rows) {
  tokens.Expect(rows, "the pass's tokens");
  out.Expect(rows * table.k(), "the embedding rows");
  if (check_only_pass) return;
  Embed(table.View(), tokens.get(), out.get(), Narrow(rows, "rows"), Narrow(table.n(), "vocab"),
        Narrow(table.k(), "d"));
}

// Positions pos0 … pos0 + rows − 1 of layer l take k and v [rows][n_kv_heads][head_dim], encoded into the
// cache's dtype (bf16 rounded to nearest even, FP8 divided by its head's scale, SATFINITE: StoreKv).
void WriteCache(const SequenceCache& cache, std::int64_t l, DeviceSpan<float> k, DeviceSpan<float> v,
                std::int64_t pos0, std::int64_t rows) {
  const CacheShape& s = cache.shape();
  if (l < 0 || l >= s.n_layers || pos0 < 0 || pos0 + rows > s.capacity)
    throw MakeError("runner: cache write of positions [", pos0, ", ", pos0 + rows, ") of layer ", l,
                    " into a cache of ", s.capacity, " positions and ", s.n_layers, " layers");
  k.Expect(rows * s.n_kv_heads * s.head_dim, "the new keys");
  v.Expect(rows * s.n_kv_heads * s.head_dim, "the new values");
  const DeviceSpan<std::int64_t> slots = cache.Slots(pos0, rows);
  if (check_only_pass) return;
  ReshapeAndCache(cache.Layer(l), k.get(), v.get(), slots.get(), Narrow(rows, "rows"));
}

// Causal attention of q [rows][n_heads][head_dim] (positions pos0 …) over positions 0 … of layer l, each
// decoded from the cache (its own position's key and value included: they were written first); out likewise.
void Attend(const SequenceCache& cache, std::int64_t l, DeviceSpan<float> q, DeviceSpan<float> out,
            DeviceSpan<float> scores, std::int64_t pos0, std::int64_t rows, std::int64_t n_heads) {
  const CacheShape& s = cache.shape();
  const std::int64_t length = pos0 + rows;
  if (l < 0 || l >= s.n_layers || pos0 < 0 || length > s.capacity || n_heads % s.n_kv_heads != 0)
    throw MakeError("runner: attention of positions [", pos0, ", ", length, ") and ", n_heads,
                    " heads over a cache of ", s.capacity, " positions and ", s.n_kv_heads, " KV heads");
  q.Expect(rows * n_heads * s.head_dim, "attention's queries");
  out.Expect(rows * n_heads * s.head_dim, "attention's output");
  const DeviceSpan<float> used = scores.Slice(0, rows * n_heads * length);  // [rows][n_heads][length]
  if (check_only_pass) return;
  AttentionPrefill(cache.Layer(l), cache.Pages(length), q.get(), out.get(), used.get(), Narrow(rows, "rows"),
                   Narrow(n_heads, "n_heads"), Narrow(length, "length"), SoftmaxScale(s.head_dim), 0,
                   run_precision);
}

// Positions [0, count) of layer l read back from the cache, decoded to FP32 as attention reads them:
// k_out, v_out [n_kv_heads][count][head_dim].
void ReadBack(const SequenceCache& cache, std::int64_t l, std::int64_t count, DeviceSpan<float> k_out,
              DeviceSpan<float> v_out) {
  const CacheShape& s = cache.shape();
  if (l < 0 || l >= s.n_layers || count < 0 || count > s.capacity)
    throw MakeError("runner: reading ", count, " positions of layer ", l, " of a cache of ", s.capacity);
  k_out.Expect(s.n_kv_heads * count * s.head_dim, "the keys read back");
  v_out.Expect(s.n_kv_heads * count * s.head_dim, "the values read back");
  if (check_only_pass) return;
  ReadKv(cache.Layer(l), Narrow(count, "count"), k_out.get(), v_out.get());
}

// ==== 4. The forward pass (docs/models.md "Llama") =========================================================

// Where a pass records the residual stream (docs/fixtures.md "layer"): entering each layer, after
// x + o_proj(attention) and after the MLP; layer l's rows go to elements [l · layer_stride, + rows · d).
struct Trace {
  DeviceSpan<float> layer_input, after_attention, after_mlp;
  std::int64_t layer_stride = 0;
};

// One pass over `rows` tokens at positions pos0 … pos0 + rows − 1: a prefill, or a decode step (rows = 1).
// Each layer's new keys and values go into the cache first, and attention reads every position back from it,
// its own included, as a paged engine does (docs/fixtures.md "kv_handoff": an FP8 or bf16 cache rounds the
// step's own key and value before it attends to them). Leaves the final RMSNorm of the last row in
// ws.final_norm and, with `logits`, the logits of that row in ws.logits.
void LlamaPass(const DeviceModel& m, const SequenceCache& cache, const Workspace& ws,
               DeviceSpan<std::int32_t> tokens, std::int64_t pos0, std::int64_t rows, const Trace* trace,
               bool logits) {
  const LlamaConfig& c = m.config;
  if (rows < 1 || rows > ws.rows)
    throw MakeError("runner: a pass of ", rows, " rows, workspace for ", ws.rows);
  const std::int64_t q_width = rows * c.n_heads * c.head_dim, kv_width = rows * c.n_kv_heads * c.head_dim;
  const DeviceSpan<float> x = ws.x.Span<float>().Slice(0, rows * c.d),
                          h = ws.h.Span<float>().Slice(0, rows * c.d);
  const DeviceSpan<float> q = ws.q.Span<float>().Slice(0, q_width),
                          attn = ws.attn.Span<float>().Slice(0, q_width);
  const DeviceSpan<float> k = ws.k.Span<float>().Slice(0, kv_width),
                          v = ws.v.Span<float>().Slice(0, kv_width);
  const DeviceSpan<float> o = ws.o.Span<float>().Slice(0, rows * c.d),
                          mlp = ws.mlp.Span<float>().Slice(0, rows * c.d);
  const DeviceSpan<float> gate = ws.gate.Span<float>().Slice(0, rows * c.ffn),
                          up = ws.up.Span<float>().Slice(0, rows * c.ffn),
                          act = ws.act.Span<float>().Slice(0, rows * c.ffn);
  const DeviceSpan<std::int32_t> positions = cache.Positions(pos0, rows);
  auto record = [&](DeviceSpan<float> stage, std::int64_t l) {  // x, into layer l's rows of a Trace stage
    if (trace != nullptr) Copy(x, stage.Slice(l * trace->layer_stride, rows * c.d));
  };

  Embedding(m.embed, tokens, x, rows);  // x = embed[token], not scaled (Llama)
  for (std::int64_t l = 0; l < c.n_layers; ++l) {
    const DeviceLayer& w = m.layers[static_cast<std::size_t>(l)];
    record(trace ? trace->layer_input : DeviceSpan<float>(), l);
    // Attention: x += W_o · attention(RoPE(W_q·h), RoPE(W_k·h), W_v·h), h = RMSNorm(x) ⊙ w_attn_norm.
    Norm(x, w.attn_norm.Span<float>(), h, rows, c.d, c.eps);
    Linear(w.q, h, q, rows);
    Linear(w.k, h, k, rows);
    Linear(w.v, h, v, rows);
    RotateHalf(q, positions, rows, c.n_heads, c.head_dim, c.theta);
    RotateHalf(k, positions, rows, c.n_kv_heads, c.head_dim, c.theta);
    WriteCache(cache, l, k, v, pos0, rows);
    Attend(cache, l, q, attn, ws.scores.Span<float>(), pos0, rows, c.n_heads);
    Linear(w.o, attn, o, rows);
    Sum(x, o, x);
    record(trace ? trace->after_attention : DeviceSpan<float>(), l);
    // MLP: x += W_down · (silu(W_gate·h) ⊙ W_up·h), h = RMSNorm(x) ⊙ w_ffn_norm.
    Norm(x, w.ffn_norm.Span<float>(), h, rows, c.d, c.eps);
    Linear(w.gate, h, gate, rows);
    Linear(w.up, h, up, rows);
    SwiGlu(gate, up, act);
    Linear(w.down, act, mlp, rows);
    Sum(x, mlp, x);
    record(trace ? trace->after_mlp : DeviceSpan<float>(), l);
  }
  // The last row only: the logits of the next token.
  Norm(x.Slice((rows - 1) * c.d, c.d), m.out_norm.Span<float>(), ws.final_norm.Span<float>(), 1, c.d, c.eps);
  if (logits) Linear(m.LmHead(), ws.final_norm.Span<float>(), ws.logits.Span<float>(), 1);
}

// Token ids from the case, each checked to lie in [0, vocab) (the embedding lookup follows them).
void CheckTokens(const CaseIo& io, const std::vector<std::int32_t>& tokens, std::int64_t vocab,
                 const char* what) {
  for (std::size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || tokens[i] >= vocab)
      io.Fail(what, "[", i, "] = ", tokens[i], " outside [0, vocab = ", vocab, ")");
}

// The greedy token of a logits row: the argmax, the lowest id on ties (docs/fixtures.md "end_to_end"). On the
// host, from the row the pass downloaded (under --check-only a row of zeros: token 0).
std::int32_t Greedy(const Tensor& row) {
  const std::vector<float> logits = row.As<float>();
  std::size_t best = 0;
  for (std::size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[best]) best = i;
  return static_cast<std::int32_t>(best);
}

// ==== 5. The cases =========================================================================================

CacheShape ModelCacheShape(const LlamaConfig& c, KvDtype dtype, std::int64_t capacity) {
  CacheShape s;
  s.dtype = dtype;
  s.n_layers = c.n_layers;
  s.n_kv_heads = c.n_kv_heads;
  s.capacity = capacity;
  s.head_dim = c.head_dim;
  return s;
}

// layer: prefill `prompt_len` tokens in one pass, then decode the rest one per pass, into one F32 cache,
// recording the residual stream at every layer boundary, the final RMSNorm of each pass and the cache.
std::map<std::string, Tensor> RunLayer(const CaseIo& io, const LlamaModel& model) {
  const LlamaConfig& c = model.config;
  const std::int64_t prompt = io.Int("prompt_len"), steps = io.Int("decode_steps", 0), total = prompt + steps;
  const Tensor& tokens_t = io.Get("tokens", "I32", {total});
  CheckTokens(io, tokens_t.As<std::int32_t>(), c.vocab, "tokens");

  const DeviceModel m(model);
  const CacheShape shape = ModelCacheShape(c, KvDtype::kF32, total);
  const std::vector<std::uint8_t> empty = PoisonedCache(shape);
  const std::vector<float> ones = Ones(c.n_layers * c.n_kv_heads);
  const SequenceCache cache(shape, empty, empty, ones, ones);
  const Workspace ws(c, prompt, total);
  const DeviceBuffer tokens(tokens_t);
  auto floats = [](std::int64_t n) { return static_cast<std::size_t>(n) * sizeof(float); };
  const DeviceBuffer prefill_input(floats(c.n_layers * prompt * c.d)),
      prefill_attn(floats(c.n_layers * prompt * c.d)),
      prefill_mlp(floats(c.n_layers * prompt * c.d));  // [n_layers][P][d]
  const DeviceBuffer decode_input(floats(steps * c.n_layers * c.d)),
      decode_attn(floats(steps * c.n_layers * c.d)),
      decode_mlp(floats(steps * c.n_layers * c.d));          // [N][n_layers][d]
  const DeviceBuffer final_norm(floats((steps + 1) * c.d));  // [N + 1][d]

  const Trace prefill{prefill_input.Span<float>(), prefill_attn.Span<float>(), prefill_mlp.Span<float>(),
                      prompt * c.d};
  LlamaPass(m, cache, ws, tokens.Span<std::int32_t>().Slice(0, prompt), 0, prompt, &prefill, false);
  Copy(ws.final_norm.Span<float>(), final_norm.Span<float>().Slice(0, c.d));
  for (std::int64_t i = 0; i < steps; ++i) {
    const std::int64_t step = c.n_layers * c.d;  // one decode step's [n_layers][d]
    const Trace decode{decode_input.Span<float>().Slice(i * step, step),
                       decode_attn.Span<float>().Slice(i * step, step),
                       decode_mlp.Span<float>().Slice(i * step, step), c.d};
    LlamaPass(m, cache, ws, tokens.Span<std::int32_t>().Slice(prompt + i, 1), prompt + i, 1, &decode, false);
    Copy(ws.final_norm.Span<float>(), final_norm.Span<float>().Slice((i + 1) * c.d, c.d));
  }
  // The F32 cache's bytes are the output's: [n_layers][n_kv_heads][P + N][head_dim], keys after RoPE.
  const Shape cache_shape{c.n_layers, c.n_kv_heads, total, c.head_dim};
  return {{"prefill.layer_input", prefill_input.Download("F32", {c.n_layers, prompt, c.d})},
          {"prefill.after_attention", prefill_attn.Download("F32", {c.n_layers, prompt, c.d})},
          {"prefill.after_mlp", prefill_mlp.Download("F32", {c.n_layers, prompt, c.d})},
          {"decode.layer_input", decode_input.Download("F32", {steps, c.n_layers, c.d})},
          {"decode.after_attention", decode_attn.Download("F32", {steps, c.n_layers, c.d})},
          {"decode.after_mlp", decode_mlp.Download("F32", {steps, c.n_layers, c.d})},
          {"final_norm", final_norm.Download("F32", {steps + 1, c.d})},
          {"k_cache", cache.keys().Download("F32", cache_shape)},
          {"v_cache", cache.values().Download("F32", cache_shape)}};
}

// end_to_end: prefill the prompt, then decode the case's `decode_tokens` (the reference's greedy tokens, fed
// so that a rounded engine's own argmax cannot move later steps onto another sequence); a suite older than
// that input feeds each step's argmax back. `tokens` is this engine's argmax of each row either way.
std::map<std::string, Tensor> RunEndToEnd(const CaseIo& io, const LlamaModel& model) {
  const LlamaConfig& c = model.config;
  const std::int64_t prompt = io.Int("prompt_len"), steps = io.Int("decode_steps", 0);
  const Tensor& prompt_t = io.Get("prompt", "I32", {prompt});
  CheckTokens(io, prompt_t.As<std::int32_t>(), c.vocab, "prompt");
  std::vector<std::int32_t> fed;
  if (io.Has("decode_tokens")) {
    fed = io.Get("decode_tokens", "I32", {steps}).As<std::int32_t>();
    CheckTokens(io, fed, c.vocab, "decode_tokens");
  }

  const DeviceModel m(model);
  const CacheShape shape = ModelCacheShape(c, KvDtype::kF32, prompt + steps);
  const std::vector<std::uint8_t> empty = PoisonedCache(shape);
  const std::vector<float> ones = Ones(c.n_layers * c.n_kv_heads);
  const SequenceCache cache(shape, empty, empty, ones, ones);
  const Workspace ws(c, prompt, prompt + steps);
  const DeviceBuffer tokens(static_cast<std::size_t>(prompt + steps) * sizeof(std::int32_t));
  tokens.Upload(0, prompt_t.bytes);
  const DeviceBuffer logits(static_cast<std::size_t>((steps + 1) * c.vocab) *
                            sizeof(float));  // [N + 1][vocab]
  std::vector<std::int32_t> greedy;

  // Each pass's logits go to their row; the row comes back to the host for the argmax, whose token goes to
  // the device as the next pass's input.
  auto keep_logits = [&](std::int64_t row) {
    Copy(ws.logits.Span<float>(), logits.Span<float>().Slice(row * c.vocab, c.vocab));
    const auto bytes = static_cast<std::size_t>(c.vocab) * sizeof(float);
    greedy.push_back(
        Greedy(logits.DownloadRange("F32", {c.vocab}, static_cast<std::size_t>(row) * bytes, bytes)));
  };
  LlamaPass(m, cache, ws, tokens.Span<std::int32_t>().Slice(0, prompt), 0, prompt, nullptr, true);
  keep_logits(0);
  for (std::int64_t i = 0; i < steps; ++i) {
    const std::int32_t token = fed.empty() ? greedy.back() : fed[static_cast<std::size_t>(i)];
    tokens.Upload(static_cast<std::size_t>(prompt + i) * sizeof(std::int32_t),
                  BytesOf(std::span<const std::int32_t>(&token, 1)));
    LlamaPass(m, cache, ws, tokens.Span<std::int32_t>().Slice(prompt + i, 1), prompt + i, 1, nullptr, true);
    keep_logits(i + 1);
  }
  return {{"logits", logits.Download("F32", {steps + 1, c.vocab})},
          {"tokens", Tensor::From<std::int32_t>("I32", {steps + 1}, greedy)}};
}

// ---- kv_handoff: the hand-off file (docs/kv-cache.md "KV hand-off format") --------------------------------

// A KV hand-off file read and checked against the model and the case: its positions, per layer its keys and
// values [length][n_kv_heads][head_dim] as stored, and the scales.
struct Handoff {
  KvDtype dtype = KvDtype::kF32;
  std::int64_t length = 0;
  std::vector<std::span<const std::uint8_t>> keys, values;  // per layer, inside the file
  std::vector<float> k_scales, v_scales;                    // [n_layers][n_kv_heads]; 1 unless FP8
};

// One tensor entry of a safetensors header, its data checked to lie inside the data section.
struct SafetensorsEntry {
  std::string dtype;
  Shape shape;
  std::span<const std::uint8_t> data;
};

// A metadata value that must be a decimal integer (no sign, no spaces: docs/kv-cache.md "Metadata").
std::int64_t Decimal(const CaseIo& io, const std::map<std::string, std::string>& meta,
                     const std::string& key) {
  const auto it = meta.find(key);
  if (it == meta.end()) io.Fail("the hand-off file's metadata has no \"", key, "\"");
  const std::string& s = it->second;
  if (s.empty() || s.size() > 12 || s.find_first_not_of("0123456789") != std::string::npos)
    io.Fail("the hand-off file's \"", key, "\" = \"", s, "\" is not a decimal integer");
  return std::stoll(s);
}

Handoff ReadHandoff(const CaseIo& io, std::span<const std::uint8_t> file, const LlamaModel& model,
                    const std::vector<std::int32_t>& continuation) {
  const LlamaConfig& c = model.config;
  // The safetensors framing: an 8-byte little-endian header length, the JSON header, the data.
  if (file.size() < 8) io.Fail("the hand-off file has ", file.size(), " bytes");
  std::uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | file[static_cast<std::size_t>(i)];
  if (header_len > file.size() - 8)
    io.Fail("the hand-off file's header length ", header_len, " runs past its end");
  nlohmann::json header;
  try {
    header =
        nlohmann::json::parse(file.begin() + 8, file.begin() + 8 + static_cast<std::ptrdiff_t>(header_len));
  } catch (const nlohmann::json::exception& e) {
    io.Fail("the hand-off file's header is not JSON: ", e.what());
  }
  if (!header.is_object()) io.Fail("the hand-off file's header is not a JSON object");
  const std::span<const std::uint8_t> data = file.subspan(8 + static_cast<std::size_t>(header_len));

  std::map<std::string, std::string> meta;
  std::map<std::string, SafetensorsEntry> tensors;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") {
      if (!info.is_object()) io.Fail("the hand-off file's __metadata__ is not an object");
      for (const auto& [key, value] : info.items()) {
        if (!value.is_string()) io.Fail("the hand-off file's metadata \"", key, "\" is not a string");
        meta[key] = value.get<std::string>();
      }
      continue;
    }
    static const std::map<std::string, std::uint64_t> kElementBytes = {
        {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"I32", 4}};
    if (!info.is_object() || !info.contains("dtype") || !info["dtype"].is_string() ||
        !info.contains("shape") || !info["shape"].is_array() || !info.contains("data_offsets") ||
        !info["data_offsets"].is_array() || info["data_offsets"].size() != 2 ||
        !info["data_offsets"][0].is_number_unsigned() || !info["data_offsets"][1].is_number_unsigned())
      io.Fail("the hand-off file's tensor \"", name, "\" lacks dtype, shape or data_offsets");
    SafetensorsEntry e;
    e.dtype = info["dtype"].get<std::string>();
    const auto bytes = kElementBytes.find(e.dtype);
    if (bytes == kElementBytes.end())
      io.Fail("the hand-off file's tensor \"", name, "\" has dtype ", e.dtype);
    std::uint64_t elements = 1;
    for (const auto& dim : info["shape"]) {
      if (!dim.is_number_unsigned() || dim.get<std::uint64_t>() > (1u << 30))
        io.Fail("the hand-off file's tensor \"", name, "\" has a bad shape entry ", dim.dump());
      elements *= dim.get<std::uint64_t>();
      if (elements > (std::uint64_t{1} << 40))
        io.Fail("the hand-off file's tensor \"", name, "\" is too large");
      e.shape.push_back(dim.get<std::int64_t>());
    }
    const auto begin = info["data_offsets"][0].get<std::uint64_t>(),
               end = info["data_offsets"][1].get<std::uint64_t>();
    if (begin > end || end > data.size() || end - begin != elements * bytes->second)
      io.Fail("the hand-off file's tensor \"", name, "\": data_offsets [", begin, ", ", end, "] outside the ",
              data.size(), "-byte data or not ", elements, " elements of ", e.dtype);
    e.data = data.subspan(static_cast<std::size_t>(begin), static_cast<std::size_t>(end - begin));
    tensors.emplace(name, std::move(e));
  }

  // The metadata: this format, this model, this case.
  auto text = [&](const char* key) {
    const auto it = meta.find(key);
    if (it == meta.end()) io.Fail("the hand-off file's metadata has no \"", key, "\"");
    return it->second;
  };
  if (text("format") != "plumb.kv-handoff" || text("format_version") != "1")
    io.Fail("not a version-1 KV hand-off file (format \"", text("format"), "\", version \"",
            text("format_version"), "\")");
  if (text("architecture") != "llama") io.Fail("a hand-off file of a \"", text("architecture"), "\" model");
  if (text("weights_sha256") != model.sha256)
    io.Fail("the hand-off file was computed by weights of SHA-256 ", text("weights_sha256"), ", not ",
            model.path, "'s ", model.sha256);
  const std::pair<const char*, std::int64_t> shape[] = {
      {"n_layers", c.n_layers}, {"n_kv_heads", c.n_kv_heads}, {"head_dim", c.head_dim},
      {"n_heads", c.n_heads},   {"hidden_size", c.d},         {"vocab_size", c.vocab}};
  for (const auto& [key, value] : shape)
    if (Decimal(io, meta, key) != value)
      io.Fail("the hand-off file's ", key, " = ", Decimal(io, meta, key), ", the model's ", value);
  Handoff h;
  h.length = Decimal(io, meta, "length");
  if (h.length < 1 || h.length != io.Int("length"))
    io.Fail("the hand-off file holds ", h.length, " positions, params.length = ", io.Int("length"));
  if (meta.count("next_token") != 0 &&
      (continuation.empty() || Decimal(io, meta, "next_token") != continuation[0]))
    io.Fail("the hand-off file's next_token ", Decimal(io, meta, "next_token"),
            " is not the continuation's first");

  // kv_dtype in the file's spelling, the suite's, and the safetensors dtype of the keys and values.
  static const std::map<std::string, std::tuple<std::string, KvDtype, std::string>> kDtypes = {
      {"f32", {"f32", KvDtype::kF32, "F32"}},
      {"f16", {"f16", KvDtype::kF16, "F16"}},
      {"bf16", {"bf16", KvDtype::kBf16, "BF16"}},
      {"fp8-e4m3", {"fp8_e4m3", KvDtype::kFp8E4m3, "F8_E4M3"}},
      {"fp8-e5m2", {"fp8_e5m2", KvDtype::kFp8E5m2, "F8_E5M2"}}};
  const auto dtype = kDtypes.find(text("kv_dtype"));
  if (dtype == kDtypes.end()) io.Fail("the hand-off file's kv_dtype \"", text("kv_dtype"), "\" is not known");
  const auto& [suite_name, kv_dtype, element] = dtype->second;
  if (suite_name != io.String("kv_dtype"))
    io.Fail("the hand-off file's kv_dtype is ", text("kv_dtype"), ", params.kv_dtype ",
            io.String("kv_dtype"));
  h.dtype = kv_dtype;
  const bool fp8 = kv_dtype == KvDtype::kFp8E4m3 || kv_dtype == KvDtype::kFp8E5m2;

  // Exactly the tensors the format names, each of its dtype and shape.
  std::set<std::string> expected = {"tokens"};
  for (std::int64_t l = 0; l < c.n_layers; ++l)
    for (const char* kind : {".keys", ".values"}) expected.insert("layers." + std::to_string(l) + kind);
  if (fp8) expected.insert({"k_scales", "v_scales"});
  for (const auto& [name, entry] : tensors)
    if (expected.count(name) == 0)
      io.Fail("the hand-off file holds a tensor \"", name, "\" the format does not name");
  auto tensor = [&](const std::string& name, const std::string& dtype_name, const Shape& want) {
    const auto it = tensors.find(name);
    if (it == tensors.end()) io.Fail("the hand-off file lacks tensor \"", name, "\"");
    if (it->second.dtype != dtype_name || it->second.shape != want)
      io.Fail("the hand-off file's \"", name, "\" is ", it->second.dtype, " ", ShapeText(it->second.shape),
              ", expected ", dtype_name, " ", ShapeText(want));
    return it->second.data;
  };
  const std::span<const std::uint8_t> positions = tensor("tokens", "I32", {h.length});
  std::vector<std::int32_t> ids(static_cast<std::size_t>(h.length));
  std::memcpy(ids.data(), positions.data(), positions.size());
  CheckTokens(io, ids, c.vocab, "the hand-off file's tokens");
  for (std::int64_t l = 0; l < c.n_layers; ++l) {
    const std::string p = "layers." + std::to_string(l);
    h.keys.push_back(tensor(p + ".keys", element, {h.length, c.n_kv_heads, c.head_dim}));
    h.values.push_back(tensor(p + ".values", element, {h.length, c.n_kv_heads, c.head_dim}));
  }
  h.k_scales = h.v_scales = Ones(c.n_layers * c.n_kv_heads);
  if (fp8) {
    for (auto [name, scales] : {std::pair{"k_scales", &h.k_scales}, std::pair{"v_scales", &h.v_scales}}) {
      const std::span<const std::uint8_t> bytes = tensor(name, "F32", {c.n_layers, c.n_kv_heads});
      std::memcpy(scales->data(), bytes.data(), bytes.size());
      for (float s : *scales)
        if (!(std::isfinite(s) && s > 0.0f)) io.Fail("the hand-off file's ", name, " holds ", s);
    }
  }
  return h;
}

// The file's keys or values moved into the cache's layout: per layer [length][n_kv_heads][head_dim] →
// [n_kv_heads][capacity][head_dim], positions past `length` NaN (PoisonedCache). The bytes travel as stored:
// FP8 stays FP8 with the file's scales, nothing is re-encoded.
std::vector<std::uint8_t> ImportedCache(const CacheShape& s, std::int64_t length,
                                        const std::vector<std::span<const std::uint8_t>>& layers) {
  std::vector<std::uint8_t> cache = PoisonedCache(s);
  const auto row = static_cast<std::size_t>(s.head_dim * KvElementBytes(s.dtype));
  for (std::int64_t l = 0; l < s.n_layers; ++l)
    for (std::int64_t p = 0; p < length; ++p)
      for (std::int64_t h = 0; h < s.n_kv_heads; ++h) {
        const auto from = static_cast<std::size_t>(p * s.n_kv_heads + h) * row;
        const auto to =
            static_cast<std::size_t>(l * s.LayerBytes()) + static_cast<std::size_t>(h * s.capacity + p) * row;
        std::memcpy(cache.data() + to, layers[static_cast<std::size_t>(l)].data() + from, row);
      }
  return cache;
}

// kv_handoff: import the file's positions into a cache of its dtype and scales, read them back decoded, then
// decode the continuation one token per pass, each step's own key and value rounded into that cache before
// attention reads them.
std::map<std::string, Tensor> RunKvHandoff(const CaseIo& io, const LlamaModel& model) {
  const LlamaConfig& c = model.config;
  const std::int64_t steps = io.Int("decode_steps");
  const Tensor& continuation_t = io.Get("continuation", "I32", {steps});
  const std::vector<std::int32_t> continuation = continuation_t.As<std::int32_t>();
  CheckTokens(io, continuation, c.vocab, "continuation");
  const Handoff h = ReadHandoff(io, io.GetVector("handoff", "U8").bytes, model, continuation);

  const DeviceModel m(model);
  const CacheShape shape = ModelCacheShape(c, h.dtype, h.length + steps);
  const SequenceCache cache(shape, ImportedCache(shape, h.length, h.keys),
                            ImportedCache(shape, h.length, h.values), h.k_scales, h.v_scales);
  // The imported positions read back from the engine's cache, decoded: [n_layers][n_kv_heads][L][head_dim].
  const std::int64_t layer_out = c.n_kv_heads * h.length * c.head_dim;
  const DeviceBuffer k_out(static_cast<std::size_t>(c.n_layers * layer_out) * sizeof(float));
  const DeviceBuffer v_out(static_cast<std::size_t>(c.n_layers * layer_out) * sizeof(float));
  for (std::int64_t l = 0; l < c.n_layers; ++l) {
    const DeviceSpan<float> k = k_out.Span<float>().Slice(l * layer_out, layer_out);
    const DeviceSpan<float> v = v_out.Span<float>().Slice(l * layer_out, layer_out);
    ReadBack(cache, l, h.length, k, v);
  }

  const Workspace ws(c, 1, h.length + steps);
  const DeviceBuffer tokens(continuation_t);
  const DeviceBuffer logits(static_cast<std::size_t>(steps * c.vocab) * sizeof(float));  // [N][vocab]
  for (std::int64_t i = 0; i < steps; ++i) {
    LlamaPass(m, cache, ws, tokens.Span<std::int32_t>().Slice(i, 1), h.length + i, 1, nullptr, true);
    Copy(ws.logits.Span<float>(), logits.Span<float>().Slice(i * c.vocab, c.vocab));
  }
  const Shape cache_out{c.n_layers, c.n_kv_heads, h.length, c.head_dim};
  return {{"k_cache", k_out.Download("F32", cache_out)},
          {"v_cache", v_out.Download("F32", cache_out)},
          {"logits", logits.Download("F32", {steps, c.vocab})}};
}

// ---- tp_layer (docs/fixtures.md "tp_layer")
// ----------------------------------------------------------------

// The KV heads rank r holds (vLLM's QKVParallelLinear; plumb/fixtures/tensor_parallel.h TpRanks): for
// tp < n_kv_heads its n_kv_heads / tp consecutive heads, otherwise the one head r / (tp / n_kv_heads),
// replicated on tp / n_kv_heads ranks.
std::vector<std::int64_t> KvHeadsOfRank(std::int64_t r, std::int64_t tp, std::int64_t n_kv_heads) {
  if (tp < n_kv_heads) {
    std::vector<std::int64_t> heads;
    for (std::int64_t i = 0; i < n_kv_heads / tp; ++i) heads.push_back(r * (n_kv_heads / tp) + i);
    return heads;
  }
  return {r / (tp / n_kv_heads)};
}

// One rank's shards: column-parallel W_q, W_k, W_v, W_gate, W_up (output rows split), row-parallel W_o and
// W_down (input columns split), F32.
struct RankShards {
  RankShards(const CaseIo& io, std::int64_t r, std::int64_t d, std::int64_t q_width, std::int64_t kv_width,
             std::int64_t ffn_r)
      : wq(Shard(io, r, "wq", q_width, d)),
        wk(Shard(io, r, "wk", kv_width, d)),
        wv(Shard(io, r, "wv", kv_width, d)),
        wo(Shard(io, r, "wo", d, q_width)),
        gate(Shard(io, r, "w_gate", ffn_r, d)),
        up(Shard(io, r, "w_up", ffn_r, d)),
        down(Shard(io, r, "w_down", d, ffn_r)) {}
  static std::span<const std::uint8_t> Bytes(const CaseIo& io, std::int64_t r, const char* name,
                                             std::int64_t n, std::int64_t k) {
    return io.Get("rank" + std::to_string(r) + "." + name, "F32", {n, k}).bytes;
  }
  static DeviceMatrix Shard(const CaseIo& io, std::int64_t r, const char* name, std::int64_t n,
                            std::int64_t k) {
    return DeviceMatrix(WeightDtype::kF32, n, k, Bytes(io, r, name, n, k));
  }
  DeviceMatrix wq, wk, wv, wo, gate, up, down;
};

// The all-reduce: out = Σ_r partials[r], summed in rank order in FP32 (((p0 + p1) + p2) + …), the order the
// case defines (its reduction_bound allows any other).
void AllReduce(const DeviceBuffer& partials, std::int64_t tp, DeviceSpan<float> out) {
  const std::int64_t n = out.count();
  Copy(partials.Span<float>().Slice(0, n), out);
  for (std::int64_t r = 1; r < tp; ++r) Sum(out, partials.Span<float>().Slice(r * n, n), out);
}

// tp_layer: one Llama layer split over tp ranks as Megatron and vLLM split it, each rank's shards run alone
// (one after the other on this GPU, as one would check a rank on a single GPU), then the two all-reduces.
std::map<std::string, Tensor> RunTpLayer(const CaseIo& io) {
  const std::int64_t tp = io.Int("tp"), rows = io.Int("rows"), d = io.Int("hidden_size"),
                     ffn = io.Int("intermediate_size"), n_heads = io.Int("n_heads"),
                     n_kv = io.Int("n_kv_heads"), hd = io.Int("head_dim");
  const auto eps = static_cast<float>(io.Number("eps")), theta = static_cast<float>(io.Number("theta"));
  if (n_heads % tp != 0 || ffn % tp != 0 || (n_kv % tp != 0 && tp % n_kv != 0) || n_heads % n_kv != 0)
    io.Fail("tp ", tp, " does not split ", n_heads, " query heads, ", n_kv, " KV heads and ffn ", ffn);
  if (hd % 2 != 0) io.Fail("head_dim ", hd, " is odd; RoPE rotates pairs");
  const std::int64_t q_heads = n_heads / tp, kv_heads = n_kv >= tp ? n_kv / tp : 1, ffn_r = ffn / tp;
  if (io.Int("q_heads_per_rank") != q_heads)
    io.Fail("q_heads_per_rank ", io.Int("q_heads_per_rank"), ", not ", q_heads);
  // The split the case states must be the one computed here: a KV head on another rank is another layer.
  const nlohmann::json& stated = io.c().params["kv_heads_of_rank"];
  for (std::int64_t r = 0; r < tp; ++r) {
    const std::vector<std::int64_t> heads = KvHeadsOfRank(r, tp, n_kv);
    if (!stated.is_array() || stated.size() != static_cast<std::size_t>(tp) ||
        stated[static_cast<std::size_t>(r)] != nlohmann::json(heads))
      io.Fail("params.kv_heads_of_rank does not give rank ", r, " the KV heads ",
              nlohmann::json(heads).dump());
  }
  const Tensor& positions_t = io.Get("positions", "I32", {rows});
  const std::vector<std::int32_t> positions = positions_t.As<std::int32_t>();
  for (std::int64_t i = 0; i < rows; ++i)  // row i attends to rows 0 … i: the prefill kernel's causal mask
    if (positions[static_cast<std::size_t>(i)] != i)
      io.Fail("positions[", i, "] = ", positions[static_cast<std::size_t>(i)],
              "; the rows must sit at 0 … rows − 1");

  const DeviceBuffer x(io.Get("x", "F32", {rows, d})), pos(positions_t);
  const DeviceBuffer attn_norm(io.Get("attn_norm", "F32", {d})), mlp_norm(io.Get("mlp_norm", "F32", {d}));
  std::deque<RankShards> ranks;
  for (std::int64_t r = 0; r < tp; ++r) ranks.emplace_back(io, r, d, q_heads * hd, kv_heads * hd, ffn_r);

  auto floats = [](std::int64_t n) { return static_cast<std::size_t>(n) * sizeof(float); };
  const DeviceBuffer hn(floats(rows * d)), h(floats(rows * d)), q(floats(rows * q_heads * hd)),
      k(floats(rows * kv_heads * hd)), v(floats(rows * kv_heads * hd)), attn(floats(rows * q_heads * hd)),
      scores(floats(rows * q_heads * rows)), gate(floats(rows * ffn_r)), up(floats(rows * ffn_r)),
      act(floats(rows * ffn_r));
  const DeviceBuffer attn_partials(floats(tp * rows * d)), mlp_partials(floats(tp * rows * d));  // [tp][P][d]
  const DeviceBuffer attn_out(floats(rows * d)), mlp_out(floats(rows * d)), layer_out(floats(rows * d));
  // Each rank's KV heads, F32: one cache, reused rank after rank (each overwrites positions 0 … P − 1).
  CacheShape shape;
  shape.n_layers = 1;
  shape.n_kv_heads = kv_heads;
  shape.capacity = rows;
  shape.head_dim = hd;
  const std::vector<std::uint8_t> empty = PoisonedCache(shape);
  const std::vector<float> ones = Ones(kv_heads);
  const SequenceCache cache(shape, empty, empty, ones, ones);
  const std::int64_t plane = rows * d;

  // Attention: hn = RMSNorm(x) (replicated: the same on every rank), then per rank its heads and W_o's slice.
  Norm(x.Span<float>(), attn_norm.Span<float>(), hn.Span<float>(), rows, d, eps);
  for (std::int64_t r = 0; r < tp; ++r) {
    const RankShards& w = ranks[static_cast<std::size_t>(r)];
    Linear(w.wq, hn.Span<float>(), q.Span<float>(), rows);
    Linear(w.wk, hn.Span<float>(), k.Span<float>(), rows);
    Linear(w.wv, hn.Span<float>(), v.Span<float>(), rows);
    RotateHalf(q.Span<float>(), pos.Span<std::int32_t>(), rows, q_heads, hd, theta);
    RotateHalf(k.Span<float>(), pos.Span<std::int32_t>(), rows, kv_heads, hd, theta);
    WriteCache(cache, 0, k.Span<float>(), v.Span<float>(), 0, rows);
    Attend(cache, 0, q.Span<float>(), attn.Span<float>(), scores.Span<float>(), 0, rows, q_heads);
    Linear(w.wo, attn.Span<float>(), attn_partials.Span<float>().Slice(r * plane, plane), rows);
  }
  AllReduce(attn_partials, tp, attn_out.Span<float>());
  // The MLP starts after the first all-reduce: its input is h = x + attn_out, the reduced residual.
  Sum(x.Span<float>(), attn_out.Span<float>(), h.Span<float>());
  Norm(h.Span<float>(), mlp_norm.Span<float>(), hn.Span<float>(), rows, d, eps);
  for (std::int64_t r = 0; r < tp; ++r) {
    const RankShards& w = ranks[static_cast<std::size_t>(r)];
    Linear(w.gate, hn.Span<float>(), gate.Span<float>(), rows);
    Linear(w.up, hn.Span<float>(), up.Span<float>(), rows);
    SwiGlu(gate.Span<float>(), up.Span<float>(), act.Span<float>());
    Linear(w.down, act.Span<float>(), mlp_partials.Span<float>().Slice(r * plane, plane), rows);
  }
  AllReduce(mlp_partials, tp, mlp_out.Span<float>());
  Sum(h.Span<float>(), mlp_out.Span<float>(), layer_out.Span<float>());

  std::map<std::string, Tensor> out;
  for (std::int64_t r = 0; r < tp; ++r) {
    const std::string p = "rank" + std::to_string(r) + ".";
    const auto offset = static_cast<std::size_t>(r * plane) * sizeof(float), bytes = floats(plane);
    out.emplace(p + "attn_partial", attn_partials.DownloadRange("F32", {rows, d}, offset, bytes));
    out.emplace(p + "mlp_partial", mlp_partials.DownloadRange("F32", {rows, d}, offset, bytes));
  }
  out.emplace("attn_out", attn_out.Download("F32", {rows, d}));
  out.emplace("mlp_out", mlp_out.Download("F32", {rows, d}));
  out.emplace("layer_out", layer_out.Download("F32", {rows, d}));
  return out;
}

}  // namespace

std::map<std::string, Tensor> RunModelCase(const CaseIo& io, const ModelSource& models) {
  const std::string& op = io.c().op;
  if (op == "tp_layer") return RunTpLayer(io);  // its weights are in the case file
  const std::string file = io.String("model");
  if (file.find('/') != std::string::npos) io.Fail("params.model \"", file, "\" must be a file name");
  const LlamaModel& model = Model(models.dir / file);
  CheckModelAgainstCase(io, model, models);
  if (op == "layer") return RunLayer(io, model);
  if (op == "end_to_end") return RunEndToEnd(io, model);
  if (op == "kv_handoff") return RunKvHandoff(io, model);
  io.Fail("op ", op, " is not a model case");
}

}  // namespace plumb::cuda
