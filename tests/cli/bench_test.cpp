// plumb bench on the tiny fixture model: the table's shape, that every figure parses and is positive, that
// the byte counts are the model's (computed here independently), that the derived columns follow from the
// measured ones, and one clear error line for each kind of bad input. No assertion on any speed.
#include <gtest/gtest.h>

#include <cstdint>

#include <algorithm>
#include <array>
#include <cmath>
#include <sstream>

#include "plumb/cli/commands.h"
#include "plumb/model/model.h"
#include "support/golden.h"
#include "support/process.h"

namespace plumb {
namespace {

using testing::ProcessResult;
using testing::RunPlumb;

const std::string kModel = testing::FixtureDir("tiny-llama");

std::string Trim(const std::string& text) {
  const std::size_t begin = text.find_first_not_of(' ');
  const std::size_t end = text.find_last_not_of(' ');
  return begin == std::string::npos ? "" : text.substr(begin, end - begin + 1);
}

// The cells of a markdown table row "| a | b |".
std::vector<std::string> Cells(const std::string& line) {
  std::vector<std::string> cells;
  std::size_t at = 1;
  for (std::size_t bar = line.find('|', at); bar != std::string::npos; bar = line.find('|', at)) {
    cells.push_back(Trim(line.substr(at, bar - at)));
    at = bar + 1;
  }
  return cells;
}

double Number(const std::string& cell) {
  std::size_t used = 0;
  const double value = std::stod(cell, &used);
  EXPECT_EQ(used, cell.size()) << "not a plain number: '" << cell << "'";
  return value;
}

// "12.34 ± 0.56" → {12.34, 0.56}.
std::pair<double, double> MeanAndStd(const std::string& cell) {
  const std::size_t pm = cell.find(" ± ");
  EXPECT_NE(pm, std::string::npos) << "no ± in '" << cell << "'";
  if (pm == std::string::npos) return {0, 0};
  return {Number(cell.substr(0, pm)), Number(cell.substr(pm + 4))};  // "±" is two bytes in UTF-8
}

TEST(Bench, PrintsOneRowPerThreadCountWithTheModelsByteCounts) {
  constexpr int kPrompt = 16, kGen = 8;
  const std::vector<std::string> args = {
      "bench", "--model",       kModel, "--threads",   "1,2", "--prompt-tokens", "16", "--gen-tokens",
      "8",     "--repetitions", "2",    "--probe-mib", "8"};
  std::ostringstream out, err;
  ASSERT_EQ(cli::RunMain(args, out, err), 0) << err.str();

  std::vector<std::vector<std::string>> table;
  std::istringstream lines(out.str());
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && line[0] == '|') table.push_back(Cells(line));
  }
  ASSERT_EQ(table.size(), 4u) << out.str();  // header, separator, one row per thread count
  const std::vector<std::string> header = {"threads",          "prefill pp16 tok/s",
                                           "decode tg8 tok/s", "weight B/token",
                                           "KV B/token",       "decode GB/s",
                                           "host read GB/s",   "MBU %",
                                           "ceiling tok/s",    "TTFT ms",
                                           "peak RSS MB"};
  EXPECT_EQ(table[0], header);
  EXPECT_EQ(table[1].size(), header.size());

  // The bytes a decode step reads, from the model and the cache geometry: attention at step s (cache
  // length kPrompt + s) reads the keys and values of kPrompt + s + 1 positions.
  const Model model = Model::Load(kModel);
  const ModelConfig& c = model.config();
  double kv_bytes = 0;
  for (int s = 0; s < kGen; ++s) {
    // f16: the KV cache of the fast kernel family, bench's default.
    kv_bytes += 2.0 * c.num_layers * c.num_kv_heads * (kPrompt + s + 1) * c.head_dim * sizeof(std::uint16_t);
  }
  kv_bytes /= kGen;
  const double weight_bytes = static_cast<double>(model.weights().BytesReadPerDecodeStep());

