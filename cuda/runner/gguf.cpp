// See gguf.h.
#include "gguf.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

#include "plumb/core/error.h"

namespace plumb::cuda {
namespace {

// A GGML type's name and block: `elements` per block of `bytes` (1 and the element size for the plain
// types). Only the sizes are needed here, to bounds-check every tensor of a file.
struct TypeInfo {
  std::uint32_t id;
  const char* name;
  std::uint64_t elements, bytes;
};
constexpr TypeInfo kTypes[] = {
    {0, "F32", 1, 4},       {1, "F16", 1, 2},       {2, "Q4_0", 32, 18},    {3, "Q4_1", 32, 20},
    {6, "Q5_0", 32, 22},    {7, "Q5_1", 32, 24},    {8, "Q8_0", 32, 34},    {9, "Q8_1", 32, 36},
    {10, "Q2_K", 256, 84},  {11, "Q3_K", 256, 110}, {12, "Q4_K", 256, 144}, {13, "Q5_K", 256, 176},
    {14, "Q6_K", 256, 210}, {15, "Q8_K", 256, 292}, {24, "I8", 1, 1},       {25, "I16", 1, 2},
    {26, "I32", 1, 4},      {27, "I64", 1, 8},      {28, "F64", 1, 8},      {30, "BF16", 1, 2},
};

const TypeInfo* FindType(std::uint32_t id) {
  for (const TypeInfo& t : kTypes)
    if (t.id == id) return &t;
  return nullptr;
}

// Reads the file front to back; every read first checks that the bytes are there, and names the offset
// where it failed.
class Cursor {
 public:
  Cursor(std::span<const std::uint8_t> file, const std::string& name) : file_(file), name_(name) {}

  std::uint64_t pos() const { return pos_; }
  std::uint64_t left() const { return file_.size() - pos_; }

  template <class... Args>
  [[noreturn]] void Fail(Args&&... args) const {
    throw MakeError(name_, ": GGUF offset ", pos_, ": ", std::forward<Args>(args)...);
  }

  const std::uint8_t* Take(std::uint64_t n, const char* what) {
    if (n > left()) Fail(what, " needs ", n, " bytes, ", left(), " left in the file");
    const std::uint8_t* p = file_.data() + pos_;
    pos_ += n;
    return p;
  }
  template <class T>
  T Read(const char* what) {
    T v;
    std::memcpy(&v, Take(sizeof(T), what), sizeof(T));  // little-endian hosts only (x86, aarch64)
    return v;
  }
  std::string String(const char* what) {
    const auto n = Read<std::uint64_t>(what);
    const std::uint8_t* p = Take(n, what);  // checks n against what is left before anything is allocated
    return std::string(reinterpret_cast<const char*>(p), static_cast<std::size_t>(n));
  }
  void SkipTo(std::uint64_t pos, const char* what) {
    if (pos < pos_ || pos > file_.size()) Fail(what, " at ", pos, " is outside the file");
    pos_ = pos;
  }

