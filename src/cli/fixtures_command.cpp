// plumb fixtures generate | verify | run-reference: the golden fixture suite (docs/fixtures.md).
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "plumb/cli/commands.h"
#include "plumb/cli/common_flags.h"
#include "plumb/cli/flags.h"
#include "plumb/core/error.h"
#include "plumb/fixtures/fixtures.h"
#include "plumb/kernels/int8_activations.h"

namespace plumb::cli {
namespace {

constexpr const char* kFixturesUsage =
    "usage: plumb fixtures generate --out DIR [--model M|none] [--size small|medium|large] [--seed S]\n"
    "                                [--cases REGEX] [--list]\n"
    "       plumb fixtures verify --suite DIR --results DIR [--cases REGEX] [--allow A,..]\n"
    "       plumb fixtures run-reference --suite DIR --out DIR [--model M|none] [--cases REGEX] "
    "[--kernels exact|fast]\n"
    "The golden fixture suite (docs/fixtures.md): generate writes it (op cases from plumb's scalar\n"
    "definitions, layer and end_to_end cases from the model; --model none for the op cases only);\n"
    "verify judges an engine's results (one <case>.safetensors per case, outputs under the suite's\n"
    "names) and exits 0 when every check passes, 1 when one fails or a result is missing, 2 when it\n"
    "cannot judge (bad flags, an unreadable suite, no results directory); run-reference writes plumb's\n"
    "own results, computed with its library kernels (the exact family, or with --kernels fast the fast\n"
    "one, judged as a GPU engine would be).\n";

int Generate(std::span<const std::string> args, std::ostream& out, std::ostream& err) {
  Flags f;
  f.AddValue("out", "DIR", "the suite directory to write (created)");
  f.AddValue("model", "M", "the model of the layer and end_to_end cases, or none", fixtures::kDefaultModel);
  f.AddValue("size", "S",
             "small (committed in fixtures/suite), medium, or large (Llama-3-8B's shapes, op cases only: ~"
             "5 GB, docs/fixtures.md \"The large suite\")",
             "small");
  f.AddValue("seed", "S", "the seed of every op case's inputs", std::to_string(fixtures::kDefaultSeed));
  f.AddValue("cases", "REGEX", "--size large: only the cases whose name matches (POSIX extended regex)");
  f.AddSwitch("list", "--size large: print the cases (name, op, seed, description) and compute nothing");
  if (!f.ParseUnlessHelp(args, std::string(kFixturesUsage) + "\nflags of generate:\n", out)) return 0;
  fixtures::GenerateOptions o;
  o.model = f.String("model");
  o.size = f.String("size");
  o.seed = f.UInt64("seed");
  o.cases = f.IsSet("cases") ? f.String("cases") : "";
  if (f.Switch("list")) {
    if (o.size != "large") throw MakeError("--list: only with --size large (not \"", o.size, "\")");
    for (const auto& c : fixtures::PlanLargeSuite(o))
      out << c["name"].get<std::string>() << "\t" << c["op"].get<std::string>() << "\t"
          << c["seed"].get<std::uint64_t>() << "\t" << c["description"].get<std::string>() << "\n";
    return 0;
  }
  fixtures::GenerateSuite(f.String("out"), o, err);
  return 0;
}

int VerifyOrThrow(std::span<const std::string> args, std::ostream& out) {
  Flags f;
  f.AddValue("suite", "DIR", "the suite (manifest.json and the cases)");
  f.AddValue("results", "DIR", "the engine's results, one <case>.safetensors per case");
  f.AddValue("cases", "REGEX", "only the cases whose name matches (POSIX extended regex, searched)", ".*");
  f.AddValue("allow", "A,..",
             "what the engine does that some checks allow for, comma-separated: int8_activations "
             "(activations rounded to 8 bits per block of 32, as ggml's Q8_1 and plumb's --kernels fast), "
             "fp16_accumulation (FP16 weights' dot products summed in FP16, cuBLAS's 16F compute type), "
             "bf16_activations, fp16_activations, tf32 (the inputs of matmuls, attention, norms, RoPE and "
             "SwiGLU rounded to BF16, FP16 or TF32, FP32 sums), bf16_outputs, fp16_outputs (outputs "
             "rounded), fp8_activations (a matmul's x in FP8 E4M3, dynamic per-token, per-tensor or "
             "per-128-group scale); "
             "several add up; "
             "docs/fixtures.md \"Allowances\"");
  if (!f.ParseUnlessHelp(args, std::string(kFixturesUsage) + "\nflags of verify:\n", out)) return 0;
  const fixtures::Suite suite = fixtures::Suite::Open(f.String("suite"));
  std::vector<std::string> allow;
  std::stringstream list(f.IsSet("allow") ? f.String("allow") : "");
  for (std::string name; std::getline(list, name, ',');)
    if (!name.empty()) allow.push_back(name);
  const std::filesystem::path results = f.String("results");
  if (!std::filesystem::is_directory(results))
    throw MakeError("--results ", results.string(), ": not a directory (the engine's <case>.safetensors)");
  const auto rows = fixtures::Verify(suite, results, f.String("cases"), allow);
  return fixtures::PrintVerifyTable(rows, out) ? 0 : 1;
}

// Exit status 0: every check passed; 1: a check failed; 2: nothing could be judged (a usage error, an unknown
// allowance, a --cases regex that is bad or matches nothing, an unreadable suite, no results directory), so
// that a script tells a failing engine from a broken invocation.
int Verify(std::span<const std::string> args, std::ostream& out, std::ostream& err) {
  try {
    return VerifyOrThrow(args, out);
  } catch (const Error& e) {
    err << "plumb: error: " << e.what() << "\n";
    return 2;
  }
}

int RunReference(std::span<const std::string> args, std::ostream& out, std::ostream& err) {
  Flags f;
  f.AddValue("suite", "DIR", "the suite to compute results for");
  f.AddValue("out", "DIR", "where to write <case>.safetensors (created)");
  f.AddValue("model", "M", "the model of the layer and end_to_end cases, or none (skips them)",
             fixtures::kDefaultModel);
  f.AddValue("cases", "REGEX", "only the cases whose name matches (POSIX extended regex, searched)", ".*");
  AddKernelsFlag(f, kernels::KernelFamily::kExact);
  if (!f.ParseUnlessHelp(args, std::string(kFixturesUsage) + "\nflags of run-reference:\n", out)) return 0;
  ApplyKernelsFlag(f);
  const fixtures::Suite suite = fixtures::Suite::Open(f.String("suite"));
  fixtures::RunReference(suite, f.String("out"), f.String("model"), f.String("cases"), err);
  // What verify must be told about these results: the active family's declared allowances on this host.
  const std::vector<std::string> allow = kernels::DeclaredAllowances(kernels::ActiveFamily());
  std::string joined;
  for (const std::string& a : allow) joined += (joined.empty() ? "" : ",") + a;
  err << "run-reference: kernels " << kernels::FamilyName(kernels::ActiveFamily()) << " on this host: verify "
      << (allow.empty() ? "with no --allow" : "--allow " + joined) << "\n";
  return 0;
}

}  // namespace

int RunFixtures(std::span<const std::string> args, std::ostream& out, std::ostream& err) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    (args.empty() ? err : out) << kFixturesUsage;
    return args.empty() ? 2 : 0;
  }
  const std::span<const std::string> rest = args.subspan(1);
  if (args[0] == "generate") return Generate(rest, out, err);
  if (args[0] == "verify") return Verify(rest, out, err);
  if (args[0] == "run-reference") return RunReference(rest, out, err);
  throw MakeError("unknown fixtures subcommand '", args[0], "' (generate, verify, run-reference)");
}

}  // namespace plumb::cli
