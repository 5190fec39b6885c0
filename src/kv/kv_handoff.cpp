// The KV hand-off file (include/plumb/kv/kv_handoff.h; format: docs/kv-cache.md, "KV hand-off format").
#include "plumb/kv/kv_handoff.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <map>

#include "plumb/core/error.h"
#include "plumb/core/extent.h"
#include "plumb/core/write_file.h"
#include "plumb/formats/safetensors.h"

#ifndef PLUMB_VERSION
#define PLUMB_VERSION "unknown"
#endif

namespace plumb {
namespace {

// Shape fields are checked against this before anything is sized by them: a forged header cannot make the
// reader allocate or loop beyond what the file's own bytes could hold.
constexpr long long kMaxDimension = 1 << 20;

DType TensorDType(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::kF32:
      return DType::F32;
    case KvDtype::kF16:
      return DType::F16;
    case KvDtype::kBF16:
      return DType::BF16;
    case KvDtype::kFp8E4M3:
      return DType::F8_E4M3;
    case KvDtype::kFp8E5M2:
      return DType::F8_E5M2;
  }
  throw MakeError("KV hand-off: unknown KV dtype");
}

std::string KeysName(int layer) {
  return "layers." + std::to_string(layer) + ".keys";
}
std::string ValuesName(int layer) {
  return "layers." + std::to_string(layer) + ".values";
}

std::vector<std::uint8_t> ToBytes(std::span<const float> values) {
  std::vector<std::uint8_t> bytes(values.size_bytes());
  if (!bytes.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// The metadata of one file, read field by field with errors that name the file and the field.
class Fields {
 public:
  Fields(const std::map<std::string, std::string>& metadata, const std::string& name)
      : metadata_(metadata), name_(name) {}

  const std::string& String(const std::string& key) const {
    const auto it = metadata_.find(key);
    if (it == metadata_.end()) throw MakeError(name_, ": KV hand-off metadata field ", key, " is missing");
    return it->second;
  }
  int Int(const std::string& key, long long lo, long long hi) const {
    const std::string& text = String(key);
    long long value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size() || text.empty()) {
      throw MakeError(name_, ": KV hand-off metadata field ", key, " = \"", text, "\" is not an integer");
    }
    if (value < lo || value > hi) {
      throw MakeError(name_, ": KV hand-off metadata field ", key, " = ", value, " is outside [", lo, ", ",
                      hi, "]");
    }
    return static_cast<int>(value);
  }
  bool Has(const std::string& key) const { return metadata_.count(key) != 0; }

 private:
  const std::map<std::string, std::string>& metadata_;
  const std::string& name_;
};

void CheckTensor(const SafetensorsFile& file, const std::string& name, const std::string& tensor, DType dtype,
                 const std::vector<std::int64_t>& shape) {
  if (!file.Contains(tensor)) throw MakeError(name, ": KV hand-off tensor ", tensor, " is missing");
  const TensorInfo& info = file.Info(tensor);
  if (info.dtype != dtype || info.shape != shape) {
    std::string want, got;
    for (const std::int64_t d : shape) want += (want.empty() ? "" : ", ") + std::to_string(d);
    for (const std::int64_t d : info.shape) got += (got.empty() ? "" : ", ") + std::to_string(d);
    throw MakeError(name, ": KV hand-off tensor ", tensor, " is ", DTypeName(info.dtype), " [", got,
                    "], expected ", DTypeName(dtype), " [", want, "]");
  }
}

std::vector<float> ReadScales(const SafetensorsFile& file, const std::string& name, const std::string& tensor,
                              int n_layers, int n_kv_heads) {
  CheckTensor(file, name, tensor, DType::F32, {n_layers, n_kv_heads});
  std::vector<float> scales = file.ReadF32(tensor);
  for (std::size_t i = 0; i < scales.size(); ++i) {
    if (!(scales[i] > 0.0f) || !std::isfinite(scales[i])) {
      throw MakeError(name, ": KV hand-off tensor ", tensor, "[", i, "] = ", scales[i],
                      " is not a positive finite scale");
    }
  }
  return scales;
}

template <typename T>
void Expect(const std::string& path, const char* field, const T& file_value, const T& expected) {
  if (!(file_value == expected)) {
    throw MakeError(path, ": KV hand-off field ", field, " is ", file_value, " in the file but ", expected,
                    " here");
  }
}

}  // namespace

KvHandoff ExportKv(const KvSequence& kv, std::span<const int> tokens, const KvHandoffModel& model,
                   std::optional<int> next_token) {
  const int length = kv.length();
  if (static_cast<std::size_t>(length) != tokens.size()) {
    throw MakeError("KV export: ", tokens.size(), " token ids for a cache of ", length, " positions");
  }
  if (length < 1) throw MakeError("KV export: the cache is empty");
  if (kv.n_layers() != model.n_layers || kv.n_kv_heads() != model.n_kv_heads ||
      kv.head_dim() != model.head_dim) {
    throw MakeError("KV export: the cache's shape (", kv.n_layers(), " layers, ", kv.n_kv_heads(),
                    " KV heads, head_dim ", kv.head_dim(), ") is not the model's");
  }
  KvHandoff h;
  h.model = model;
  h.dtype = kv.dtype();
  h.tokens.assign(tokens.begin(), tokens.end());
  h.next_token = next_token;
  const std::size_t elem = KvDtypeBytes(h.dtype);
  const std::size_t row_bytes = Extent(kv.n_kv_heads(), kv.head_dim()) * elem;
  const std::size_t head_bytes = Extent(kv.head_dim()) * elem;
  for (int l = 0; l < kv.n_layers(); ++l) {
    const KvLayerView view = kv.Layer(l);
    std::vector<std::uint8_t>& keys = h.keys.emplace_back(row_bytes * static_cast<std::size_t>(length));
    std::vector<std::uint8_t>& values = h.values.emplace_back(row_bytes * static_cast<std::size_t>(length));
    const auto* k = static_cast<const std::uint8_t*>(view.keys);
    const auto* v = static_cast<const std::uint8_t*>(view.values);
    for (int p = 0; p < length; ++p) {
      for (int hd = 0; hd < kv.n_kv_heads(); ++hd) {
        const std::size_t from = static_cast<std::size_t>(view.Element(p, hd)) * elem;
        const std::size_t to = Extent(p) * row_bytes + Extent(hd) * head_bytes;
        std::memcpy(keys.data() + to, k + from, head_bytes);
        std::memcpy(values.data() + to, v + from, head_bytes);
      }
    }
    if (IsFp8(h.dtype)) {
      for (int hd = 0; hd < kv.n_kv_heads(); ++hd) {
        h.k_scales.push_back(view.KScale(hd));
        h.v_scales.push_back(view.VScale(hd));
      }
    }
  }
  return h;
}

std::vector<std::uint8_t> SerializeKvHandoff(const KvHandoff& h) {
  const KvHandoffModel& m = h.model;
  std::map<std::string, std::string> meta = {
      {"format", kKvHandoffFormat},
      {"format_version", std::to_string(kKvHandoffVersion)},
      {"plumb_version", PLUMB_VERSION},
      {"architecture", m.architecture},
      {"n_layers", std::to_string(m.n_layers)},
      {"n_heads", std::to_string(m.n_heads)},
      {"n_kv_heads", std::to_string(m.n_kv_heads)},
      {"head_dim", std::to_string(m.head_dim)},
      {"hidden_size", std::to_string(m.hidden_size)},
      {"vocab_size", std::to_string(m.vocab_size)},
      {"weights_sha256", m.weights_sha256},
      {"kv_dtype", std::string(KvDtypeName(h.dtype))},
      {"length", std::to_string(h.length())},
  };
  if (h.next_token) meta["next_token"] = std::to_string(*h.next_token);
  std::vector<TensorToWrite> tensors;
  std::vector<std::uint8_t> ids(h.tokens.size() * sizeof(std::int32_t));
  for (std::size_t i = 0; i < h.tokens.size(); ++i) {
    const auto id = static_cast<std::int32_t>(h.tokens[i]);
    std::memcpy(ids.data() + i * sizeof(id), &id, sizeof(id));  // little-endian hosts only, as all of plumb
  }
  tensors.push_back({"tokens", DType::I32, {h.length()}, std::move(ids)});
  const std::vector<std::int64_t> shape = {h.length(), m.n_kv_heads, m.head_dim};
  for (std::size_t l = 0; l < h.keys.size(); ++l) {
    tensors.push_back({KeysName(static_cast<int>(l)), TensorDType(h.dtype), shape, h.keys[l]});
    tensors.push_back({ValuesName(static_cast<int>(l)), TensorDType(h.dtype), shape, h.values[l]});
  }
  if (IsFp8(h.dtype)) {
    tensors.push_back({"k_scales", DType::F32, {m.n_layers, m.n_kv_heads}, ToBytes(h.k_scales)});
    tensors.push_back({"v_scales", DType::F32, {m.n_layers, m.n_kv_heads}, ToBytes(h.v_scales)});
  }
  return SerializeSafetensors(std::move(tensors), meta);
}

void WriteKvHandoff(const std::string& path, const KvHandoff& handoff) {
  WriteFileBytes(path, SerializeKvHandoff(handoff));
}

namespace {

KvHandoff FromFile(const SafetensorsFile& file, const std::string& name) {
  const Fields f(file.metadata(), name);
  if (!f.Has("format") || f.String("format") != kKvHandoffFormat) {
    throw MakeError(name, ": not a KV hand-off file: metadata field format is ",
                    f.Has("format") ? "\"" + f.String("format") + "\"" : std::string("missing"),
                    ", expected \"", kKvHandoffFormat, "\"");
  }
  const int version = f.Int("format_version", 0, kMaxDimension);
  if (version != kKvHandoffVersion) {
    throw MakeError(name, ": KV hand-off metadata field format_version = ", version,
                    ", this plumb reads version ", kKvHandoffVersion);
  }
  KvHandoff h;
  KvHandoffModel& m = h.model;
  m.architecture = f.String("architecture");
  m.n_layers = f.Int("n_layers", 1, kMaxDimension);
  m.n_heads = f.Int("n_heads", 1, kMaxDimension);
  m.n_kv_heads = f.Int("n_kv_heads", 1, kMaxDimension);
  m.head_dim = f.Int("head_dim", 1, kMaxDimension);
  m.hidden_size = f.Int("hidden_size", 1, kMaxDimension);
  m.vocab_size = f.Int("vocab_size", 1, 1LL << 30);
  m.weights_sha256 = f.String("weights_sha256");
  try {
    h.dtype = ParseKvDtype(f.String("kv_dtype"));
  } catch (const Error& e) {
    throw MakeError(name, ": KV hand-off metadata field kv_dtype: ", e.what());
  }
  const int length = f.Int("length", 1, 1LL << 30);
  if (f.Has("next_token")) h.next_token = f.Int("next_token", 0, m.vocab_size - 1);

  // Exactly the tensors the metadata calls for: 1 + 2 per layer (+ 2 scales for FP8).
  const std::size_t expected = 1 + 2 * static_cast<std::size_t>(m.n_layers) + (IsFp8(h.dtype) ? 2 : 0);
  if (file.tensors().size() != expected) {
    throw MakeError(name, ": KV hand-off holds ", file.tensors().size(), " tensors; n_layers = ", m.n_layers,
                    " and kv_dtype = ", KvDtypeName(h.dtype), " make ", expected);
  }
  CheckTensor(file, name, "tokens", DType::I32, {length});
  const std::vector<std::int32_t> ids = file.ReadI32("tokens");
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= m.vocab_size) {
      throw MakeError(name, ": KV hand-off tensor tokens[", i, "] = ", ids[i],
                      " is outside the vocabulary [0, ", m.vocab_size, ")");
    }
  }
  h.tokens.assign(ids.begin(), ids.end());
  const std::vector<std::int64_t> shape = {length, m.n_kv_heads, m.head_dim};
  for (int l = 0; l < m.n_layers; ++l) {
    for (const std::string& tensor : {KeysName(l), ValuesName(l)}) {
      CheckTensor(file, name, tensor, TensorDType(h.dtype), shape);
      const std::span<const std::uint8_t> bytes = file.Bytes(tensor);
      (tensor == KeysName(l) ? h.keys : h.values).emplace_back(bytes.begin(), bytes.end());
    }
  }
  if (IsFp8(h.dtype)) {
    h.k_scales = ReadScales(file, name, "k_scales", m.n_layers, m.n_kv_heads);
    h.v_scales = ReadScales(file, name, "v_scales", m.n_layers, m.n_kv_heads);
  }
  return h;
}

}  // namespace

