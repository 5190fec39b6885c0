#include "generate_speculative.h"

#include <iomanip>
#include <limits>
#include <memory>
#include <optional>

#include "plumb/cli/batch_flags.h"
#include "plumb/cli/common_flags.h"
#include "plumb/core/error.h"
#include "plumb/engine/speculative.h"
#include "plumb/kernels/kernels.h"
#include "plumb/sample/speculative.h"
#include "plumb/tokenizer/tokenizer.h"

namespace plumb::cli {

void AddDraftFlags(Flags& flags) {
  flags.AddValue(
      "draft", "M",
      "speculative decoding: a draft model (GGUF or checkpoint with the target's vocabulary), or "
      "\"ngram\" for prompt lookup; prints the acceptance rate and the speedup (docs/speculative.md)");
  flags.AddValue("draft-tokens", "K", "speculative decoding: tokens drafted per target step", "4");
  flags.AddSwitch("no-baseline",
                  "speculative decoding: do not also run the target alone to measure the speedup");
}

namespace {

// Streams tokens as text (a vocabulary and a text prompt) or as ids, and keeps them.
class TokenPrinter {
 public:
  TokenPrinter(const TextModel& model, bool text, std::ostream& out) : out_(out) {
    if (text) decoder_.emplace(*model.tokenizer);
  }
  void operator()(int token) {
    if (decoder_) {
      out_ << decoder_->Push(token) << std::flush;
    } else {
      out_ << (tokens.empty() ? "" : " ") << token << std::flush;
    }
    tokens.push_back(token);
  }
  void Finish() { out_ << (decoder_ ? decoder_->Flush() : "") << "\n"; }

  std::vector<int> tokens;

 private:
  std::ostream& out_;
  std::optional<StreamingDecoder> decoder_;
};

void PrintSpeculativeStats(std::ostream& err, const SpeculativeStats& s, const Drafter& drafter) {
  const std::ios::fmtflags saved = err.flags();
  err << std::fixed << std::setprecision(1) << "speculative: " << drafter.Describe()
      << ", k = " << s.draft_tokens_per_step << " | " << s.target_steps << " target steps, " << s.drafted
      << " drafted, " << s.accepted << " accepted: acceptance rate " << 100 * s.AcceptanceRate() << "%, "
      << std::setprecision(2) << s.TokensPerStep() << " tokens per target step\n"
      << "speculative time: drafting " << s.draft_seconds * 1e3 << " ms, verifying " << s.verify_seconds * 1e3
      << " ms\n";
  err.flags(saved);
}

}  // namespace

int RunGenerateSpeculative(const Flags& flags, TextModel& target, const GenerationOptions& options, int ctx,
                           std::span<const int> prompt, bool print_text, std::ostream& out,
                           std::ostream& err) {
  const std::string draft = flags.String("draft");
  const int k = flags.Int("draft-tokens", 1, 64);
  std::optional<TextModel> draft_model;
  std::unique_ptr<Drafter> drafter;
  if (draft == "ngram") {
    drafter = std::make_unique<NgramDrafter>();
  } else {
    draft_model.emplace(TextModel::Load(draft));
    const ModelConfig& dc = draft_model->model.config();
    if (dc.vocab_size != target.model.config().vocab_size) {
      throw MakeError("--draft ", draft, ": its vocabulary has ", dc.vocab_size, " tokens, the target's ",
                      target.model.config().vocab_size, ": a draft must share the target's vocabulary");
    }
    drafter = std::make_unique<ModelDrafter>(draft_model->model, draft, options.sampling, ctx);
  }

  ContiguousKvCache cache = target.model.NewKvCache(ctx, ReadKvDtypeFlag(flags));
  TokenPrinter printer(target, print_text, out);
  const SpeculativeStats spec =
      GenerateSpeculative(target.model, cache, prompt, *drafter, k, options, std::ref(printer));
  printer.Finish();
  PrintGenerationStats(err, spec.generation);
  PrintSpeculativeStats(err, spec, *drafter);
  if (flags.Switch("no-baseline")) return 0;

  // The target alone, same flags, its tokens not printed: the speedup's denominator.
  ContiguousKvCache alone_cache = target.model.NewKvCache(ctx, ReadKvDtypeFlag(flags));
  std::vector<int> alone;
  const GenerationStats base =
      Generate(target.model, alone_cache, prompt, options, [&](int token) { alone.push_back(token); });
  if (base.decode_steps == 0 || spec.target_steps == 0) return 0;  // one token: no decode to compare
  const double spec_rate = spec.generation.DecodeTokensPerSecond();
  const std::ios::fmtflags saved = err.flags();
  err << std::fixed << std::setprecision(2) << "target alone: decode " << base.DecodeTokensPerSecond()
      << " tok/s | speculative: " << spec_rate << " tok/s | speedup "
      << spec_rate / base.DecodeTokensPerSecond() << "x (decode after the first token, drafting included)\n";
  err.flags(saved);
  if (options.sampling.temperature == 0) {
    // Promised bitwise (engine/speculative.h): a difference is a bug, and the exit status says so.
    if (alone != printer.tokens) {
      err << "error: greedy speculative tokens differ from the target's alone\n";
      return 1;
    }
    err << "greedy: the speculative tokens equal the target's alone\n";
  }
  return 0;
}

}  // namespace plumb::cli
