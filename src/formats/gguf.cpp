// GGUF reader: the container (header, metadata, tensor infos, data section). The layout, every check made
// here and the choices taken are specified in docs/formats.md, section "GGUF container". The typed metadata
// getters are in gguf_metadata.cpp.
#include "plumb/formats/gguf.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "plumb/core/error.h"

namespace plumb {

// Every multi-byte field is little-endian; plumb loads them with memcpy into host integers.
static_assert(std::endian::native == std::endian::little, "plumb assumes a little-endian host");

namespace {

constexpr char kMagic[4] = {'G', 'G', 'U', 'F'};
constexpr std::uint32_t kMinVersion = 2;
constexpr std::uint32_t kMaxVersion = 3;
constexpr std::uint64_t kDefaultAlignment = 32;
constexpr std::string_view kAlignmentKey = "general.alignment";
constexpr std::uint32_t kMaxDims = 4;  // ggml's GGML_MAX_DIMS
// Arrays of arrays nest through recursion, and a 12-byte array header per level would let a small file
// nest deep enough to exhaust the stack (here, or later in GgufValue's destructor). Real files nest at
// most once; llama.cpp does not accept nesting at all.
constexpr int kMaxArrayDepth = 64;

// The smallest encoding of one tensor info: name length 8, n_dims 4, one dim 8, type 4, offset 8.
constexpr std::uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;
// The smallest encoding of one key/value: key length 8, value type 4, a 1-byte value.
constexpr std::uint64_t kMinKvBytes = 8 + 4 + 1;

bool IsKnownValueType(std::uint32_t type) {
  return type <= static_cast<std::uint32_t>(GgufValueType::FLOAT64);
}

// Bytes that one value of `type` occupies at least: exact for scalars, the length field for a string,
// element type + count for an array. Bounds an array count by the bytes left before anything is allocated.
std::uint64_t MinValueBytes(GgufValueType type) {
  switch (type) {
    case GgufValueType::UINT8:
    case GgufValueType::INT8:
    case GgufValueType::BOOL:
      return 1;
    case GgufValueType::UINT16:
    case GgufValueType::INT16:
      return 2;
    case GgufValueType::UINT32:
    case GgufValueType::INT32:
    case GgufValueType::FLOAT32:
      return 4;
    case GgufValueType::UINT64:
    case GgufValueType::INT64:
    case GgufValueType::FLOAT64:
    case GgufValueType::STRING:
      return 8;
    case GgufValueType::ARRAY:
      return 12;
  }
  return 1;
}

// Names and keys come from the file and are not validated as UTF-8: quote them with every byte that is not
// printable ASCII escaped as \xNN, cut short if long, so that a message is always one printable line.
std::string Quoted(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  constexpr std::size_t kMaxShown = 96;
  std::string out = "'";
  for (std::size_t i = 0; i < text.size() && i < kMaxShown; ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte >= 0x20 && byte < 0x7F && byte != '\\') {
      out += static_cast<char>(byte);
    } else {
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 0xF];
    }
  }
  out += '\'';
  if (text.size() > kMaxShown) out += "... (" + std::to_string(text.size()) + " bytes)";
  return out;
}

std::string DimsString(const std::vector<std::uint64_t>& dims) {
  std::string out = "{";
  for (std::size_t i = 0; i < dims.size(); ++i) out += (i == 0 ? "" : ", ") + std::to_string(dims[i]);
  return out + "}";
}

}  // namespace

// Parses the bytes of a GGUF file into a GgufFile. Friend of GgufFile (gguf.h). Reads advance pos_; each
// read first checks that the bytes are there, and each error names the field, its file offset, and the
// problem. Field descriptions are lambdas so that the common path formats no strings.
class GgufParser {
 public:
  GgufParser(GgufFile& file, std::span<const std::uint8_t> bytes) : file_(file), bytes_(bytes) {}

  void Parse() {
    ParseHeader();
    ParseMetadata();
    ParseAlignment();
    ParseTensorInfos();
    PlaceTensorData();
  }

 private:
  // ----------------------------------------------------------------------------------------------------
  // Errors and primitive reads

  template <typename... Parts>
  [[noreturn]] void Fail(const std::string& field, std::uint64_t offset, const Parts&... parts) const {
    throw MakeError(file_.path_, ": ", field, " at offset ", offset, ": ", parts...);
  }

  std::uint64_t Remaining() const { return bytes_.size() - pos_; }

  template <typename Describe>
  void Need(std::uint64_t n, const Describe& describe) const {
    if (n > Remaining()) {
      Fail(describe(), pos_, "needs ", n, " bytes, but the file ends at offset ", bytes_.size(), " (",
           Remaining(), " bytes left)");
    }
  }