 private:
  std::span<const std::uint8_t> file_;
  const std::string& name_;
  std::uint64_t pos_ = 0;
};

// The fixed size of a scalar value type (0 for string and array).
std::uint64_t ScalarBytes(std::uint32_t type) {
  switch (type) {
    case 0:
    case 1:
    case 7:
      return 1;
    case 2:
    case 3:
      return 2;
    case 4:
    case 5:
    case 6:
      return 4;
    case 10:
    case 11:
    case 12:
      return 8;
    default:
      return 0;
  }
}

GgufValue ReadScalar(Cursor& in, std::uint32_t type) {
  GgufValue v;
  v.type = type;
  switch (type) {
    case 0:
      v.u = in.Read<std::uint8_t>("a u8 value");
      break;
    case 1:
      v.i = in.Read<std::int8_t>("an i8 value");
      break;
    case 2:
      v.u = in.Read<std::uint16_t>("a u16 value");
      break;
    case 3:
      v.i = in.Read<std::int16_t>("an i16 value");
      break;
    case 4:
      v.u = in.Read<std::uint32_t>("a u32 value");
      break;
    case 5:
      v.i = in.Read<std::int32_t>("an i32 value");
      break;
    case 6:
      v.f = in.Read<float>("an f32 value");
      break;
    case 7: {
      const auto b = in.Read<std::uint8_t>("a bool value");
      if (b > 1) in.Fail("bool value ", int{b}, " is neither 0 nor 1");
      v.u = b;
      break;
    }
    case 8:
      v.s = in.String("a string value");
      break;
    case 10:
      v.u = in.Read<std::uint64_t>("a u64 value");
      break;
    case 11:
      v.i = in.Read<std::int64_t>("an i64 value");
      break;
    case 12:
      v.f = in.Read<double>("an f64 value");
      break;
    default:
      in.Fail("unknown metadata value type ", type);
  }
  return v;
}

// An array is skipped: its elements are checked to lie inside the file (strings one by one), not kept.
GgufValue ReadArray(Cursor& in) {
  GgufValue v;
  v.type = 9;
  v.array_type = in.Read<std::uint32_t>("an array's element type");
  v.array_count = in.Read<std::uint64_t>("an array's length");
  if (v.array_type == 8) {
    for (std::uint64_t e = 0; e < v.array_count; ++e) {
      const auto n = in.Read<std::uint64_t>("an array's string");  // fails at the file's end, so the loop
      in.Take(n, "an array's string");                             // stops there whatever the count says
    }
  } else {
    const std::uint64_t size = ScalarBytes(v.array_type);
    if (size == 0) in.Fail("array element type ", v.array_type, " (nested arrays are not read)");
    if (v.array_count > in.left() / size)
      in.Fail("array of ", v.array_count, " elements of ", size, " bytes runs past the end of the file");
    in.Take(v.array_count * size, "an array");
  }
  return v;
}

}  // namespace

std::string GgmlTypeName(std::uint32_t type) {
  const TypeInfo* t = FindType(type);
  return t ? t->name : "type " + std::to_string(type);
}

bool IsDecodable(std::uint32_t type) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::kF32:
    case GgmlType::kF16:
    case GgmlType::kBf16:
    case GgmlType::kQ4_0:
    case GgmlType::kQ4_1:
    case GgmlType::kQ8_0:
      return true;
  }
  return false;
}

std::uint64_t GgmlRowBytes(std::uint32_t type, std::uint64_t columns) {
  const TypeInfo* t = FindType(type);
  if (t == nullptr) throw MakeError("GGML type ", type, " is not one this reader knows");
  return columns / t->elements * t->bytes;
}

std::uint64_t GgufTensor::Rows() const {
  std::uint64_t rows = 1;
  for (std::size_t i = 1; i < dims.size(); ++i) rows *= dims[i];  // Parse checked that it does not overflow
  return rows;
}

