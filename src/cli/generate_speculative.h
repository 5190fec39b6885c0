// plumb generate --draft M|ngram --draft-tokens K: one prompt with speculative decoding
// (engine/speculative.h).
#pragma once

#include <ostream>
#include <span>

#include "plumb/cli/flags.h"
#include "plumb/engine/generator.h"
#include "plumb/engine/text_model.h"

namespace plumb::cli {

// The flags generate adds for speculation.
void AddDraftFlags(Flags& flags);

// Generates `prompt` (token ids; streamed as text when print_text) with the drafter --draft names, then,
// unless --no-baseline, the same with the target alone, and prints to `err` the acceptance rate, tokens per
// target step, both decode rates and the measured speedup (and, when greedy, whether the two outputs agree).
int RunGenerateSpeculative(const Flags& flags, TextModel& target, const GenerationOptions& options, int ctx,
                           std::span<const int> prompt, bool print_text, std::ostream& out,
                           std::ostream& err);

}  // namespace plumb::cli
