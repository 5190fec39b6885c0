// plumb generate --prompts-file F / --prompt-ids-file F: many prompts decoded together (engine/scheduler.h).
#pragma once

#include <ostream>

#include "plumb/cli/flags.h"
#include "plumb/engine/generator.h"
#include "plumb/engine/text_model.h"

namespace plumb::cli {

// Reads the prompts (one per non-empty line: text, or comma-separated ids), runs them through one scheduler
// and prints each result in the prompts' order to `out`; statistics and KV-cache accounting go to `err`.
int RunGenerateBatch(const Flags& flags, TextModel& loaded, const GenerationOptions& options, int ctx,
                     std::ostream& out, std::ostream& err);

}  // namespace plumb::cli
