// kernels::Gemv and kernels::Gemm on every weight type, against the host's own streaming-read bandwidth
// measured in the same run, so memory-bandwidth utilisation (MBU) reads straight off one output.
//
//   Gemv/<type>/<rows>x<cols>/<isa>/threads:<n>   one GEMV y = W·x (decode's projection). Counters:
//       weight_B/s  W.Bytes() per call ÷ mean time (codes + scales + zeros: every byte a GEMV must read)
//       best_B/s    the same for the fastest call
//       MBU         best_B/s ÷ stream_B/s, the streaming read at the same thread count measured in this run
//                   just before the GEMV (roofline::MeasureReadBandwidth, best of 10, over 512 MiB)
//   StreamRead/threads:<n>   roofline::StreamReadOnce of a buffer ≫ LLC: read_B/s (mean), best_B/s.
//   Gemm/<type>/<rows>x<cols>/P:512/threads:<n>   Y = X·Wᵀ for 512 tokens (prefill). Counters: GFLOP/s
//       (2·P·rows·cols per call; mean), best_GFLOP/s (fastest call) and vs_sgemm, best_GFLOP/s over FP32's
//       (cblas_sgemm on the same shape, measured first in the same run).
// Shapes (rows × cols): 4096 × 14336 and 14336 × 4096 (a Llama-3-8B MLP projection and its transpose):
// 58.7 M weights, 29 MB at INT4 and 235 MB at FP32, ≫ the last-level cache, so every call reads W from DRAM.
// 8192 × 2048 and 2048 × 8192, Llama-3.2-1B's (short rows: 8 K-quant super-blocks each). And 128 × 4096,
// which stays in cache (0.25 MB at INT4 to 2 MB at FP32): the kernel's own speed, with memory out of the way.
// <isa> is the RowDot / PackedRowDots variant (kernels/row_dot.h): avx512 (skipped with an error on a CPU
// without it), avx2, and scalar (the definition) for a side-by-side; FP32 GEMV is OpenMP over
// scalar::GemvRows either way.
//
//   cmake --build build --target gemv_bench
//   build/gemv_bench --benchmark_filter='Gemv|StreamRead' --benchmark_min_time=1
//   build/gemv_bench --benchmark_filter='Gemm'
#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "plumb/formats/dtype.h"
#include "plumb/formats/gguf_blocks.h"
#include "plumb/kernels/kernels.h"
#include "plumb/kernels/row_dot.h"
#include "plumb/roofline/host_probe.h"

namespace {

using plumb::Fp8Format;
using plumb::GgmlType;
using plumb::Int4Params;
using plumb::Int4Scheme;
using plumb::WeightMatrix;
using plumb::kernels::Isa;

constexpr std::size_t kProbeBytes = std::size_t{512} << 20;  // ≫ the 32 MiB LLC; smaller than the default
                                                             // 1 GiB, as the bench shares the machine

struct Kind {
  std::string name;
  enum Encoding { kGgml, kFp8, kInt4 } encoding = kGgml;
  GgmlType type = GgmlType::F32;
  Fp8Format fp8 = Fp8Format::kE4M3;
  Int4Params int4;
};

Kind Named(const char* name, Kind::Encoding encoding) {
  Kind k;
  k.name = name;
  k.encoding = encoding;
  return k;
}
Kind Ggml(const char* name, GgmlType type) {
  Kind k = Named(name, Kind::kGgml);
  k.type = type;
  return k;
}
Kind Fp8(const char* name, Fp8Format format) {
  Kind k = Named(name, Kind::kFp8);
  k.fp8 = format;
  return k;
}
Kind Int4(const char* name, Int4Scheme scheme, int group_size) {
  Kind k = Named(name, Kind::kInt4);
  k.int4 = Int4Params{scheme, group_size};
  return k;
}

std::vector<Kind> Kinds() {
  return {Ggml("F32", GgmlType::F32),
          Ggml("F16", GgmlType::F16),
          Ggml("BF16", GgmlType::BF16),
          Ggml("Q8_0", GgmlType::Q8_0),
          Ggml("Q4_0", GgmlType::Q4_0),
          Ggml("Q4_1", GgmlType::Q4_1),
          Ggml("Q5_0", GgmlType::Q5_0),  // Gemma 3's Q4_K_M files: rows 640 or 1152 wide, no K-quant fits
          Ggml("Q5_1", GgmlType::Q5_1),
          Ggml("Q4_K", GgmlType::Q4_K),
          Ggml("Q5_K", GgmlType::Q5_K),
          Ggml("Q6_K", GgmlType::Q6_K),
          Fp8("FP8_E4M3", Fp8Format::kE4M3),
          Fp8("FP8_E5M2", Fp8Format::kE5M2),
          Int4("INT4_sym_g32", Int4Scheme::kSymmetric, 32),
          Int4("INT4_asym_g128", Int4Scheme::kAsymmetric, 128),
          Int4("INT4_asym-f16zero_g128", Int4Scheme::kAsymmetricF16Zero, 128)};
}

// Fast random bytes: the matrices are hundreds of MB.
struct Bytes {
  std::uint64_t state = 0x9E3779B97F4A7C15ull;
  std::uint64_t Next() {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  }
  void Fill(std::uint8_t* p, std::size_t n) {
    for (std::size_t i = 0; i < n; i += 8) {
      const std::uint64_t v = Next();
      std::memcpy(p + i, &v, n - i < 8 ? n - i : 8);
    }
  }
};

std::uint16_t RandomScale(std::mt19937& rng) {  // normal FP16 scales: a subnormal one would slow nothing
  return plumb::F32ToF16(0.01f * (1.5f + std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng)));
}

