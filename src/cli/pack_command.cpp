// plumb pack: any model plumb loads, written as a packed safetensors checkpoint (docs/formats.md "Packed
// checkpoints") with its config.json and tokenizer, which generate / chat / perplexity then load like any
// Hugging Face checkpoint.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iomanip>
#include <sstream>
#include <thread>

#include "plumb/cli/commands.h"
#include "plumb/cli/common_flags.h"
#include "plumb/core/error.h"
#include "plumb/engine/pack_checkpoint.h"
#include "plumb/model/pack.h"

namespace plumb::cli {
namespace {

namespace fs = std::filesystem;

std::string DTypeList() {
  std::string list;
  for (const std::string& name : PackFormatNames()) list += (list.empty() ? "" : ", ") + name;
  return list;
}

Flags PackFlags() {
  Flags f;
  AddModelFlag(f);
  f.AddValue("dtype", "D", "the weight format to write: " + DTypeList());
  f.AddValue("out", "DIR", "the directory to write (created; must be empty unless --force)");
  f.AddValue("fp8-scale", "S", "fp8 scales: channel (one per output row) or tensor (one per matrix)",
             "channel");
  f.AddSwitch("keep-embedding",
              "fp8/int4/microscaled: store the token embedding and LM head as f16, not packed");
  f.AddValue("threads", "N", "threads for quantizing; 0 = all cores", "0");
  f.AddSwitch("force", "write into a non-empty --out, replacing what plumb pack writes there");
  return f;
}

constexpr const char* kPackUsage =
    "usage: plumb pack --model IN --dtype D --out DIR [--fp8-scale channel|tensor] [--keep-embedding]\n"
    "                  [--threads N] [--force]\n"
    "Reads any model plumb loads (GGUF file or Hugging Face directory), dequantizes every weight matrix to\n"
    "FP32 and writes it in format D as DIR/model.safetensors, with DIR/config.json and the tokenizer\n"
    "(tokenizer.json, or tokenizer.gguf for a SentencePiece GGUF tokenizer; tokenizer_config.json). Norms\n"
    "and biases stay FP32. Layout: docs/formats.md, \"Packed checkpoints\".\n\nflags:\n";

std::string Megabytes(std::size_t bytes) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(1) << static_cast<double>(bytes) / 1e6 << " MB";
  return s.str();
}

}  // namespace

int RunPack(std::span<const std::string> args, std::ostream& out, std::ostream& err) {
  Flags flags = PackFlags();
  if (!flags.ParseUnlessHelp(args, kPackUsage, out)) return 0;
  const std::string model_path = flags.String("model");
  const std::string dtype = flags.String("dtype");
  const std::string out_dir = flags.String("out");
  std::optional<PackFormat> format = ParsePackFormat(dtype);
  if (!format) throw MakeError("--dtype: unknown format '", dtype, "' (valid: ", DTypeList(), ")");
  const std::string scale = flags.String("fp8-scale");
  if (scale != "channel" && scale != "tensor") {
    throw MakeError("--fp8-scale: '", scale, "' is not channel or tensor");
  }
  if (flags.IsSet("fp8-scale") && format->kind != PackKind::kFp8) {
    throw MakeError("--fp8-scale applies to fp8-e4m3 and fp8-e5m2 only, not ", dtype);
  }
  format->fp8_per_row = scale == "channel";
  PackOptions options{*format, flags.Switch("keep-embedding"), 1};
  const int threads = flags.Int("threads", 0, 4096);
  options.threads =
      threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const bool terminal = &err == &std::cerr && isatty(STDERR_FILENO) == 1;
  const PackedCheckpointSummary written =
      WritePackedCheckpoint(model_path, out_dir, options, flags.Switch("force"), [&](const PackProgress& p) {
        if (!terminal) return;
        err << "\r\033[K[" << p.index << "/" << p.count << "] " << p.name << "  " << Megabytes(p.bytes)
            << std::flush;
      });
  if (terminal) err << "\n";
  err << "pack: " << written.tensor_count << " tensors, " << Megabytes(written.weight_bytes)
      << " of weights as " << format->Name()
      << (format->kind == PackKind::kFp8 ? std::string(" (") + scale + " scales)" : "")
      << (options.keep_embedding ? ", embedding f16" : "") << "\n";
  out << "wrote " << written.safetensors_path << " (" << Megabytes(fs::file_size(written.safetensors_path))
      << "), config.json; " << written.tokenizer_note << "\n";
  return 0;
}

}  // namespace plumb::cli
