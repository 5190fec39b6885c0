#!/usr/bin/env bash
# Runs the CUDA harness on a machine with an NVIDIA GPU and writes what it saw to one folder
# (docs/fixtures.md, "CUDA harness: run on a GPU"). Usage:
#   cuda/check-on-gpu.sh OUT_DIR [RUNNER]
# RUNNER is a plumb_cuda_runner built elsewhere (default build/plumb_cuda_runner). If it is missing or does not
# start on this machine, the harness is compiled here with nvcc alone (no CMake, no plumb library: the runner
# needs only the kernels, the suite reader and nlohmann/json, looked for in NLOHMANN_INCLUDE or /usr/include).
# Then, in order, each step's log in OUT_DIR:
#   device.txt      nvidia-smi's name, driver and clocks
#   runner.log      the runner on the committed suite (its table of checks; exit 0 = every check passed)
#   runner-bf16.log the runner with --precision bf16 (a BF16 engine's roundings, judged with
#                   bf16_activations,bf16_outputs)
#   results.tar.gz  the result files, for `plumb fixtures verify --results` on any machine
#   memcheck.log    the same run under compute-sanitizer memcheck (out-of-bounds and misaligned accesses)
#   racecheck.log   the same run under compute-sanitizer racecheck (shared-memory hazards)
# The script's exit status is the runner's; the sanitizer verdicts are in their logs and the summary.
# Environment: PLUMB_SUITE, another suite to run (default fixtures/suite; e.g. the --size large one, which
# `plumb fixtures generate --size large --out DIR` writes in minutes); PLUMB_SANITIZE=0 leaves out the
# compute-sanitizer runs and PLUMB_KEEP_RESULTS=0 the results tarball (both sensible for the large suite:
# hours under the sanitizers, gigabytes of results).
set -u -o pipefail
out=${1:?usage: cuda/check-on-gpu.sh OUT_DIR [RUNNER]}
runner=${2:-build/plumb_cuda_runner}
suite=${PLUMB_SUITE:-fixtures/suite}
mkdir -p "$out"

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >"$out/device.txt" 2>&1
cat "$out/device.txt"

if ! [[ -x $runner ]] || ! "$runner" --suite "$suite" --check-only >/dev/null 2>&1; then
  echo "check-on-gpu: $runner missing or does not start here; compiling the harness with nvcc"
  cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
  json_dir=${NLOHMANN_INCLUDE:-/usr/include}
  runner=/tmp/plumb_cuda_runner
  nvcc -std=c++20 -O2 -arch="sm_${cap:-90}" -I cuda -I include -I "$json_dir" \
    cuda/attention.cu cuda/elementwise.cu cuda/gemv.cu cuda/mla.cu cuda/moe.cu cuda/norm_rope.cu \
    cuda/sampling.cu cuda/runner/gguf.cpp cuda/runner/main.cpp cuda/runner/model.cpp cuda/runner/ops.cpp \
    src/core/sha256.cpp \
    -o "$runner" ||
    { echo "check-on-gpu: nvcc failed"; exit 3; }
fi

results=$(mktemp -d)
"$runner" --suite "$suite" --results "$results" 2>&1 | tee "$out/runner.log"
status=$?
bf16_results=$(mktemp -d)
"$runner" --suite "$suite" --results "$bf16_results" --precision bf16 >"$out/runner-bf16.log" 2>&1
bf16_status=$?
echo "runner --precision bf16: exit $bf16_status ($(tail -n 1 "$out/runner-bf16.log"))"
rm -rf "$bf16_results"
[[ $status == 0 ]] && status=$bf16_status
if [[ ${PLUMB_KEEP_RESULTS:-1} != 0 ]]; then
  tar -C "$results" -czf "$out/results.tar.gz" .
fi
rm -rf "$results"

sanitize() {  # tool: a run under compute-sanitizer, its summary line kept
  local tool=$1 scratch
  scratch=$(mktemp -d)
  compute-sanitizer --tool "$tool" --error-exitcode 9 "$runner" --suite "$suite" --results "$scratch" \
    >"$out/$tool.log" 2>&1
  echo "$tool: exit $? ($(grep -m1 'ERROR SUMMARY\|RACECHECK SUMMARY' "$out/$tool.log" || echo 'no summary line'))"
}
PATH=$PATH:/usr/local/cuda/bin
if [[ ${PLUMB_SANITIZE:-1} == 0 ]]; then
  echo "PLUMB_SANITIZE=0: the sanitizer runs were skipped"
elif command -v compute-sanitizer >/dev/null; then
  sanitize memcheck
  sanitize racecheck
else
  echo "compute-sanitizer not found: the sanitizer runs were skipped"
fi
echo "runner exit status: $status"
exit "$status"
