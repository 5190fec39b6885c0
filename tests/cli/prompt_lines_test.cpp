// The prompts-file reader of plumb generate --prompts-file / --prompt-ids-file (cli/prompt_lines.h), which
// fuzz/prompts_fuzz.cpp also runs: which lines are prompts, their numbers, and the id-line errors.
#include "plumb/cli/prompt_lines.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "plumb/core/error.h"
#include "support/errors.h"

namespace plumb {
namespace {

using Lines = std::vector<std::pair<int, std::string>>;

Lines Read(const std::string& text) {
  std::istringstream in(text);
  return cli::ReadPromptLines(in, "p.txt");
}

TEST(PromptLines, KeepsNonBlankLinesWithTheirNumbersAndDropsOneTrailingCarriageReturn) {
  EXPECT_EQ(Read("a\n\n \t\nb c\r\n\r\nd\r\r"), (Lines{{1, "a"}, {4, "b c"}, {6, "d\r"}}));
  EXPECT_EQ(Read("last line without newline"), (Lines{{1, "last line without newline"}}));
  EXPECT_EQ(Read(std::string("x\0y\n", 4)), (Lines{{1, std::string("x\0y", 3)}}));
}

TEST(PromptLines, NoPromptIsAnErrorNamingTheFile) {
  for (const std::string text : {"", "\n", " \t\r\n\r\n", "\r"})
    testing::ExpectMessageHas(testing::ErrorOf([&] { Read(text); }), {"p.txt: no prompts"});
}

TEST(PromptLines, IdLinesAreCommaSeparatedIdsWithSpacesAllowed) {
  EXPECT_EQ(cli::ParseIdLine("p.txt", 3, " 1,2 ,\t3 "), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(cli::ParseIdLine("p.txt", 3, "2147483647"), (std::vector<int>{2147483647}));
  for (const std::string line : {"1,,2", "1,", "-1", "2147483648", "1 2", "0x10", "a"})
    testing::ExpectMessageHas(testing::ErrorOf([&] { cli::ParseIdLine("p.txt", 3, line); }),
                              {"p.txt line 3 token id"});
  // Above INT_MAX, the range is named (the message said "must be at least 0" before).
  testing::ExpectMessageHas(testing::ErrorOf([&] { cli::ParseIdLine("p.txt", 3, "2147483648"); }),
                            {"2147483648 is outside [0, 2147483647]"});
}

}  // namespace
}  // namespace plumb
