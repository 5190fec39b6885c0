// safetensors reader and writer. The format, every check made here and the choices taken are specified in
// docs/formats.md, section "safetensors".
#include "plumb/formats/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>
#include <utility>

#include <nlohmann/json.hpp>

#include "plumb/core/error.h"
#include "plumb/core/write_file.h"

namespace plumb {

// Tensor bytes are little-endian (docs/formats.md); plumb copies them straight into host integers/floats.
static_assert(std::endian::native == std::endian::little, "plumb assumes a little-endian host");

namespace {

using Json = nlohmann::json;

// Same limit as the reference implementation (huggingface/safetensors): real headers are kilobytes to a few
// megabytes, so anything larger is corruption, and the check keeps a bad length from driving allocation.
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;
constexpr std::string_view kMetadataKey = "__metadata__";

std::string ShapeString(std::span<const std::int64_t> shape) {
  std::ostringstream out;
  out << '[';
  for (std::size_t i = 0; i < shape.size(); ++i) out << (i == 0 ? "" : ", ") << shape[i];
  out << ']';
  return out.str();
}

// A JSON value for an error message, cut short (at a UTF-8 character boundary) if long.
std::string Excerpt(const Json& value) {
  std::string text = value.dump();
  std::size_t cut = 80;
  if (text.size() <= cut) return text;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // inside a character
  return text.substr(0, cut) + "...";
}

// Product of the dims, or nullopt if it does not fit in int64 (dims must be non-negative). A zero dim
// makes the product 0 whatever the other dims are.
std::optional<std::int64_t> CheckedNumElements(std::span<const std::int64_t> shape) {
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
  std::int64_t product = 1;
  for (const std::int64_t dim : shape) {
    if (product > std::numeric_limits<std::int64_t>::max() / dim) return std::nullopt;
    product *= dim;
  }
  return product;
}

// numel * DTypeSize(dtype), or nullopt if that does not fit in 64 bits.
std::optional<std::uint64_t> CheckedNumBytes(std::int64_t numel, DType dtype) {
  const auto count = static_cast<std::uint64_t>(numel);
  const std::uint64_t size = DTypeSize(dtype);
  if (count > std::numeric_limits<std::uint64_t>::max() / size) return std::nullopt;
  return count * size;
}

// nlohmann's parse errors quote the bytes last read, which may be invalid UTF-8; escape every byte that is
// not printable ASCII as \xNN so that messages are always printable text.
std::string PrintableAscii(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7F) {
      out += c;
    } else {
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 0xF];
    }
  }
  return out;
}

template <typename T>
T LoadLittleEndian(const std::uint8_t* p) {
  T value;
  std::memcpy(&value, p, sizeof value);  // no typed load: tensor data has no alignment guarantee
  return value;
}

// Rejects a key that appears twice in one JSON object. nlohmann keeps the last of duplicate keys silently,
// which would let two header entries describe one tensor name; we want the file rejected instead.
class DuplicateKeyCheck {
 public:
  explicit DuplicateKeyCheck(const std::string& path) : path_(path) {}

  bool operator()(int /*depth*/, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
        levels_.emplace_back();
        break;
      case Json::parse_event_t::object_end:
        levels_.pop_back();
        break;
      case Json::parse_event_t::key: {
        const std::string& key = parsed.get_ref<const std::string&>();
        Level& level = levels_.back();
        if (!level.seen.insert(key).second) {
          const std::string where = levels_.size() == 1
                                        ? std::string("the top-level object")
                                        : "the value of '" + levels_[levels_.size() - 2].key + "'";
          throw MakeError("safetensors file '", path_, "': header has the key '", key, "' twice in ", where);
        }
        level.key = key;
        break;
      }
      default:
        break;
    }
    return true;
  }

 private:
  struct Level {
    std::set<std::string> seen;
    std::string key;  // the most recent key at this level (names the object nested under it)
  };
  const std::string& path_;
  std::vector<Level> levels_;
};

}  // namespace

std::int64_t TensorInfo::NumElements() const {
  std::int64_t product = 1;
  for (const std::int64_t dim : shape) product *= dim;  // validated by the reader not to overflow
  return product;
}

// ------------------------------------------------------------------------------------------------------
// Reader