WeightMatrix MakeMatrix(const Kind& kind, int rows, int cols) {
  Bytes bytes;
  std::mt19937 rng(42);
  if (kind.encoding == Kind::kGgml) {
    const std::size_t row_bytes = static_cast<std::size_t>(plumb::GgmlRowBytes(kind.type, cols));
    std::vector<std::uint8_t> data(row_bytes * rows);
    const plumb::GgmlTypeTraits traits = plumb::GgmlTraits(kind.type);
    if (traits.block_elements == 1) {
      std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
      for (std::size_t i = 0; i < data.size(); i += traits.block_bytes) {
        const float w = uniform(rng);
        if (kind.type == GgmlType::F32) {
          std::memcpy(&data[i], &w, sizeof w);
        } else {
          const std::uint16_t h = kind.type == GgmlType::F16 ? plumb::F32ToF16(w) : plumb::F32ToBF16(w);
          std::memcpy(&data[i], &h, sizeof h);
        }
      }
    } else {
      bytes.Fill(data.data(), data.size());
      for (std::size_t b = 0; b < data.size(); b += traits.block_bytes) {
        for (int offset : plumb::BlockScaleOffsets(kind.type)) {
          const std::uint16_t h = RandomScale(rng);
          std::memcpy(&data[b + offset], &h, sizeof h);
        }
      }
    }
    return WeightMatrix::FromBytes(kind.type, rows, cols, std::move(data));
  }
  struct Storage {
    std::vector<std::uint8_t> codes, zeros;
    std::vector<float> fp8_scales;
    std::vector<std::uint16_t> scales;
  };
  auto s = std::make_shared<Storage>();
  if (kind.encoding == Kind::kFp8) {
    s->codes.resize(static_cast<std::size_t>(rows) * cols);
    bytes.Fill(s->codes.data(), s->codes.size());
    for (auto& c : s->codes)
      c &= 0xF7;  // no NaN / inf codes (E4M3 S.1111.111, E5M2 S.11111.xx), as a quantizer
    s->fp8_scales.assign(rows, 0.01f);
    return WeightMatrix::Fp8View(kind.fp8, rows, cols, s->codes.data(), s->fp8_scales.data(), true, s);
  }
  s->codes.resize(rows * plumb::Int4RowBytes(cols));
  bytes.Fill(s->codes.data(), s->codes.size());
  const int groups = plumb::Int4Groups(cols, kind.int4.group_size);
  s->scales.resize(static_cast<std::size_t>(rows) * groups);
  for (auto& h : s->scales) h = RandomScale(rng);
  const std::size_t zero_bytes = rows * plumb::Int4ZeroRowBytes(kind.int4, cols);
  s->zeros.resize(zero_bytes);
  if (kind.int4.scheme == Int4Scheme::kAsymmetric) bytes.Fill(s->zeros.data(), zero_bytes);
  if (kind.int4.scheme == Int4Scheme::kAsymmetricF16Zero) {
    for (std::size_t i = 0; i < zero_bytes; i += 2) {
      const std::uint16_t z = plumb::F32ToF16(static_cast<float>(rng() % 16));
      std::memcpy(&s->zeros[i], &z, sizeof z);
    }
  }
  return WeightMatrix::Int4View(kind.int4, rows, cols, s->codes.data(), s->scales.data(),
                                kind.int4.scheme == Int4Scheme::kSymmetric ? nullptr : s->zeros.data(), s);
}

// One matrix alive at a time (they are up to 235 MB each): benchmarks of the same matrix run in a row.
const WeightMatrix& CachedMatrix(const Kind& kind, int rows, int cols) {
  static std::string key;
  static WeightMatrix matrix;
  const std::string wanted = kind.name + "/" + std::to_string(rows) + "x" + std::to_string(cols);
  if (key != wanted) {
    matrix = WeightMatrix{};
    matrix = MakeMatrix(kind, rows, cols);
    key = wanted;
  }
  return matrix;
}

// The streaming read at `threads` threads, best of 10, measured by each GEMV benchmark just before its own
// loop: on a shared machine the memory traffic of other processes changes from minute to minute, and MBU
// should compare two measurements taken under the same conditions.
double StreamBandwidth(int threads) {
  return plumb::roofline::MeasureReadBandwidth(threads, kProbeBytes, 10);
}

std::vector<float> RandomFloats(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& f : v) f = normal(rng);
  return v;
}

