// plumb_cuda_runner: runs the fixture suite's cases that the CUDA harness implements on the GPU, writes their
// results, and judges them with the suite's own checks (docs/fixtures.md, "CUDA harness"). It links only the
// harness's kernels, the CUDA runtime and the header-only suite reader, as a GPU engine would.

#include <cuda_runtime.h>

#include <cstdio>
#include <exception>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "../kernels.h"
#include "ops.h"
#include "options.h"

namespace {

using plumb::fixtures::Case;
using plumb::fixtures::Check;

std::string ThresholdText(const Check& check) {
  char text[96];
  if (check.metric == "exact") return "0 differ";
  if (check.metric == "allclose") {
    std::snprintf(text, sizeof text, "atol %.3g rtol %.3g frac %.3g", check.atol, check.rtol,
                  check.max_mismatch_fraction);
  } else {
    std::snprintf(text, sizeof text, "%.3g", check.threshold);
  }
  return text;
}

// Where the model cases find their GGUF files, and the suite manifest's record of its model.
plumb::cuda::ModelSource Models(const plumb::cuda::RunnerOptions& options,
                                const plumb::fixtures::Suite& suite) {
  plumb::cuda::ModelSource models;
  models.dir = options.models;
  if (suite.manifest().contains("model")) models.suite_model = suite.manifest()["model"];
  return models;
}

// What --precision asks the kernels to round.
plumb::cuda::Precision Precision(const plumb::cuda::RunnerOptions& options) {
  return options.precision == "bf16" ? plumb::cuda::Precision::kBf16 : plumb::cuda::Precision::kFp32;
}

// --check-only: every selected case read and checked as a run would, and the outputs the runner would write
// held against the suite's (names, dtypes, shapes); no kernel runs, so no GPU is needed. This is what CI can
// check of the harness on a machine without one: that it and the generator read docs/fixtures.md alike.
int CheckOnly(const plumb::cuda::RunnerOptions& options) {
  const plumb::fixtures::Suite suite = plumb::fixtures::Suite::Open(options.suite);
  const plumb::cuda::ModelSource models = Models(options, suite);
  const plumb::cuda::CaseSelection selection =
      plumb::cuda::SelectCases(suite.cases(), options.cases, options.models);
  for (const auto& [c, reason] : selection.skipped)
    std::printf("skip  %s: %s\n", c->name.c_str(), reason.c_str());
  int bad = 0;
  for (const Case* c : selection.run) {
    try {
      const plumb::fixtures::TensorFile in = suite.Load(*c);
      const auto outputs = plumb::cuda::RunCase(*c, in, /*check_only=*/true, Precision(options), models);
      std::string problem;
      for (const plumb::fixtures::Output& o : c->outputs) {
        const auto it = outputs.find(o.name);
        const plumb::fixtures::Tensor& expected = in.Get(o.name);
        if (it == outputs.end()) {
          problem = "would not write output \"" + o.name + "\"";
        } else if (it->second.dtype != expected.dtype || it->second.shape != expected.shape) {
          problem = "output \"" + o.name + "\" would be " + it->second.dtype +
                    " of another shape than the suite's " + expected.dtype;
        }
        if (!problem.empty()) break;
      }
      if (outputs.size() != c->outputs.size() && problem.empty())
        problem = "would write outputs the case does not list";
      if (!problem.empty()) throw plumb::MakeError(problem);
      std::printf("ok    %s\n", c->name.c_str());
    } catch (const std::exception& e) {
      std::printf("error %s: %s\n", c->name.c_str(), e.what());
      ++bad;
    }
  }
  std::printf(
      "\n%zu cases read and checked (no kernel run), %zu skipped (not implemented by the harness, or no "
      "model file), %d "
      "not selected by --cases, %d with errors\n",
      selection.run.size(), selection.skipped.size(), selection.not_matched, bad);
  return bad != 0 || selection.run.empty() ? 1 : 0;
}

int Run(const plumb::cuda::RunnerOptions& options) {
  const plumb::fixtures::Suite suite = plumb::fixtures::Suite::Open(options.suite);
  const plumb::cuda::ModelSource models = Models(options, suite);
  const std::filesystem::path results = options.results;
  std::filesystem::create_directories(results);
  const plumb::cuda::CaseSelection selection =
      plumb::cuda::SelectCases(suite.cases(), options.cases, options.models);

  int device = 0;
  cudaDeviceProp props{};
  if (cudaGetDevice(&device) == cudaSuccess && cudaGetDeviceProperties(&props, device) == cudaSuccess)
    std::printf("device %d: %s (compute capability %d.%d)\n", device, props.name, props.major, props.minor);
  for (const auto& [c, reason] : selection.skipped)
    std::printf("skip  %s: %s\n", c->name.c_str(), reason.c_str());
  const std::vector<std::string> allow = options.Allowances();
  if (!allow.empty())
    std::printf("precision %s: judged with the allowances %s, %s\n", options.precision.c_str(),
                allow[0].c_str(), allow[1].c_str());

  int errors = 0;
  std::vector<const Case*> ran;
  for (const Case* c : selection.run) {
    try {
      const plumb::fixtures::TensorFile in = suite.Load(*c);
      plumb::fixtures::WriteTensorFile(
          results / c->file, plumb::cuda::RunCase(*c, in, /*check_only=*/false, Precision(options), models));
      std::printf("ran   %s\n", c->name.c_str());
      ran.push_back(c);
    } catch (const std::exception& e) {
      std::printf("error %s: %s\n", c->name.c_str(), e.what());
      ++errors;
    }
  }

  // The judgement, from the files just written (so that what is checked is what another tool would read).
  std::printf("\n%-48s %-8s %-11s %-12s %-34s %s\n", "case", "output", "metric", "value", "threshold",
              "result");
  int checks = 0, failed = 0;
  for (const Case* c : ran) {
    const plumb::fixtures::TensorFile expected = suite.Load(*c);
    const plumb::fixtures::TensorFile actual = plumb::fixtures::TensorFile::Read(results / c->file);
    for (const plumb::fixtures::Output& o : c->outputs) {
      const plumb::fixtures::Check check = plumb::fixtures::CheckFor(o, allow);
      // The check's metric, then its per-element bound where it has one (PASS: worst error / bound <= 1).
      for (const bool bound : {false, true}) {
        if (bound && !check.bound) continue;
        ++checks;
        plumb::fixtures::Comparison r;
        if (!actual.Has(o.name)) {
          r.detail = "missing from the results";
        } else if (bound) {
          r = plumb::fixtures::CompareBound(*check.bound, expected.Get(o.name), actual.Get(o.name), expected);
        } else if (c->op == "moe_align_block_size" && expected.Has("expert_ids")) {
          // sorted_token_ids with each expert's segment sorted first, as verify judges it (options.h)
          r = plumb::fixtures::Compare(
              check, expected.Get(o.name),
              plumb::cuda::InJudgedForm(*c, o.name, expected.Get("expert_ids"), actual.Get(o.name)));
        } else {
          r = plumb::fixtures::Compare(check, expected.Get(o.name), actual.Get(o.name), &expected);
        }
        if (!r.pass) ++failed;
        std::printf("%-48s %-8s %-11s %-12.4g %-34s %s%s%s\n", c->name.c_str(), o.name.c_str(),
                    bound ? "bound" : check.metric.c_str(), r.value,
                    bound ? "1" : ThresholdText(check).c_str(), r.pass ? "PASS" : "FAIL", r.pass ? "" : "  ",
                    r.pass ? "" : r.detail.c_str());
      }
    }
  }
  std::printf(
      "\n%zu cases run, %zu skipped (not implemented by the harness, or no model file), %d not selected by "
      "--cases, "
      "%d could not run; %d of %d checks passed\n",
      ran.size(), selection.skipped.size(), selection.not_matched, errors, checks - failed, checks);
  return (failed != 0 || errors != 0) ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  plumb::cuda::RunnerOptions options;
  try {
    options = plumb::cuda::ParseRunnerOptions(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "plumb_cuda_runner: %s\n%s\n", e.what(), plumb::cuda::kRunnerUsage);
    return 3;
  }
  if (options.check_only) {
    try {
      return CheckOnly(options);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "plumb_cuda_runner: %s\n", e.what());
      return 3;
    }
  }
  // Before the suite is read: with no GPU nothing can be checked, and the runner says so in one line.
  int devices = 0;
  const cudaError_t status = cudaGetDeviceCount(&devices);
  if (status != cudaSuccess || devices == 0) {
    std::printf("plumb_cuda_runner: no CUDA GPU available (%s); no kernel was run or checked\n",
                status != cudaSuccess ? cudaGetErrorString(status) : "cudaGetDeviceCount found 0 devices");
    return 2;
  }
  try {
    return Run(options);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "plumb_cuda_runner: %s\n", e.what());
    return 3;
  }
}