SafetensorsFile SafetensorsFile::Open(const std::string& path) {
  SafetensorsFile file;
  file.path_ = path;
  file.mapped_ = MappedFile::Open(path);
  file.all_ = file.mapped_.bytes();
  file.Parse();
  return file;
}

SafetensorsFile SafetensorsFile::FromBytes(std::vector<std::uint8_t> bytes, std::string name) {
  SafetensorsFile file;
  file.path_ = std::move(name);
  file.owned_ = std::move(bytes);
  file.all_ = file.owned_;
  file.Parse();
  return file;
}

void SafetensorsFile::Parse() {
  // Every error names the file first: "safetensors file '<path>': ...".
  const auto fail = [this](const auto&... parts) {
    return MakeError("safetensors file '", path_, "': ", parts...);
  };

  // 1. The 8-byte little-endian header length N.
  if (all_.size() < 8) {
    throw fail("file is ", all_.size(), " bytes, too short for the 8-byte header length field");
  }
  std::uint64_t header_length = 0;
  for (int i = 7; i >= 0; --i) header_length = (header_length << 8) | all_[static_cast<std::size_t>(i)];
  if (header_length > kMaxHeaderBytes) {
    throw fail("header length ", header_length, " (file bytes 0..7) exceeds the limit of ", kMaxHeaderBytes,
               " bytes");
  }
  if (header_length > all_.size() - 8) {
    throw fail("header length ", header_length, " (file bytes 0..7) runs past the end of the file: only ",
               all_.size() - 8, " bytes follow the length field");
  }
  const auto header_size = static_cast<std::size_t>(header_length);
  data_section_offset_ = 8 + header_size;
  data_ = all_.subspan(data_section_offset_);

  // 2. The JSON header: a UTF-8 JSON object (nlohmann validates the UTF-8 of every string).
  const char* header_begin = reinterpret_cast<const char*>(all_.data()) + 8;
  Json header;
  try {
    header = Json::parse(header_begin, header_begin + header_size, DuplicateKeyCheck(path_));
  } catch (const Json::parse_error& e) {
    // nlohmann's e.byte counts the bytes read, so the offending byte is at index e.byte - 1 (the header
    // length itself when the input ended too early).
    const std::size_t at = e.byte == 0 ? 0 : static_cast<std::size_t>(e.byte - 1);
    throw fail("header (", header_size, " bytes at file offset 8) is not valid UTF-8 JSON: at byte ", at,
               " of the header (file offset ", 8 + at, "): ", PrintableAscii(e.what()));
  } catch (const Json::out_of_range& e) {
    // A number beyond double's range (e.g. 1e400): nlohmann's out_of_range.406, which gives no offset.
    throw fail("header (", header_size,
               " bytes at file offset 8) is not valid JSON: ", PrintableAscii(e.what()));
  }
  if (!header.is_object()) {
    throw fail("header is a JSON ", header.type_name(), ", not an object");
  }

  // 3. The entries: "__metadata__" (string -> string) and one object per tensor.
  for (const auto& item : header.items()) {
    const std::string& key = item.key();
    const Json& entry = item.value();
    if (key == kMetadataKey) {
      if (!entry.is_object()) throw fail("'__metadata__' is a JSON ", entry.type_name(), ", not an object");
      for (const auto& meta : entry.items()) {
        const std::string& meta_key = meta.key();
        const Json& meta_value = meta.value();
        if (!meta_value.is_string()) {
          throw fail("'__metadata__' value of '", meta_key, "' is a JSON ", meta_value.type_name(), " (",
                     Excerpt(meta_value), "), not a string");
        }
        metadata_.emplace(meta_key, meta_value.get<std::string>());
      }
      continue;
    }

    TensorInfo info;
    info.name = key;
    const auto fail_tensor = [&](const auto&... parts) { return fail("tensor '", key, "': ", parts...); };
    if (!entry.is_object())
      throw fail_tensor("header entry is a JSON ", entry.type_name(), " (", Excerpt(entry),
                        "), not an object");
    for (const auto& field_item : entry.items()) {
      const std::string& field = field_item.key();
      if (field != "dtype" && field != "shape" && field != "data_offsets") {
        throw fail_tensor("unknown field '", field,
                          "' (a tensor entry has exactly dtype, shape, data_offsets)");
      }
    }
    for (const char* field : {"dtype", "shape", "data_offsets"}) {
      if (!entry.contains(field)) throw fail_tensor("missing field '", field, "'");
    }

    // dtype
    const Json& dtype = entry.at("dtype");
    if (!dtype.is_string()) {
      throw fail_tensor("field 'dtype' is a JSON ", dtype.type_name(), " (", Excerpt(dtype),
                        "), not a string");
    }
    const std::optional<DType> parsed_dtype = ParseSafetensorsDType(dtype.get_ref<const std::string&>());
    if (!parsed_dtype) {
      throw fail_tensor("unsupported dtype ", Excerpt(dtype), " in field 'dtype' (plumb reads ",
                        SupportedDTypeNames(), ")");
    }
    info.dtype = *parsed_dtype;

    // shape: an array of non-negative integers
    const Json& shape = entry.at("shape");
    if (!shape.is_array()) {
      throw fail_tensor("field 'shape' is a JSON ", shape.type_name(), " (", Excerpt(shape),
                        "), not an array");
    }
    for (std::size_t i = 0; i < shape.size(); ++i) {
      const Json& dim = shape[i];
      if (!dim.is_number_integer()) {
        throw fail_tensor("field 'shape' element ", i, " is ", Excerpt(dim), ", not an integer");
      }
      if (dim.is_number_unsigned()) {
        const auto value = dim.get<std::uint64_t>();
        if (value > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
          throw fail_tensor("field 'shape' element ", i, " is ", value, ", too large for a dimension");
        }
        info.shape.push_back(static_cast<std::int64_t>(value));
      } else {
        const auto value = dim.get<std::int64_t>();
        if (value < 0)
          throw fail_tensor("field 'shape' element ", i, " is ", value, ", a negative dimension");
        info.shape.push_back(value);
      }
    }

    // data_offsets: [begin, end] with begin <= end <= size of the data section
    const Json& offsets = entry.at("data_offsets");
    if (!offsets.is_array() || offsets.size() != 2) {
      throw fail_tensor("field 'data_offsets' is ", Excerpt(offsets), ", not an array [begin, end]");
    }
    std::uint64_t bounds[2] = {0, 0};
    for (std::size_t i = 0; i < 2; ++i) {
      if (!offsets[i].is_number_unsigned()) {  // nlohmann parses non-negative integers as unsigned
        throw fail_tensor("field 'data_offsets' element ", i, " is ", Excerpt(offsets[i]),
                          ", not a non-negative integer");
      }
      bounds[i] = offsets[i].get<std::uint64_t>();
    }
    if (bounds[0] > bounds[1]) {
      throw fail_tensor("field 'data_offsets' [", bounds[0], ", ", bounds[1], "] has begin > end");
    }
    if (bounds[1] > data_.size()) {
      throw fail_tensor("field 'data_offsets' end ", bounds[1], " is beyond the data section, which has ",
                        data_.size(), " bytes starting at file offset ", data_section_offset_);
    }
    info.data_begin = static_cast<std::size_t>(bounds[0]);
    info.data_end = static_cast<std::size_t>(bounds[1]);

    // size: (end - begin) == numel * dtype size, computed without overflow
    const std::optional<std::int64_t> numel = CheckedNumElements(info.shape);
    if (!numel) {
      throw fail_tensor("field 'shape' ", ShapeString(info.shape), " has more than 2^63 - 1 elements");
    }
    const std::optional<std::uint64_t> num_bytes = CheckedNumBytes(*numel, info.dtype);
    if (!num_bytes) {
      throw fail_tensor("field 'shape' ", ShapeString(info.shape), " of dtype ", DTypeName(info.dtype),
                        " needs more than 2^64 - 1 bytes");
    }
    if (info.NumBytes() != *num_bytes) {
      throw fail_tensor("field 'data_offsets' [", info.data_begin, ", ", info.data_end, "] spans ",
                        info.NumBytes(), " bytes, but shape ", ShapeString(info.shape), " of dtype ",
                        DTypeName(info.dtype), " needs ", *num_bytes, " bytes");
    }
    tensors_.push_back(std::move(info));
  }

  // 4. No two tensors share a byte. Gaps between tensors are allowed (docs/formats.md says why). Empty
  // tensors occupy no bytes and so cannot overlap anything.
  std::sort(tensors_.begin(), tensors_.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return std::tie(a.data_begin, a.data_end, a.name) < std::tie(b.data_begin, b.data_end, b.name);
  });
  const TensorInfo* furthest = nullptr;  // among the non-empty tensors so far, the one ending last
  for (const TensorInfo& info : tensors_) {
    if (info.data_begin == info.data_end) continue;
    if (furthest != nullptr && info.data_begin < furthest->data_end) {
      throw fail("tensors '", furthest->name, "' (data_offsets [", furthest->data_begin, ", ",
                 furthest->data_end, "]) and '", info.name, "' (data_offsets [", info.data_begin, ", ",
                 info.data_end, "]) overlap");
    }
    if (furthest == nullptr || info.data_end > furthest->data_end) furthest = &info;
  }
  for (std::size_t i = 0; i < tensors_.size(); ++i) index_.emplace(tensors_[i].name, i);
}