  for (int row = 0; row < 2; ++row) {
    const std::vector<std::string>& cells = table[2 + row];
    ASSERT_EQ(cells.size(), header.size()) << out.str();
    SCOPED_TRACE(out.str());
    EXPECT_EQ(cells[0], std::to_string(row + 1));
    const auto [prefill, prefill_std] = MeanAndStd(cells[1]);
    const auto [decode, decode_std] = MeanAndStd(cells[2]);
    EXPECT_GT(prefill, 0);
    EXPECT_GT(decode, 0);
    EXPECT_GE(prefill_std, 0);
    EXPECT_GE(decode_std, 0);
    EXPECT_EQ(Number(cells[3]), weight_bytes);
    EXPECT_EQ(Number(cells[4]), std::round(kv_bytes));
    const double gbs = Number(cells[5]), host = Number(cells[6]), mbu = Number(cells[7]),
                 ceiling = Number(cells[8]);
    for (double v : {gbs, host, mbu, ceiling}) EXPECT_TRUE(std::isfinite(v) && v > 0) << v;
    // The derived columns, from the printed (rounded) figures: within the rounding of the print.
    EXPECT_NEAR(gbs, (weight_bytes + kv_bytes) * decode / 1e9, 1e-3 + 1e-3 * gbs);
    EXPECT_NEAR(mbu, 100 * gbs / host, 0.06 + 1e-2 * mbu);
    EXPECT_NEAR(ceiling, host * 1e9 / (weight_bytes + kv_bytes), 0.06 + 1e-2 * ceiling);
    // TTFT holds the prefill (kPrompt tokens at the printed mean rate: the mean of the times is at least
    // kPrompt over the mean of the rates), and once the runs have touched every weight the peak resident set
    // holds at least the bytes a decode step reads.
    const auto [ttft_ms, ttft_std] = MeanAndStd(cells[9]);
    EXPECT_GE(ttft_ms, 0.99 * 1e3 * kPrompt / prefill - 0.01);
    EXPECT_GE(ttft_std, 0);
    EXPECT_GE(Number(cells[10]) * 1e6, 0.99 * weight_bytes);
  }
}

TEST(Bench, RunsUpToTheLastPositionOfTheContext) {
  // P + G = 128, the tiny model's whole context: the last decode step runs at position 127.
  std::ostringstream out, err;
  const std::vector<std::string> args = {
      "bench", "--model",       kModel, "--threads",   "1", "--prompt-tokens", "100", "--gen-tokens",
      "28",    "--repetitions", "1",    "--probe-mib", "8"};
  ASSERT_EQ(cli::RunMain(args, out, err), 0) << err.str();
  EXPECT_NE(out.str().find("| 1 | "), std::string::npos) << out.str();
}

// "0.998 (0.984 – 1.018)" → {0.998, 0.984, 1.018}.
std::array<double, 3> MedianAndRange(const std::string& cell) {
  const std::size_t open = cell.find(" ("), dash = cell.find(" – "), close = cell.rfind(')');
  EXPECT_TRUE(open != std::string::npos && dash != std::string::npos && close == cell.size() - 1) << cell;
  if (open == std::string::npos || dash == std::string::npos) return {0, 0, 0};
  return {Number(cell.substr(0, open)), Number(cell.substr(open + 2, dash - open - 2)),
          Number(cell.substr(dash + 5, close - dash - 5))};  // "–" is three bytes in UTF-8
}

// The KV cache's dtype follows the kernel family unless --kv-dtype names one: f16 with fast (the default),
// f32 with exact.
TEST(Bench, TheKvDtypeFollowsTheKernelFamily) {
  for (const auto& [extra, expected] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{}, "kernels: fast"},
           {{}, "| KV f16 |"},
           {{"--kernels", "exact"}, "| KV f32 |"},
           {{"--kernels", "exact", "--kv-dtype", "bf16"}, "| KV bf16 |"}}) {
    std::vector<std::string> args = {"bench", "--model",      kModel, "--threads",     "1", "--prompt-tokens",
                                     "4",     "--gen-tokens", "2",    "--repetitions", "1", "--probe-mib",
                                     "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    std::ostringstream out, err;
    ASSERT_EQ(cli::RunMain(args, out, err), 0) << err.str();
    EXPECT_NE(out.str().find(expected), std::string::npos) << expected << "\n" << out.str();
  }
}