// Runs body once per benchmark iteration and returns the fastest iteration's seconds. The figures below are
// best-of-iterations, as the bandwidth probe's are (MeasureReadBandwidth: best of 5): on a shared machine
// the best run is the one least disturbed, and it is the one the ratio MBU should compare.
template <class Body>
double BestSeconds(benchmark::State& state, Body body) {
  double best = 1e30;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    body();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

void BM_StreamRead(benchmark::State& state, int threads) {
  plumb::roofline::ProbeBuffer(kProbeBytes);
  const double best = BestSeconds(
      state, [&] { benchmark::DoNotOptimize(plumb::roofline::StreamReadOnce(threads, kProbeBytes)); });
  state.counters["read_B/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * kProbeBytes, benchmark::Counter::kIsRate);
  state.counters["best_B/s"] = static_cast<double>(kProbeBytes) / best;
}

void BM_Gemv(benchmark::State& state, const Kind& kind, int rows, int cols, Isa isa, int threads) {
  if (!plumb::kernels::IsaSupported(isa)) {
    state.SkipWithError("ISA not supported on this CPU");
    return;
  }
  const WeightMatrix& W = CachedMatrix(kind, rows, cols);
  const double stream = StreamBandwidth(threads);
  plumb::kernels::SetIsa(isa);
  plumb::kernels::SetNumThreads(threads);
  const std::vector<float> x = RandomFloats(cols, 7);
  std::vector<float> y(rows);
  const double best = BestSeconds(state, [&] {
    plumb::kernels::Gemv(W, x.data(), y.data());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  });
  const double bytes = static_cast<double>(W.Bytes());
  state.counters["weight_B/s"] =
      benchmark::Counter(bytes * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["best_B/s"] = bytes / best;
  state.counters["MBU"] = bytes / best / stream;
  state.counters["stream_B/s"] = stream;
  plumb::kernels::SetNumThreads(0);
}

// FP32 sgemm's GFLOP/s per thread count, from its own benchmark (registered before the packed types'), for
// their vs_sgemm counter.
std::map<int, double>& SgemmRate() {
  static std::map<int, double> rate;
  return rate;
}

void BM_Gemm(benchmark::State& state, const Kind& kind, int rows, int cols, int tokens, int threads) {
  const WeightMatrix& W = CachedMatrix(kind, rows, cols);
  plumb::kernels::SetNumThreads(threads);
  const std::vector<float> X = RandomFloats(static_cast<std::size_t>(tokens) * cols, 9);
  std::vector<float> Y(static_cast<std::size_t>(tokens) * rows);
  const double best = BestSeconds(state, [&] {
    plumb::kernels::Gemm(X.data(), tokens, W, Y.data());
    benchmark::DoNotOptimize(Y.data());
    benchmark::ClobberMemory();
  });
  const double gflop = 2e-9 * tokens * rows * static_cast<double>(cols);
  state.counters["GFLOP/s"] =
      benchmark::Counter(gflop * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["best_GFLOP/s"] = gflop / best;
  if (kind.name == "F32") {
    SgemmRate()[threads] = gflop / best;
  } else if (SgemmRate().count(threads) != 0) {
    state.counters["vs_sgemm"] = gflop / best / SgemmRate()[threads];
  }
  plumb::kernels::SetNumThreads(0);
}

}  // namespace

int main(int argc, char** argv) {
  const int cores = omp_get_num_procs();
  const std::vector<int> thread_counts = cores > 1 ? std::vector<int>{1, cores} : std::vector<int>{1};
  static const std::vector<Kind> kinds = Kinds();
  for (int threads : thread_counts) {
    benchmark::RegisterBenchmark(("StreamRead/threads:" + std::to_string(threads)).c_str(), BM_StreamRead,
                                 threads)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
  const int shapes[][2] = {{4096, 14336}, {14336, 4096}, {8192, 2048}, {2048, 8192}, {128, 4096}};
  for (const auto& shape : shapes) {
    for (const Kind& kind : kinds) {
      for (Isa isa : {Isa::kAvx512, Isa::kAvx2, Isa::kScalar}) {
        for (int threads : thread_counts) {
          const std::string name = "Gemv/" + kind.name + "/" + std::to_string(shape[0]) + "x" +
                                   std::to_string(shape[1]) + "/" + plumb::kernels::IsaName(isa) +
                                   "/threads:" + std::to_string(threads);
          benchmark::RegisterBenchmark(name.c_str(), BM_Gemv, kind, shape[0], shape[1], isa, threads)
              ->Unit(benchmark::kMillisecond)
              ->UseRealTime();
        }
      }
    }
  }
  constexpr int kTokens = 512;
  for (const Kind& kind : kinds) {
    for (int threads : thread_counts) {
      const std::string name = "Gemm/" + kind.name + "/4096x14336/P:" + std::to_string(kTokens) +
                               "/threads:" + std::to_string(threads);
      benchmark::RegisterBenchmark(name.c_str(), BM_Gemm, kind, 4096, 14336, kTokens, threads)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
