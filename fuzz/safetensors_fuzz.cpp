// Feeds the input to SafetensorsFile::FromBytes as a whole safetensors file, then, for a file that parses,
// reads every tensor it lists: its info and raw bytes (first and last byte), and, for tensors of up to 2^16
// elements, the typed readers ReadF32, ReadF64 and ReadI32 (each throws plumb::Error for a dtype it does not
// convert). A plumb::Error is the expected answer to a malformed file; a finding is anything else: a crash,
// a sanitizer report, another exception, a hang or an allocation past libFuzzer's limit.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "plumb/core/error.h"
#include "plumb/formats/safetensors.h"

using plumb::fuzz::Expect;
using plumb::fuzz::sink;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace plumb;
  std::optional<SafetensorsFile> file;
  try {
    file.emplace(
        SafetensorsFile::FromBytes(std::vector<std::uint8_t>(data, data + size), "fuzz.safetensors"));
  } catch (const Error&) {
    return 0;
  }
  for (const auto& [key, value] : file->metadata())
    sink = static_cast<std::uint8_t>(key.size() + value.size());
  for (const TensorInfo& t : file->tensors()) {
    if (!file->Contains(t.name) || file->Info(t.name).name != t.name) __builtin_trap();
    const std::span<const std::uint8_t> bytes = file->Bytes(t.name);
    if (!bytes.empty()) sink = static_cast<std::uint8_t>(bytes.front() ^ bytes.back());
    if (t.NumElements() > (1 << 16)) continue;
    Expect([&] { (void)file->ReadF32(t.name, t.shape); });
    Expect([&] { (void)file->ReadF64(t.name); });
    Expect([&] { (void)file->ReadI32(t.name); });
  }
  return 0;
}