  template <typename T, typename Describe>
  T Read(const Describe& describe) {
    Need(sizeof(T), describe);
    T value;
    std::memcpy(&value, bytes_.data() + pos_, sizeof value);
    pos_ += sizeof value;
    return value;
  }

  // A gguf string: uint64 length, then that many bytes (no terminator, not checked as UTF-8).
  template <typename Describe>
  std::string_view ReadString(const Describe& describe) {
    const auto length = Read<std::uint64_t>([&] { return describe() + " length"; });
    if (length > Remaining()) {
      Fail(describe() + " length", pos_ - 8, "string length ", length, " runs past the end of the file (",
           Remaining(), " bytes left after the length field)");
    }
    const std::string_view text(reinterpret_cast<const char*>(bytes_.data() + pos_),
                                static_cast<std::size_t>(length));
    pos_ += length;
    return text;
  }

  // ----------------------------------------------------------------------------------------------------
  // Header: magic, version, tensor_count, kv_count

  void ParseHeader() {
    const std::uint64_t magic_at = pos_;
    Need(4, [] { return std::string("magic"); });
    if (std::memcmp(bytes_.data(), kMagic, 4) != 0) {
      std::string shown(reinterpret_cast<const char*>(bytes_.data()), 4);
      Fail("magic", magic_at, "expected \"GGUF\", found ", Quoted(shown), " (not a GGUF file)");
    }
    pos_ = 4;

    const std::uint64_t version_at = pos_;
    const auto version = Read<std::uint32_t>([] { return std::string("version"); });
    // A big-endian file's small version number reads with its low 16 bits zero (3 reads as 0x03000000).
    if (version != 0 && (version & 0xFFFF) == 0) {
      const std::uint32_t swapped =
          (version >> 24) | ((version >> 8) & 0xFF00) | ((version << 8) & 0xFF0000) | (version << 24);
      Fail("version", version_at, "reads as ", version, " (", swapped,
           " byte-swapped): the file is big-endian; plumb reads only little-endian GGUF files");
    }
    if (version == 1) {
      Fail("version", version_at,
           "GGUF version 1 (32-bit counts and lengths) is not supported; versions 2 and 3 are");
    }
    if (version < kMinVersion || version > kMaxVersion) {
      Fail("version", version_at, "unsupported GGUF version ", version, "; versions 2 and 3 are supported");
    }
    file_.version_ = version;

    tensor_count_at_ = pos_;
    tensor_count_ = Read<std::uint64_t>([] { return std::string("tensor_count"); });
    kv_count_at_ = pos_;
    kv_count_ = Read<std::uint64_t>([] { return std::string("kv_count"); });

    // Bound both counts by the bytes left before anything is sized by them.
    if (kv_count_ > Remaining() / kMinKvBytes) {
      Fail("kv_count", kv_count_at_, kv_count_, " entries cannot fit in the ", Remaining(),
           " bytes after the header (each needs at least ", kMinKvBytes, ")");
    }
    if (tensor_count_ > Remaining() / kMinTensorInfoBytes) {
      Fail("tensor_count", tensor_count_at_, tensor_count_, " tensor infos cannot fit in the ", Remaining(),
           " bytes after the header (each needs at least ", kMinTensorInfoBytes, ")");
    }
  }

  // ----------------------------------------------------------------------------------------------------
  // Metadata

  // Where a value being read sits, for messages: the entry, its key, and the element index at each level
  // of array nesting (filled in as the arrays are walked; formatted only on error).
  struct ValueContext {
    std::uint64_t entry = 0;
    std::string_view key;
    std::uint64_t path[kMaxArrayDepth + 1] = {};
    int depth = 0;
  };

  std::string Describe(const ValueContext& where, const char* what) const {
    std::string out = "metadata key " + Quoted(where.key) + " (entry " + std::to_string(where.entry) + ")";
    out += " value";
    for (int i = 0; i < where.depth; ++i) out += "[" + std::to_string(where.path[i]) + "]";
    if (what[0] != '\0') out += std::string(" ") + what;
    return out;
  }

