// The plumb subcommands. Each takes its arguments (after the command name) and the streams to write to,
// returns the process exit code, and throws plumb::Error for bad input (main() prints it as one line).
#pragma once

#include <iostream>
#include <span>
#include <string>

namespace plumb::cli {

// plumb generate --model PATH --prompt-ids 1,2,3 [--max-tokens N --temp T --top-k K --top-p P --min-p M
//                --seed S --threads N --ctx N --ignore-eos]
// Generated ids go to `out` (space-separated, streamed), timing to `err`.
int RunGenerate(std::span<const std::string> args, std::ostream& out, std::ostream& err);

// plumb chat --model PATH [--system TEXT --chat-template NAME --max-tokens N, sampling, --threads, --ctx]
// Reads one message per line from `in`, streams each reply to `out`, timing to `err`.
int RunChat(std::span<const std::string> args, std::istream& in, std::ostream& out, std::ostream& err);

// plumb perplexity --model PATH --file TEXT [--ctx N --threads N]
int RunPerplexity(std::span<const std::string> args, std::ostream& out, std::ostream& err);

// plumb pack --model IN --dtype D --out DIR [--fp8-scale channel|tensor --keep-embedding --threads N --force]
// Writes DIR/model.safetensors, config.json and the tokenizer (docs/formats.md "Packed checkpoints");
// progress on `err` when it is a terminal, a summary line on `err` and `out`.
int RunPack(std::span<const std::string> args, std::ostream& out, std::ostream& err);

// plumb bench --model PATH [--threads N,.. --prompt-tokens P --gen-tokens G --repetitions R --probe-mib M]
// The markdown table goes to `out`, progress to `err`.
int RunBench(std::span<const std::string> args, std::ostream& out, std::ostream& err);

// plumb estimate --model-card NAME|config.json --hardware NAME [--dtype --kv-dtype --batch --context --tp
//                --json]: roofline lower bounds for any model on any machine (docs/roofline.md).
int RunEstimate(std::span<const std::string> args, std::ostream& out, std::ostream& err);

// plumb roofline --model PATH [--dtype D --batch 1,4,16 --context 128,1024,4096 --json --svg FILE]: the
// host's ceilings measured, the model's costs computed, and the real decode and prefill held against them.
int RunRoofline(std::span<const std::string> args, std::ostream& out, std::ostream& err);

// plumb explain --model PATH --prompt TEXT [--steps N]: one prefill and N decode steps narrated kernel by
// kernel for a learner.
int RunExplain(std::span<const std::string> args, std::ostream& out, std::ostream& err);

// plumb fixtures generate --out DIR [--model M|none --size small|medium --seed S]
//                verify --suite DIR --results DIR [--cases REGEX]   (exit 1 on any FAIL or missing result)
//                run-reference --suite DIR --out DIR [--model M|none --cases REGEX]
// The golden fixture suite (docs/fixtures.md); tables to `out`, progress to `err`.
int RunFixtures(std::span<const std::string> args, std::ostream& out, std::ostream& err);

// plumb tokenize --model PATH (--prompt TEXT | --file F | --detokenize IDS) [--show
// ids|pieces|json|text|count
//                --no-bos --no-parse-special --chat --system TEXT --chat-template NAME]: the tokenizer alone.
int RunTokenize(std::span<const std::string> args, std::ostream& out, std::ostream& err);

// plumb serve --model PATH [--host ADDR --port N --max-body-kib K --max-queue N, the scheduler's and the
// paged
//             cache's flags]: OpenAI's chat and completions API over HTTP until SIGINT/SIGTERM
//             (docs/serve.md); the address and shutdown go to `err`.
int RunServe(std::span<const std::string> args, std::ostream& out, std::ostream& err);

// Top-level dispatch: `plumb COMMAND ...`, `plumb --help`, `plumb --version`.
int RunMain(std::span<const std::string> args, std::ostream& out, std::ostream& err,
            std::istream& in = std::cin);

}  // namespace plumb::cli