// plumb bench --batch: one row per (context, batch) with its KV bytes, then paged against contiguous for
// each context, the paged cache both in a fresh pool and in a shuffled one, each ratio a median within its
// range. No assertion on any speed.
TEST(Bench, BatchTablesHaveEveryRowAndTheLayoutRatios) {
  const std::vector<std::string> args = {"bench", "--model",      kModel, "--batch",
                                         "1,3",   "--context",    "8,20", "--decode-steps",
                                         "2",     "--block-size", "4"};
  std::ostringstream out, err;
  ASSERT_EQ(cli::RunMain(args, out, err), 0) << err.str();
  std::vector<std::vector<std::string>> rows;
  std::istringstream lines(out.str());
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && line[0] == '|' && line.find("---") == std::string::npos) rows.push_back(Cells(line));
  }
  SCOPED_TRACE(out.str());
  ASSERT_EQ(rows.size(), 1u + 4u + 1u + 2u);  // header, 2 contexts × 2 batches, header, 2 contexts
  const Model model = Model::Load(kModel);
  const ModelConfig& c = model.config();
  // f16: the KV cache of the fast kernel family, bench's default.
  const double kv_per_token = 2.0 * c.num_layers * c.num_kv_heads * c.head_dim * sizeof(std::uint16_t);
  // The untimed steps before the timed ones each add a position, as the header says.
  const std::size_t after = out.str().find(" timed steps per row after ");
  ASSERT_NE(after, std::string::npos);
  const int warmup = std::stoi(out.str().substr(after + 27));
  EXPECT_GE(warmup, 1);
  int row = 1;
  for (int context : {8, 20}) {
    for (int batch : {1, 3}) {
      const std::vector<std::string>& cells = rows[row++];
      ASSERT_EQ(cells.size(), 8u);
      EXPECT_EQ(cells[0], std::to_string(context));
      EXPECT_EQ(cells[1], std::to_string(batch));
      EXPECT_EQ(cells[2], "f16");
      EXPECT_GT(Number(cells[3]), 0);
      EXPECT_EQ(Number(cells[6]), kv_per_token * batch * (context + warmup + 2 / 2.0));  // mid-run KV read
    }
  }
  const std::vector<std::string> layout_header = {"context",
                                                  "contiguous decode tok/s",
                                                  "paged, blocks in order",
                                                  "paged, blocks shuffled",
                                                  "paged / contiguous, in order",
                                                  "shuffled"};
  EXPECT_EQ(rows[row++], layout_header);
  for (int context : {8, 20}) {
    const std::vector<std::string>& cells = rows[row++];
    ASSERT_EQ(cells.size(), layout_header.size());
    EXPECT_EQ(cells[0], std::to_string(context));
    for (int i = 1; i <= 3; ++i) EXPECT_GT(Number(cells[i]), 0);
    for (int i = 4; i <= 5; ++i) {
      const auto [median, low, high] = MedianAndRange(cells[i]);
      EXPECT_GT(low, 0);
      EXPECT_LE(low, median);
      EXPECT_LE(median, high);
    }
  }
}

TEST(Bench, HelpListsEveryFlagAndTheCommandIsListed) {
  std::ostringstream out, err;
  const std::vector<std::string> args = {"bench", "--help"};
  EXPECT_EQ(cli::RunMain(args, out, err), 0);
  for (const char* flag :
       {"--model", "--threads", "--prompt-tokens", "--gen-tokens", "--repetitions", "--probe-mib"}) {
    EXPECT_NE(out.str().find(flag), std::string::npos) << flag;
  }
  const ProcessResult top = RunPlumb("--help");
  EXPECT_EQ(top.exit_code, 0);
  EXPECT_NE(top.output.find("bench"), std::string::npos) << top.output;
}

TEST(Bench, EveryBadInputIsOneClearLineAndExitCodeOne) {
  const std::string ok = "bench --model " + kModel;  // each case fails before any run
  const std::vector<std::pair<std::string, std::string>> cases = {
      {ok + " --threads 0", "--threads: every thread count must be in [1, 4096], got 0"},
      {ok + " --threads 1,5000", "--threads: every thread count must be in [1, 4096], got 5000"},
      {ok + " --threads -1", "--threads item 0: -1 must be at least 0"},
      {ok + " --threads 1,,2", "--threads item 1: '' is not an integer"},
      {ok + " --prompt-tokens 0", "--prompt-tokens: 0 is outside [1, "},
      {ok + " --gen-tokens 0", "--gen-tokens: 0 is outside [1, "},
      {ok + " --repetitions 0", "--repetitions: 0 is outside [1, 1000]"},
      {ok + " --probe-mib 0", "--probe-mib: 0 is outside [1, 65536]"},
      // The tiny model's context is 128 positions.
      {ok + " --prompt-tokens 100 --gen-tokens 29",
       "--prompt-tokens 100 + --gen-tokens 29 = 129 exceeds the model's context length of 128 tokens"},
      {"bench --threads 1", "missing required flag --model"},
      {"bench --model /nonexistent/model", "/nonexistent/model: model path does not exist"},
  };
  for (const auto& [args, message] : cases) {
    const ProcessResult r = RunPlumb(args);
    EXPECT_EQ(r.exit_code, 1) << args << "\n" << r.output;
    EXPECT_NE(r.output.find("plumb: error: " + message), std::string::npos) << args << "\n" << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << args << "\n" << r.output;
  }
}

}  // namespace
}  // namespace plumb