KvHandoff ReadKvHandoff(const std::string& path) {
  return FromFile(SafetensorsFile::Open(path), path);
}

KvHandoff ParseKvHandoff(std::vector<std::uint8_t> bytes, const std::string& name) {
  return FromFile(SafetensorsFile::FromBytes(std::move(bytes), name), name);
}

void CheckKvHandoffModel(const KvHandoff& handoff, const KvHandoffModel& model, const std::string& path) {
  const KvHandoffModel& f = handoff.model;
  Expect(path, "architecture", f.architecture, model.architecture);
  Expect(path, "n_layers", f.n_layers, model.n_layers);
  Expect(path, "n_heads", f.n_heads, model.n_heads);
  Expect(path, "n_kv_heads", f.n_kv_heads, model.n_kv_heads);
  Expect(path, "head_dim", f.head_dim, model.head_dim);
  Expect(path, "hidden_size", f.hidden_size, model.hidden_size);
  Expect(path, "vocab_size", f.vocab_size, model.vocab_size);
  if (f.weights_sha256 != model.weights_sha256) {
    throw MakeError(path, ": KV hand-off field weights_sha256 is ", f.weights_sha256,
                    " in the file but the model's weights hash to ", model.weights_sha256,
                    ": the cache was computed by other weights");
  }
}