  void ParseMetadata() {
    file_.metadata_.reserve(static_cast<std::size_t>(kv_count_));
    for (std::uint64_t i = 0; i < kv_count_; ++i) {
      const std::uint64_t key_at = pos_;
      const std::string_view key = ReadString([&] { return "metadata entry " + std::to_string(i) + " key"; });
      ValueContext where;
      where.entry = i;
      where.key = key;
      if (key.empty()) {
        Fail("metadata entry " + std::to_string(i) + " key", key_at, "the key is empty");
      }
      const auto [slot, inserted] = file_.metadata_index_.emplace(std::string(key), file_.metadata_.size());
      if (!inserted) {
        Fail("metadata key " + Quoted(key) + " (entry " + std::to_string(i) + ")", key_at,
             "duplicate key: entry ", slot->second, " has the same key");
      }

      const std::uint64_t type_at = pos_;
      const auto type_id = Read<std::uint32_t>([&] { return Describe(where, "type"); });
      if (!IsKnownValueType(type_id)) {
        Fail(Describe(where, "type"), type_at, "unknown value type ", type_id, " (known types are 0..12)");
      }
      GgufValue value;
      value_at_.push_back(pos_);
      ReadValue(static_cast<GgufValueType>(type_id), value, where);
      file_.metadata_.emplace_back(std::string(key), std::move(value));
    }
  }

  template <typename T>
  T ReadScalar(const ValueContext& where) {
    return Read<T>([&] { return Describe(where, ""); });
  }

  void ReadValue(GgufValueType type, GgufValue& out, ValueContext& where) {
    out.type = type;
    switch (type) {
      case GgufValueType::UINT8:
        out.integer = ReadScalar<std::uint8_t>(where);
        return;
      case GgufValueType::INT8:
        out.integer = ReadScalar<std::int8_t>(where);
        return;
      case GgufValueType::UINT16:
        out.integer = ReadScalar<std::uint16_t>(where);
        return;
      case GgufValueType::INT16:
        out.integer = ReadScalar<std::int16_t>(where);
        return;
      case GgufValueType::UINT32:
        out.integer = ReadScalar<std::uint32_t>(where);
        return;
      case GgufValueType::INT32:
        out.integer = ReadScalar<std::int32_t>(where);
        return;
      case GgufValueType::UINT64:
        out.integer = static_cast<std::int64_t>(ReadScalar<std::uint64_t>(where));  // bit pattern kept
        return;
      case GgufValueType::INT64:
        out.integer = ReadScalar<std::int64_t>(where);
        return;
      case GgufValueType::FLOAT32:
        out.number = ReadScalar<float>(where);
        return;
      case GgufValueType::FLOAT64:
        out.number = ReadScalar<double>(where);
        return;
      case GgufValueType::BOOL: {
        const std::uint64_t at = pos_;
        const auto byte = ReadScalar<std::uint8_t>(where);
        if (byte > 1) Fail(Describe(where, ""), at, "bool byte is ", int{byte}, ", neither 0 nor 1");
        out.boolean = byte == 1;
        return;
      }
      case GgufValueType::STRING:
        out.string = ReadString([&] { return Describe(where, "string"); });
        return;
      case GgufValueType::ARRAY:
        ReadArray(out, where);
        return;
    }
  }

  void ReadArray(GgufValue& out, ValueContext& where) {
    const std::uint64_t type_at = pos_;
    const auto element_id = Read<std::uint32_t>([&] { return Describe(where, "array element type"); });
    if (!IsKnownValueType(element_id)) {
      Fail(Describe(where, "array element type"), type_at, "unknown value type ", element_id,
           " (known types are 0..12)");
    }
    const auto element_type = static_cast<GgufValueType>(element_id);
    if (element_type == GgufValueType::ARRAY && where.depth + 1 >= kMaxArrayDepth) {
      Fail(Describe(where, "array element type"), type_at, "arrays nested more than ", kMaxArrayDepth,
           " deep");
    }
    const std::uint64_t count_at = pos_;
    const auto count = Read<std::uint64_t>([&] { return Describe(where, "array count"); });
    const std::uint64_t min_bytes = MinValueBytes(element_type);
    if (count > Remaining() / min_bytes) {
      Fail(Describe(where, "array count"), count_at, count, " elements of type ",
           GgufValueTypeName(element_type), " (at least ", min_bytes, " bytes each) cannot fit in the ",
           Remaining(), " bytes left in the file");
    }
    out.element_type = element_type;
    out.elements.resize(static_cast<std::size_t>(count));
    const int level = where.depth++;
    for (std::uint64_t i = 0; i < count; ++i) {
      where.path[level] = i;
      ReadValue(element_type, out.elements[static_cast<std::size_t>(i)], where);
    }
    where.depth = level;
  }

