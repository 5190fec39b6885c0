// Feeds the input to the fixture suite's tensor-file reader, TensorFile::Parse (fixtures/suite_reader.h: the
// safetensors files of a case, read whole), then, for a file that parses, reads every tensor: the first and
// last element through AsDouble, and for tensors of up to 1024 elements every element and a Compare of the
// tensor with itself under each metric. A plumb::Error is the expected answer to a malformed file (or to
// AsDouble of a dtype without numbers); a finding is anything else: a crash, a sanitizer report, another
// exception (an nlohmann type_error escaping the reader included), a hang or an allocation past the limit.
#include <cstddef>
#include <cstdint>
#include <span>

#include "plumb/core/error.h"
#include "plumb/fixtures/suite_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace plumb::fixtures;
  try {
    const TensorFile file = TensorFile::Parse(std::span<const std::uint8_t>(data, size), "fuzz.safetensors");
    for (const auto& [name, t] : file.tensors()) {
      if (&file.Get(name) != &t) __builtin_trap();
      const std::int64_t n = t.Elements();
      if (n == 0) continue;
      try {
        (void)t.AsDouble(0);
        (void)t.AsDouble(n - 1);
      } catch (const plumb::Error&) {
        continue;
      }
      if (n > 1024) continue;  // (bounded: the fixtures' are larger, but each run must stay fast)
      for (std::int64_t i = 0; i < n; ++i) (void)t.AsDouble(i);
      for (const char* metric : {"exact", "nmse", "allclose", "max_abs_rel"}) {
        Check check;
        check.metric = metric;
        (void)Compare(check, t, t);
      }
    }
  } catch (const plumb::Error&) {
  }
  return 0;
}