void ImportKv(const KvHandoff& h, KvSequence& kv, const std::string& path) {
  Expect(path, "n_layers", h.model.n_layers, kv.n_layers());
  Expect(path, "n_kv_heads", h.model.n_kv_heads, kv.n_kv_heads());
  Expect(path, "head_dim", h.model.head_dim, kv.head_dim());
  Expect(path, "kv_dtype", KvDtypeName(h.dtype), KvDtypeName(kv.dtype()));
  if (kv.length() != 0) {
    throw MakeError(path, ": KV import needs an empty sequence; this one holds ", kv.length(), " positions");
  }
  if (h.length() > kv.max_positions()) {
    throw MakeError(path, ": KV hand-off field length = ", h.length(), " exceeds the context of ",
                    kv.max_positions(), " positions");
  }
  if (h.keys.size() != static_cast<std::size_t>(kv.n_layers()) || h.values.size() != h.keys.size()) {
    throw MakeError(path, ": KV hand-off holds ", h.keys.size(), " layers of keys, the cache ",
                    kv.n_layers());
  }
  const std::size_t row_bytes = Extent(kv.n_kv_heads(), kv.head_dim()) * KvDtypeBytes(kv.dtype());
  for (int l = 0; l < kv.n_layers(); ++l) {
    const auto at = static_cast<std::size_t>(l);
    if (h.keys[at].size() != row_bytes * static_cast<std::size_t>(h.length()) ||
        h.values[at].size() != h.keys[at].size()) {
      throw MakeError(path, ": KV hand-off layer ", l, " holds ", h.keys[at].size(),
                      " bytes of keys, expected ", row_bytes * static_cast<std::size_t>(h.length()));
    }
    if (!IsFp8(kv.dtype())) continue;
    const KvLayerView view = kv.Layer(l);
    for (int hd = 0; hd < kv.n_kv_heads(); ++hd) {
      const std::size_t s = Extent(l, kv.n_kv_heads()) + static_cast<std::size_t>(hd);
      if (s >= h.k_scales.size() || s >= h.v_scales.size() || h.k_scales[s] != view.KScale(hd) ||
          h.v_scales[s] != view.VScale(hd)) {
        throw MakeError(path, ": KV hand-off FP8 scales (k_scales / v_scales) of layer ", l, " KV head ", hd,
                        " differ from the cache's");
      }
    }
  }
  kv.Reserve(h.length());
  for (int l = 0; l < kv.n_layers(); ++l) {
    const auto at = static_cast<std::size_t>(l);
    for (int p = 0; p < h.length(); ++p) {
      const std::size_t from = Extent(p) * row_bytes;
      kv.WriteStored(l, p, h.keys[at].data() + from, h.values[at].data() + from);
    }
  }
  kv.Commit(h.tokens);
}

}  // namespace plumb