  // general.alignment: UINT32 (as llama.cpp and gguf-py require), a non-zero power of two.
  void ParseAlignment() {
    const auto found = file_.metadata_index_.find(kAlignmentKey);
    if (found == file_.metadata_index_.end()) {
      file_.alignment_ = kDefaultAlignment;
      return;
    }
    const std::size_t entry = found->second;
    const GgufValue& value = file_.metadata_[entry].second;
    const std::string field =
        "metadata key '" + std::string(kAlignmentKey) + "' (entry " + std::to_string(entry) + ") value";
    if (value.type != GgufValueType::UINT32) {
      Fail(field, value_at_[entry], "has type ", GgufValueTypeName(value.type), ", expected uint32");
    }
    const auto alignment = static_cast<std::uint64_t>(value.integer);
    if (!std::has_single_bit(alignment)) {
      Fail(field, value_at_[entry], "alignment ", alignment, " is not a power of two");
    }
    file_.alignment_ = alignment;
  }

  // ----------------------------------------------------------------------------------------------------
  // Tensor infos

  std::string TensorField(std::uint64_t i, const std::string& name, const std::string& what) const {
    return "tensor " + std::to_string(i) + " (" + Quoted(name) + ") " + what;
  }

  void ParseTensorInfos() {
    if (tensor_count_ > Remaining() / kMinTensorInfoBytes) {
      Fail("tensor_count", tensor_count_at_, tensor_count_, " tensor infos cannot fit in the ", Remaining(),
           " bytes after the metadata (each needs at least ", kMinTensorInfoBytes, ")");
    }
    file_.tensors_.reserve(static_cast<std::size_t>(tensor_count_));
    offset_at_.reserve(static_cast<std::size_t>(tensor_count_));
    for (std::uint64_t i = 0; i < tensor_count_; ++i) {
      const std::uint64_t name_at = pos_;
      GgufTensorInfo info;
      info.name = ReadString([&] { return "tensor " + std::to_string(i) + " name"; });
      const auto [slot, inserted] = file_.tensor_index_.emplace(info.name, file_.tensors_.size());
      if (!inserted) {
        Fail(TensorField(i, info.name, "name"), name_at, "duplicate tensor name: tensor ", slot->second,
             " has the same name");
      }

      const std::uint64_t n_dims_at = pos_;
      const auto n_dims = Read<std::uint32_t>([&] { return TensorField(i, info.name, "n_dims"); });
      if (n_dims == 0 || n_dims > kMaxDims) {
        Fail(TensorField(i, info.name, "n_dims"), n_dims_at, "n_dims is ", n_dims, ", must be 1 to ",
             kMaxDims, " (ggml's GGML_MAX_DIMS)");
      }
      ReadDims(i, info, n_dims);

      const std::uint64_t type_at = pos_;
      const auto type_id = Read<std::uint32_t>([&] { return TensorField(i, info.name, "type"); });
      const std::optional<GgmlTypeTraits> traits = FindGgmlType(type_id);
      if (!traits) Fail(TensorField(i, info.name, "type"), type_at, "unknown ggml type id ", type_id);
      info.type = static_cast<GgmlType>(type_id);
      // A block never spans two rows (ggml checks the same), so the row length, not only the total count,
      // must be a whole number of blocks.
      const auto block = static_cast<std::uint64_t>(traits->block_elements);
      if (info.dims[0] % block != 0) {
        Fail(TensorField(i, info.name, "dims[0]"), dims_at_, "row length ", info.dims[0],
             " is not a multiple of the ", traits->name, " block size ", block, " (dims ",
             DimsString(info.dims), ")");
      }
      const std::uint64_t n_blocks = info.n_elements / block;
      const auto block_bytes = static_cast<std::uint64_t>(traits->block_bytes);
      if (n_blocks > std::numeric_limits<std::uint64_t>::max() / block_bytes) {
        Fail(TensorField(i, info.name, "type"), type_at, "dims ", DimsString(info.dims), " of type ",
             traits->name, " take more than 2^64 bytes");
      }
      info.n_bytes = n_blocks * block_bytes;

      offset_at_.push_back(pos_);
      info.offset = Read<std::uint64_t>([&] { return TensorField(i, info.name, "offset"); });
      file_.tensors_.push_back(std::move(info));
    }
  }

  // dims[0..n_dims): each >= 1, product <= INT64_MAX (ggml holds counts in int64_t).
  void ReadDims(std::uint64_t i, GgufTensorInfo& info, std::uint32_t n_dims) {
    dims_at_ = pos_;
    info.dims.resize(n_dims);
    std::uint64_t product = 1;
    for (std::uint32_t d = 0; d < n_dims; ++d) {
      const std::uint64_t dim_at = pos_;
      const auto dim_field = [&] { return TensorField(i, info.name, "dims[" + std::to_string(d) + "]"); };
      const auto dim = Read<std::uint64_t>(dim_field);
      if (dim == 0) Fail(dim_field(), dim_at, "dimension is 0 (empty tensors are not accepted)");
      constexpr auto kMaxElements = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
      if (dim > kMaxElements / product) {
        Fail(dim_field(), dim_at, "dimension ", dim, " makes the element count exceed 2^63 - 1 (product of ",
             "the dims so far: ", product, ")");
      }
      product *= dim;
      info.dims[d] = dim;
    }
    info.n_elements = product;
  }