GgufFile GgufFile::Parse(std::span<const std::uint8_t> file, const std::string& name) {
  GgufFile g;
  g.file_ = file;
  g.name_ = name;
  Cursor in(file, g.name_);
  const std::uint8_t* magic = in.Take(4, "the magic \"GGUF\"");
  if (std::memcmp(magic, "GGUF", 4) != 0) in.Fail("not a GGUF file (the first 4 bytes are not \"GGUF\")");
  g.version_ = in.Read<std::uint32_t>("the version");
  if (g.version_ != 2 && g.version_ != 3)
    in.Fail("GGUF version ", g.version_, " (this reader reads 2 and 3)");
  const auto tensor_count = in.Read<std::uint64_t>("the tensor count");
  const auto kv_count = in.Read<std::uint64_t>("the metadata count");

  for (std::uint64_t i = 0; i < kv_count; ++i) {  // each entry takes at least 12 bytes: no runaway count
    std::string key = in.String("a metadata key");
    const auto type = in.Read<std::uint32_t>("a metadata value type");
    GgufValue value = type == 9 ? ReadArray(in) : ReadScalar(in, type);
    if (!g.metadata_.emplace(key, std::move(value)).second) in.Fail("metadata key \"", key, "\" repeats");
  }

  std::uint64_t alignment = 32;
  if (g.Has("general.alignment")) {
    alignment = g.Uint("general.alignment");
    if (alignment == 0 || (alignment & (alignment - 1)) != 0)
      in.Fail("general.alignment ", alignment, " is not a power of two");
  }

  for (std::uint64_t i = 0; i < tensor_count; ++i) {
    GgufTensor t;
    t.name = in.String("a tensor name");
    const auto n_dims = in.Read<std::uint32_t>("a tensor's dimension count");
    if (n_dims == 0 || n_dims > 4) in.Fail("tensor \"", t.name, "\" has ", n_dims, " dimensions (1 to 4)");
    std::uint64_t elements = 1;
    for (std::uint32_t d = 0; d < n_dims; ++d) {
      const auto dim = in.Read<std::uint64_t>("a tensor dimension");
      if (dim == 0 || elements > std::numeric_limits<std::uint64_t>::max() / 2 / dim)
        in.Fail("tensor \"", t.name, "\" dimension ", d, " = ", dim, " is 0 or overflows the element count");
      elements *= dim;
      t.dims.push_back(dim);
    }
    t.type = in.Read<std::uint32_t>("a tensor's type");
    const TypeInfo* type = FindType(t.type);
    if (type == nullptr)
      in.Fail("tensor \"", t.name, "\" has GGML type ", t.type, ", unknown to this reader");
    if (t.dims[0] % type->elements != 0)
      in.Fail("tensor \"", t.name, "\": ", type->name, " rows of ", t.dims[0], " elements are not whole ",
              type->elements, "-element blocks");
    t.bytes = elements / type->elements * type->bytes;  // elements < 2^63, bytes per element <= 9
    t.offset = in.Read<std::uint64_t>("a tensor's offset");
    if (t.offset % alignment != 0)
      in.Fail("tensor \"", t.name, "\" offset ", t.offset, " is not a multiple of the alignment ", alignment);
    for (const GgufTensor& earlier : g.tensors_)
      if (earlier.name == t.name) in.Fail("tensor name \"", t.name, "\" repeats");
    g.tensors_.push_back(std::move(t));
  }

  // The data section starts at the next multiple of the alignment; every tensor must lie inside the file.
  const std::uint64_t data = (in.pos() + alignment - 1) / alignment * alignment;
  in.SkipTo(std::min<std::uint64_t>(data, file.size()), "the data section");
  if (data > file.size()) in.Fail("the data section would start at ", data, ", past the end of the file");
  for (GgufTensor& t : g.tensors_) {
    if (t.offset > file.size() - data || t.bytes > file.size() - data - t.offset)
      throw MakeError(name, ": tensor \"", t.name, "\" (", GgmlTypeName(t.type), ", ", t.bytes,
                      " bytes at data offset ", t.offset, ") runs past the end of the ", file.size(),
                      "-byte file");
    t.offset += data;
  }
  return g;
}

std::uint64_t GgufFile::Uint(const std::string& key) const {
  const auto it = metadata_.find(key);
  if (it == metadata_.end()) throw MakeError(name_, ": GGUF metadata \"", key, "\" is missing");
  const GgufValue& v = it->second;
  switch (v.type) {
    case 0:
    case 2:
    case 4:
    case 10:
      return v.u;
    case 1:
    case 3:
    case 5:
    case 11:
      if (v.i >= 0) return static_cast<std::uint64_t>(v.i);
      throw MakeError(name_, ": GGUF metadata \"", key, "\" = ", v.i, " is negative");
    default:
      throw MakeError(name_, ": GGUF metadata \"", key, "\" is not an integer (value type ", v.type, ")");
  }
}

double GgufFile::Float(const std::string& key) const {
  const auto it = metadata_.find(key);
  if (it == metadata_.end()) throw MakeError(name_, ": GGUF metadata \"", key, "\" is missing");
  if (it->second.type != 6 && it->second.type != 12)
    throw MakeError(name_, ": GGUF metadata \"", key, "\" is not a float (value type ", it->second.type, ")");
  return it->second.f;
}

std::string GgufFile::String(const std::string& key) const {
  const auto it = metadata_.find(key);
  if (it == metadata_.end()) throw MakeError(name_, ": GGUF metadata \"", key, "\" is missing");
  if (it->second.type != 8)
    throw MakeError(name_, ": GGUF metadata \"", key, "\" is not a string (value type ", it->second.type,
                    ")");
  return it->second.s;
}

const GgufTensor* GgufFile::Find(const std::string& tensor) const {
  for (const GgufTensor& t : tensors_)
    if (t.name == tensor) return &t;
  return nullptr;
}

}  // namespace plumb::cuda
