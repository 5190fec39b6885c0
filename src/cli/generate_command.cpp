// plumb generate: a prompt in (text, or token ids), its continuation streamed out, with the prefill/decode
// timing a learner wants to see.
#include <algorithm>
#include <limits>
#include <optional>

#include "generate_batch.h"
#include "generate_speculative.h"
#include "plumb/cli/batch_flags.h"
#include "plumb/cli/commands.h"
#include "plumb/cli/common_flags.h"
#include "plumb/cli/prompt_lines.h"
#include "plumb/core/error.h"
#include "plumb/engine/constraint_vocabulary.h"
#include "plumb/engine/generator.h"
#include "plumb/engine/model_identity.h"
#include "plumb/kv/kv_handoff.h"
#include "plumb/sample/json_schema.h"
#include "plumb/tokenizer/tokenizer.h"

namespace plumb::cli {
namespace {

Flags GenerateFlags() {
  Flags f;
  AddModelFlag(f);
  f.AddValue(
      "prompt", "TEXT",
      "the prompt as text (special tokens such as <|im_start|> are read as such, unless --no-parse-special)");
  f.AddValue("prompt-ids", "IDS", "the prompt as comma-separated token ids, e.g. 1,2,3 (prints ids)");
  f.AddValue("prompts-file", "F", "many prompts, one per line, generated together (continuous batching)");
  f.AddValue("prompt-ids-file", "F", "many prompts as comma-separated token ids, one per line (prints ids)");
  f.AddValue("max-tokens", "N", "maximum number of tokens to generate (per prompt)", "16");
  AddSamplingFlags(f, SamplingParams{});
  AddRuntimeFlags(f, "context length (KV cache positions); 0 = the model's context length", "0");
  f.AddSwitch("ignore-eos", "do not stop at the model's end-of-generation tokens");
  f.AddSwitch("no-parse-special",
              "read special-token texts such as <|im_start|> in --prompt / --prompts-file as plain text");
  AddPagedKvFlags(f);
  AddSchedulerFlags(f);
  f.AddValue("save-kv", "F",
             "after generating, write the sequence's KV cache, its token ids and the last sampled token to F "
             "(a KV hand-off file, docs/kv-cache.md)");
  f.AddValue(
      "load-kv", "F",
      "continue the sequence saved in F: decode its last sampled token, then any --prompt / --prompt-ids "
      "(the KV dtype is the file's)");
  AddDraftFlags(f);
  f.AddValue(
      "json-schema", "F",
      "constrain the output to a JSON document valid against the JSON schema in file F; it ends with the"
      " end-of-generation token once complete (docs/serve.md, \"Structured output\")");
  return f;
}

constexpr const char* kGenerateUsage =
    "usage: plumb generate --model PATH (--prompt TEXT | --prompt-ids 1,2,3 | --prompts-file F |\n"
    "                      --prompt-ids-file F) [flags]\n"
    "Runs the prompt through the model (prefill), then generates one token at a time (decode), streaming\n"
    "the continuation to stdout (text for --prompt, ids for --prompt-ids) and the timing to stderr.\n"
    "With a prompts file, every prompt is generated at once by continuous batching over a paged KV cache\n"
    "(--kv-dtype, --block-size, --kv-budget-mib, --max-batch, --step-tokens, --kv-policy, --deterministic),\n"
    "and the results are printed in the file's order once all have finished.\n"
    "--save-kv F / --load-kv F hand a sequence's KV cache from one run to the next: the continuation's "
    "logits\n"
    "are bitwise those of one uninterrupted run with the same flags (docs/kv-cache.md, \"KV hand-off "
    "format\").\n"
    "--json-schema F constrains the output to a JSON document valid against the schema in F (docs/serve.md,\n"
    "\"Structured output\").\n\n"
    "flags:\n";

}  // namespace

int RunGenerate(std::span<const std::string> args, std::ostream& out, std::ostream& err) {
  Flags flags = GenerateFlags();
  if (!flags.ParseUnlessHelp(args, kGenerateUsage, out)) return 0;
  // Read and check every flag before the (slow) model load, so a typo fails at once.
  const std::string model_path = flags.String("model");
  const int prompt_sources = flags.IsSet("prompt") + flags.IsSet("prompt-ids") + flags.IsSet("prompts-file") +
                             flags.IsSet("prompt-ids-file");
  const bool batch = flags.IsSet("prompts-file") || flags.IsSet("prompt-ids-file");
  const bool load_kv = flags.IsSet("load-kv");
  if (prompt_sources > 1 || (prompt_sources == 0 && !load_kv)) {
    throw MakeError(
        "give exactly one of --prompt TEXT, --prompt-ids IDS, --prompts-file F and --prompt-ids-file F"
        " (or --load-kv F, with at most --prompt or --prompt-ids)");
  }
  if (batch && (load_kv || flags.IsSet("save-kv"))) {
    throw MakeError(
        "--save-kv and --load-kv hand off one sequence: not with --prompts-file / --prompt-ids-file");
  }
  if (flags.IsSet("draft") && (batch || load_kv || flags.IsSet("save-kv"))) {
    throw MakeError(
        "--draft speculates on one sequence: not with --prompts-file, --prompt-ids-file, --save-kv or"
        " --load-kv");
  }
  // The schema is compiled before the model loads, so that an unsupported keyword fails at once.
  std::optional<Grammar> schema_grammar;
  if (flags.IsSet("json-schema")) {
    if (flags.IsSet("draft")) throw MakeError("--json-schema is not supported with --draft");
    if (flags.Switch("ignore-eos"))
      throw MakeError(
          "--json-schema ends the document with an end-of-generation token: not with --ignore-eos");
    const std::string path = flags.String("json-schema");
    try {
      schema_grammar = JsonSchemaGrammar(ReadTextFile(path));
    } catch (const Error& e) {
      throw MakeError(path, ": ", e.what());
    }
  }
  const bool text_mode = flags.IsSet("prompt");
  const std::string prompt_text = text_mode ? flags.String("prompt") : "";
  std::vector<int> prompt = flags.IsSet("prompt-ids") ? flags.IntList("prompt-ids") : std::vector<int>{};
  GenerationOptions options;
  options.max_new_tokens = flags.Int("max-tokens", 1, std::numeric_limits<int>::max());
  options.sampling = ReadSamplingFlags(flags);
  ApplyThreadsFlag(flags);

  TextModel loaded = TextModel::Load(model_path);
  const int ctx = ReadContextFlag(flags, loaded.model.config(), 0);
  if (!flags.Switch("ignore-eos")) options.stop_ids = loaded.StopIds();
  if (schema_grammar) {
    options.constraint = std::make_shared<const TokenConstraint>(
        std::move(*schema_grammar), ConstraintVocabulary(loaded.RequireTokenizer("--json-schema")),
        options.stop_ids);
  }
  if (batch) return RunGenerateBatch(flags, loaded, options, ctx, out, err);
  // A loaded hand-off: the cache as the file holds it (its dtype and FP8 scales), then its next token.
  std::optional<KvHandoffModel> identity;  // hashing the weights takes a moment: only when a file needs it
  if (load_kv || flags.IsSet("save-kv")) identity = ModelIdentity(loaded.model.config(), model_path);
  std::optional<KvHandoff> handoff;
  std::string loaded_note;   // said after the timing, so that stdout and stderr read in order when merged
  std::vector<int> history;  // the ids of the positions the cache holds before this run's tokens
  if (load_kv) {
    const std::string path = flags.String("load-kv");
    handoff = ReadKvHandoff(path);
    CheckKvHandoffModel(*handoff, *identity, path);
    if (flags.IsSet("kv-dtype") && ReadKvDtypeFlag(flags) != handoff->dtype) {
      throw MakeError(path, ": KV hand-off field kv_dtype is ", KvDtypeName(handoff->dtype),
                      " but --kv-dtype ", KvDtypeName(ReadKvDtypeFlag(flags)),
                      " was asked for (leave --kv-dtype out to use the file's)");
    }
    if (!handoff->next_token && prompt_sources == 0) {
      throw MakeError(path,
                      ": KV hand-off has no next_token: give --prompt or --prompt-ids to continue from");
    }
    history = handoff->tokens;
  }
  if (text_mode) {
    const Tokenizer& tokenizer = loaded.RequireTokenizer("--prompt");
    // A continuation is the middle of a sequence: no BOS.
    prompt = tokenizer.Encode(prompt_text, /*add_special=*/!load_kv, !flags.Switch("no-parse-special"));
  }
  if (flags.IsSet("draft"))
    return RunGenerateSpeculative(flags, loaded, options, ctx, prompt, text_mode, out, err);
  if (handoff && handoff->next_token) prompt.insert(prompt.begin(), *handoff->next_token);
  const ModelConfig& config = loaded.model.config();
  ContiguousKvCache cache =
      handoff ? ContiguousKvCache(config.num_layers, config.num_kv_heads, ctx, config.head_dim,
                                  handoff->dtype, handoff->k_scales, handoff->v_scales)
              : loaded.model.NewKvCache(ctx, ReadKvDtypeFlag(flags));
  if (handoff) {
    ImportKv(*handoff, cache, flags.String("load-kv"));
    loaded_note = "KV cache: " + std::to_string(handoff->length()) + " positions of " +
                  std::string(KvDtypeName(handoff->dtype)) + " loaded from " + flags.String("load-kv");
    handoff.reset();  // the bytes are in the cache now
    options.decode_one_token_prompt = true;
  }
  history.insert(history.end(), prompt.begin(), prompt.end());

  // Text when the prompt was text (or a continuation of a model with a vocabulary), ids otherwise.
  const bool print_text = text_mode || (load_kv && prompt_sources == 0 && loaded.tokenizer);
  std::vector<int> generated;
  GenerationStats stats;
  if (print_text) {
    StreamingDecoder decoder(*loaded.tokenizer);
    stats = Generate(loaded.model, cache, prompt, options, [&](int token) {
      generated.push_back(token);
      out << decoder.Push(token) << std::flush;
    });
    out << decoder.Flush() << "\n";
  } else {
    stats = Generate(loaded.model, cache, prompt, options, [&](int token) {
      out << (generated.empty() ? "" : " ") << token << std::flush;
      generated.push_back(token);
    });
    out << "\n";
  }
  if (flags.IsSet("save-kv")) {
    // The cache holds every token but the last one sampled, which the next run decodes first.
    history.insert(history.end(), generated.begin(), generated.end() - 1);
    WriteKvHandoff(flags.String("save-kv"), ExportKv(cache, history, *identity, generated.back()));
  }
  PrintGenerationStats(err, stats);
  if (options.constraint) {
    err << "json schema: masks took " << stats.constraint_seconds * 1e3 / std::max(stats.generated_tokens, 1)
        << " ms per token"
        << (stats.stop_reason == StopReason::kMaxTokens
                ? "; the document is unfinished: --max-tokens came first (finish reason length)"
                : "")
        << "\n";
  }
  if (!loaded_note.empty()) err << loaded_note << "\n";
  return 0;
}

}  // namespace plumb::cli