bool SafetensorsFile::Contains(std::string_view name) const {
  return index_.find(name) != index_.end();
}

const TensorInfo& SafetensorsFile::Info(std::string_view name) const {
  const auto it = index_.find(name);
  if (it == index_.end()) {
    throw MakeError("safetensors file '", path_, "': no tensor named '", name, "' (the file has ",
                    tensors_.size(), " tensors)");
  }
  return tensors_[it->second];
}

std::span<const std::uint8_t> SafetensorsFile::Bytes(std::string_view name) const {
  const TensorInfo& info = Info(name);
  return data_.subspan(info.data_begin, info.NumBytes());
}

namespace {

// Converts every element of a float tensor (F64, F32, F16, BF16) to Out (float or double).
template <typename Out>
std::vector<Out> ConvertFloats(const TensorInfo& info, std::span<const std::uint8_t> bytes) {
  const auto count = static_cast<std::size_t>(info.NumElements());
  std::vector<Out> out(count);
  const std::uint8_t* p = bytes.data();
  switch (info.dtype) {
    case DType::F64:  // to float: the hardware conversion, round to nearest even; out of range gives +-inf
      for (std::size_t i = 0; i < count; ++i) out[i] = static_cast<Out>(LoadLittleEndian<double>(p + 8 * i));
      break;
    case DType::F32:
      for (std::size_t i = 0; i < count; ++i) out[i] = LoadLittleEndian<float>(p + 4 * i);
      break;
    case DType::F16:
      for (std::size_t i = 0; i < count; ++i) out[i] = F16ToF32(LoadLittleEndian<std::uint16_t>(p + 2 * i));
      break;
    case DType::BF16:
      for (std::size_t i = 0; i < count; ++i) out[i] = BF16ToF32(LoadLittleEndian<std::uint16_t>(p + 2 * i));
      break;
    default:
      break;  // callers check IsFloatDType first
  }
  return out;
}

}  // namespace

