// plumb pack on the real default model (SmolLM2-135M-Instruct Q4_1, scripts/fetch-model): packed as f32,
// every matrix holds exactly the Q4_1 values dequantized, so decoding token by token (GEMV: one RowDot per
// row, defined as the Dot of the dequantized row) gives bitwise the GGUF's logits, and the tokenizer written
// from the GGUF metadata encodes a chat prompt to the same ids. Labelled real-model (CMakeLists.txt).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "plumb/cli/commands.h"
#include "plumb/engine/text_model.h"

namespace plumb {
namespace {

namespace fs = std::filesystem;

const std::string kSmolLmPath = std::string(PLUMB_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";

TEST(PackSmolLm2, F32PackDecodesBitwiseLikeTheGguf) {
  ASSERT_TRUE(fs::exists(kSmolLmPath)) << kSmolLmPath << " is missing: scripts/test fetches it first";
  const fs::path dir = fs::temp_directory_path() / ("plumb-pack-smollm2-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  std::ostringstream out, err;
  const std::vector<std::string> args = {"pack", "--model", kSmolLmPath, "--dtype",
                                         "f32",  "--out",   dir.string()};
  ASSERT_EQ(cli::RunMain(args, out, err), 0) << err.str();

  TextModel gguf = TextModel::Load(kSmolLmPath);
  TextModel packed = TextModel::Load(dir.string());
  fs::remove_all(dir);  // the mapping stays valid after the unlink
  ASSERT_TRUE(packed.tokenizer);
  const std::string prompt =
      "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n";
  const std::vector<int> ids = gguf.tokenizer->Encode(prompt, true, true);
  EXPECT_EQ(packed.tokenizer->Encode(prompt, true, true), ids);
  EXPECT_EQ(packed.StopIds(), gguf.StopIds());

  // The prompt one token at a time, then 8 greedy tokens: every step's logits bit for bit.
  ContiguousKvCache a = gguf.model.NewKvCache(64), b = packed.model.NewKvCache(64);
  int token = ids.front();
  for (std::size_t step = 0; step < ids.size() + 8; ++step) {
    const std::span<const float> expected = gguf.model.Decode(token, a);
    const std::span<const float> actual = packed.model.Decode(token, b);
    ASSERT_EQ(actual.size(), expected.size());
    ASSERT_EQ(std::memcmp(actual.data(), expected.data(), actual.size() * sizeof(float)), 0)
        << "step " << step;
    token = step + 1 < ids.size()
                ? ids[step + 1]
                : static_cast<int>(std::max_element(expected.begin(), expected.end()) - expected.begin());
  }
}

}  // namespace
}  // namespace plumb
