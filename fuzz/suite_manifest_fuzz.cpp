// Feeds the input to the fixture suite's manifest reader (fixtures/suite_reader.h): parsed as JSON (text
// that is not JSON stops there, as Suite::Open turns that into a plumb::Error), then Suite::FromManifest,
// then, for a suite that reads, each case's checks through Compare with a one-element tensor. A plumb::Error
// is the expected answer to a malformed manifest; a finding is anything else: a crash, a sanitizer report,
// another exception (an nlohmann type_error escaping the reader included) or a hang.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "plumb/core/error.h"
#include "plumb/fixtures/suite_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace plumb::fixtures;
  nlohmann::json manifest;
  try {
    manifest = nlohmann::json::parse(data, data + size);
  } catch (const nlohmann::json::exception&) {  // Suite::Open turns these into a plumb::Error
    return 0;
  }
  try {
    const Suite suite = Suite::FromManifest(manifest, "fuzz-suite", "fuzz-suite/manifest.json");
    const Tensor one = Tensor::From<float>("F32", {1}, std::vector<float>{1.5f});
    for (const Case& c : suite.cases())
      for (const Output& o : c.outputs) {
        (void)Compare(o.check, one, one);
        for (const auto& [name, check] : o.allow) (void)Compare(check, one, one);
      }
  } catch (const plumb::Error&) {
  }
  return 0;
}