std::vector<float> SafetensorsFile::ReadF32(std::string_view name,
                                            std::span<const std::int64_t> expected_shape) const {
  const TensorInfo& info = Info(name);
  if (!IsFloatDType(info.dtype)) {
    throw MakeError("safetensors file '", path_, "': tensor '", name, "' has dtype ", DTypeName(info.dtype),
                    "; reading it as float32 needs F32, F16, BF16 or F64");
  }
  if (!expected_shape.empty() && !std::ranges::equal(expected_shape, info.shape)) {
    throw MakeError("safetensors file '", path_, "': tensor '", name, "' has shape ", ShapeString(info.shape),
                    ", expected ", ShapeString(expected_shape));
  }
  return ConvertFloats<float>(info, Bytes(name));
}

std::vector<double> SafetensorsFile::ReadF64(std::string_view name) const {
  const TensorInfo& info = Info(name);
  if (!IsFloatDType(info.dtype)) {
    throw MakeError("safetensors file '", path_, "': tensor '", name, "' has dtype ", DTypeName(info.dtype),
                    "; reading it as float64 needs F64, F32, F16 or BF16");
  }
  return ConvertFloats<double>(info, Bytes(name));
}

std::vector<std::int32_t> SafetensorsFile::ReadI32(std::string_view name) const {
  const TensorInfo& info = Info(name);
  if (info.dtype != DType::I32 && info.dtype != DType::I64) {
    throw MakeError("safetensors file '", path_, "': tensor '", name, "' has dtype ", DTypeName(info.dtype),
                    "; reading it as int32 needs I32 or I64");
  }
  const auto count = static_cast<std::size_t>(info.NumElements());
  const std::uint8_t* p = Bytes(name).data();
  std::vector<std::int32_t> out(count);
  for (std::size_t i = 0; i < count; ++i) {
    if (info.dtype == DType::I32) {
      out[i] = LoadLittleEndian<std::int32_t>(p + 4 * i);
      continue;
    }
    const auto value = LoadLittleEndian<std::int64_t>(p + 8 * i);
    if (value < std::numeric_limits<std::int32_t>::min() ||
        value > std::numeric_limits<std::int32_t>::max()) {
      throw MakeError("safetensors file '", path_, "': tensor '", name, "' (I64) element ", i, " is ", value,
                      ", outside the int32 range");
    }
    out[i] = static_cast<std::int32_t>(value);
  }
  return out;
}