  // ----------------------------------------------------------------------------------------------------
  // Data section

  void PlaceTensorData() {
    const std::uint64_t alignment = file_.alignment_;
    const std::uint64_t infos_end = pos_;
    const std::uint64_t padding = (alignment - infos_end % alignment) % alignment;
    if (padding > Remaining()) {
      Fail("data section", infos_end, "padding to the alignment ", alignment, " needs ", padding,
           " bytes, but the file ends at offset ", bytes_.size());
    }
    const std::uint64_t data_offset = infos_end + padding;
    file_.data_offset_ = data_offset;
    const std::uint64_t data_size = bytes_.size() - data_offset;

    for (std::size_t i = 0; i < file_.tensors_.size(); ++i) {
      GgufTensorInfo& info = file_.tensors_[i];
      const std::string field = "offset";
      if (info.offset % alignment != 0) {
        Fail(TensorField(i, info.name, field), offset_at_[i], "data offset ", info.offset,
             " is not a multiple of the alignment ", alignment);
      }
      if (info.offset > data_size || info.n_bytes > data_size - info.offset) {
        Fail(TensorField(i, info.name, field), offset_at_[i], "data [", info.offset, ", ", info.offset, " + ",
             info.n_bytes, ") runs past the end of the data section (", data_size, " bytes from file offset ",
             data_offset, ")");
      }
      info.file_offset = data_offset + info.offset;
      info.data = bytes_.data() + info.file_offset;
    }
    RejectOverlaps();
  }

  // No two tensors may share a byte. Every tensor has at least one byte (no zero dims), so sorted by offset
  // each must start at or after the end of the one before it.
  void RejectOverlaps() const {
    const std::vector<GgufTensorInfo>& tensors = file_.tensors_;
    std::vector<std::size_t> order(tensors.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return tensors[a].offset != tensors[b].offset ? tensors[a].offset < tensors[b].offset : a < b;
    });
    for (std::size_t k = 1; k < order.size(); ++k) {
      const GgufTensorInfo& before = tensors[order[k - 1]];
      const GgufTensorInfo& after = tensors[order[k]];
      if (after.offset < before.offset + before.n_bytes) {
        Fail(TensorField(order[k], after.name, "offset"), offset_at_[order[k]], "data [", after.offset, ", ",
             after.offset + after.n_bytes, ") overlaps the data of tensor ", order[k - 1], " (",
             Quoted(before.name), ") at [", before.offset, ", ", before.offset + before.n_bytes, ")");
      }
    }
  }

  GgufFile& file_;
  std::span<const std::uint8_t> bytes_;
  std::uint64_t pos_ = 0;
  std::uint64_t tensor_count_ = 0;
  std::uint64_t tensor_count_at_ = 0;
  std::uint64_t kv_count_ = 0;
  std::uint64_t kv_count_at_ = 0;
  std::uint64_t dims_at_ = 0;             // offset of dims[0] of the tensor being read
  std::vector<std::uint64_t> value_at_;   // per metadata entry: file offset of its value
  std::vector<std::uint64_t> offset_at_;  // per tensor: file offset of its offset field
};

GgufFile GgufFile::Open(const std::string& path) {
  GgufFile file;
  file.path_ = path;
  file.mapping_ = MappedFile::Open(path);
  GgufParser(file, file.mapping_.bytes()).Parse();
  return file;
}

GgufFile GgufFile::FromBytes(std::span<const std::uint8_t> bytes, const std::string& name) {
  GgufFile file;
  file.path_ = name;
  file.owned_.assign(bytes.begin(), bytes.end());
  GgufParser(file, file.owned_).Parse();
  return file;
}

const GgufValue* GgufFile::FindValue(std::string_view key) const {
  const auto found = metadata_index_.find(key);
  return found == metadata_index_.end() ? nullptr : &metadata_[found->second].second;
}

const GgufTensorInfo* GgufFile::FindTensor(std::string_view name) const {
  const auto found = tensor_index_.find(name);
  return found == tensor_index_.end() ? nullptr : &tensors_[found->second];
}

}  // namespace plumb
