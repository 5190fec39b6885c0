// plumb pack: any model plumb loads, written as a packed safetensors checkpoint (docs/formats.md "Packed
// checkpoints") with its config.json and tokenizer, which generate / chat / perplexity then load like any
// Hugging Face checkpoint.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <thread>

#include "plumb/cli/commands.h"
#include "plumb/cli/common_flags.h"
#include "plumb/core/error.h"
#include "plumb/formats/gguf.h"
#include "plumb/model/pack.h"
#include "plumb/tokenizer/tokenizer_export.h"

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
  f.AddSwitch("keep-embedding", "fp8/int4: store the token embedding and LM head as f16, not packed");
  f.AddValue("threads", "N", "threads for quantizing; 0 = all cores", "0");
  f.AddSwitch("force", "write into a non-empty --out, replacing what plumb pack writes there");
  f.AddSwitch("help", "show this help");
  return f;
}

constexpr const char* kPackUsage =
    "usage: plumb pack --model IN --dtype D --out DIR [--fp8-scale channel|tensor] [--keep-embedding]\n"
    "                  [--threads N] [--force]\n"
    "Reads any model plumb loads (GGUF file or Hugging Face directory), dequantizes every weight matrix to\n"
    "FP32 and writes it in format D as DIR/model.safetensors, with DIR/config.json and the tokenizer\n"
    "(tokenizer.json, or tokenizer.gguf for a SentencePiece GGUF tokenizer; tokenizer_config.json). Norms\n"
    "and biases stay FP32. Layout: docs/formats.md, \"Packed checkpoints\".\n\nflags:\n";

// The names plumb pack writes; --force removes these (and other safetensors shards) first, so that a stale
// shard or index cannot be loaded beside the new file.
bool IsOutputName(const fs::path& file) {
  const std::string name = file.filename().string();
  return name == "config.json" || name == "tokenizer.json" || name == "tokenizer.gguf" ||
         name == "tokenizer_config.json" || name == "model.safetensors.index.json" ||
         file.extension() == ".safetensors";
}

void PrepareOutDir(const fs::path& dir, bool force) {
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec)) {
    throw MakeError("--out ", dir.string(), ": exists and is not a directory");
  }
  if (fs::exists(dir, ec) && !fs::is_empty(dir, ec)) {
    if (!force)
      throw MakeError("--out ", dir.string(), ": directory is not empty (use --force to write into it)");
    for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
      if (entry.is_regular_file() && IsOutputName(entry.path())) fs::remove(entry.path());
    }
  }
  fs::create_directories(dir, ec);
  if (ec) throw MakeError("--out ", dir.string(), ": cannot create the directory: ", ec.message());
  if (access(dir.c_str(), W_OK) != 0) throw MakeError("--out ", dir.string(), ": directory is not writable");
}

void WriteText(const fs::path& path, const std::string& text) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file << text;
  file.close();
  if (!file) throw MakeError("cannot write ", path.string());
}

// The directory a Hugging Face model path's tokenizer files lie in, or "" for a GGUF file.
fs::path HfDir(const std::string& model_path) {
  const fs::path p(model_path);
  if (p.extension() == ".gguf") return {};
  return fs::is_directory(p) ? p : p.parent_path();
}

std::string Megabytes(std::size_t bytes) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(1) << static_cast<double>(bytes) / 1e6 << " MB";
  return s.str();
}

}  // namespace

int RunPack(std::span<const std::string> args, std::ostream& out, std::ostream& err) {
  Flags flags = PackFlags();
  flags.Parse(args);
  if (flags.Switch("help")) {
    out << kPackUsage << flags.Help();
    return 0;
  }
  const std::string model_path = flags.String("model");
  const std::string dtype = flags.String("dtype");
  const fs::path out_dir = flags.String("out");
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
  if (!fs::exists(model_path)) throw MakeError("--model ", model_path, ": does not exist");
  const fs::path hf_dir = HfDir(model_path);
  std::error_code ec;
  if (!hf_dir.empty() && fs::equivalent(hf_dir, out_dir, ec)) {
    throw MakeError("--out ", out_dir.string(),
                    ": is the model's own directory; write the packed model elsewhere");
  }

  // Everything that can fail fast (the input, its tokenizer, the output directory) before the slow part.
  const TextModel loaded = TextModel::Load(model_path);
  // A GGUF source's tokenizer: tokenizer.json for byte-level BPE, tokenizer.gguf for SentencePiece
  // (tokenizer_export.h says why). The metadata is read again: TextModel keeps the spec, not the keys.
  std::vector<TokenizerFile> exported;
  if (hf_dir.empty() && loaded.tokenizer) exported = ExportGgufTokenizer(GgufFile::Open(model_path));
  PrepareOutDir(out_dir, flags.Switch("force"));

  const bool terminal = &err == &std::cerr && isatty(STDERR_FILENO) == 1;
  PackedCheckpoint packed =
      PackModel(loaded.model.config(), loaded.model.weights(), options, [&](const PackProgress& p) {
        if (!terminal) return;
        err << "\r\033[K[" << p.index << "/" << p.count << "] " << p.name << "  " << Megabytes(p.bytes)
            << std::flush;
      });
  // tokenizer.json has no end-of-turn field: the GGUF's EOT goes among the ids plumb stops on.
  // (tokenizer.gguf keeps it, but config.json's list is what other tools read, so it goes there for either
  // tokenizer.)
  if (!exported.empty() && loaded.tokenizer->spec().eot_id >= 0) {
    std::vector<int>& eos = packed.config.eos_token_ids;
    const int eot = loaded.tokenizer->spec().eot_id;
    if (std::find(eos.begin(), eos.end(), eot) == eos.end()) eos.push_back(eot);
  }
  std::size_t bytes = 0;
  for (const TensorToWrite& t : packed.tensors) bytes += t.bytes.size();
  const std::size_t tensor_count = packed.tensors.size();
  WriteSafetensors((out_dir / "model.safetensors").string(), std::move(packed.tensors), {{"format", "pt"}});
  WriteText(out_dir / "config.json", ConfigToJson(packed.config));
  std::string tokenizer_note = "no tokenizer (the source has none)";
  if (!exported.empty()) {
    for (const TokenizerFile& file : exported) WriteText(out_dir / file.name, file.contents);
    tokenizer_note = exported.front().name + " written from the GGUF vocabulary";
  } else if (!hf_dir.empty() &&
             (fs::exists(hf_dir / "tokenizer.json") || fs::exists(hf_dir / "tokenizer.gguf"))) {
    for (const char* name : {"tokenizer.json", "tokenizer.gguf", "tokenizer_config.json"}) {
      if (fs::exists(hf_dir / name))
        fs::copy_file(hf_dir / name, out_dir / name, fs::copy_options::overwrite_existing);
    }
    tokenizer_note = "tokenizer files copied";
  }
  if (terminal) err << "\n";
  err << "pack: " << tensor_count << " tensors, " << Megabytes(bytes) << " of weights as " << format->Name()
      << (format->kind == PackKind::kFp8 ? std::string(" (") + scale + " scales)" : "")
      << (options.keep_embedding ? ", embedding f16" : "") << "\n";
  out << "wrote " << (out_dir / "model.safetensors").string() << " ("
      << Megabytes(fs::file_size(out_dir / "model.safetensors")) << "), config.json; " << tokenizer_note
      << "\n";
  return 0;
}

}  // namespace plumb::cli