// ------------------------------------------------------------------------------------------------------
// Writer

std::vector<std::uint8_t> SerializeSafetensors(std::vector<TensorToWrite> tensors,
                                               const std::map<std::string, std::string>& metadata) {
  std::sort(tensors.begin(), tensors.end(),
            [](const TensorToWrite& a, const TensorToWrite& b) { return a.name < b.name; });

  Json header = Json::object();  // std::map underneath: dump() writes the keys sorted
  if (!metadata.empty()) header[std::string(kMetadataKey)] = metadata;
  std::uint64_t offset = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const TensorToWrite& t = tensors[i];
    const auto fail = [&](const auto&... parts) {
      return MakeError("safetensors writer: tensor '", t.name, "': ", parts...);
    };
    if (t.name == kMetadataKey) throw fail("the name '__metadata__' is reserved for the metadata map");
    if (i > 0 && tensors[i - 1].name == t.name) throw fail("two tensors have this name");
    for (const std::int64_t dim : t.shape) {
      if (dim < 0) throw fail("shape ", ShapeString(t.shape), " has a negative dimension");
    }
    const std::optional<std::int64_t> numel = CheckedNumElements(t.shape);
    const std::optional<std::uint64_t> num_bytes =
        numel ? CheckedNumBytes(*numel, t.dtype) : std::optional<std::uint64_t>();
    if (!num_bytes) throw fail("shape ", ShapeString(t.shape), " is too large");
    if (t.bytes.size() != *num_bytes) {
      throw fail("has ", t.bytes.size(), " bytes, but shape ", ShapeString(t.shape), " of dtype ",
                 DTypeName(t.dtype), " needs ", *num_bytes);
    }
    header[t.name] = {{"dtype", std::string(DTypeName(t.dtype))},
                      {"shape", t.shape},
                      {"data_offsets", Json::array({offset, offset + *num_bytes})}};
    offset += *num_bytes;
  }

  std::string text;
  try {
    text = header.dump();
  } catch (const Json::exception& e) {  // e.g. a name or metadata string that is not valid UTF-8
    throw MakeError(
        "safetensors writer: cannot write the JSON header (tensor names and metadata must be valid UTF-8): ",
        e.what());
  }
  while ((8 + text.size()) % 8 != 0) text.push_back(' ');  // data section starts 8-byte aligned

  std::vector<std::uint8_t> out;
  out.reserve(8 + text.size() + static_cast<std::size_t>(offset));
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::uint8_t>(text.size() >> (8 * i)));
  out.insert(out.end(), text.begin(), text.end());
  for (const TensorToWrite& t : tensors) out.insert(out.end(), t.bytes.begin(), t.bytes.end());
  return out;
}

void WriteSafetensors(const std::string& path, std::vector<TensorToWrite> tensors,
                      const std::map<std::string, std::string>& metadata) {
  std::vector<std::uint8_t> bytes;
  try {
    bytes = SerializeSafetensors(std::move(tensors), metadata);
  } catch (const Error& e) {
    throw MakeError("writing '", path, "': ", e.what());
  }
  WriteFileBytes(path, bytes);
}

}  // namespace plumb
