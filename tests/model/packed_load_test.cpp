// Packed checkpoints (docs/formats.md "Packed checkpoints"): the tiny fixture model packed into every
// format by PackModel, written with the safetensors writer and ConfigToJson, and loaded back by Model::Load.
//   f32        bitwise the original's logits.
//   f16, bf16  the stored bits are F32ToF16 / F32ToBF16 of the original weights, and the decode logits are
//              bitwise those of the original run with its matrices rounded that way (RowDot of an F16 row
//              is defined as the Dot of its exactly converted values, so nothing else may change them).
//   fp8, int4  the stored codes, scales and zeros are exactly what QuantizeFp8 / QuantizeInt4 produce from
//              the original, the loaded matrices dequantize to the format's definition bit for bit, and the
//              logits are those of the FP32 model holding the dequantized weights (see the tolerance note).
// Plus config.json's quantization_config round trip and every loader error, each naming file and tensor.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include "plumb/formats/dtype.h"
#include "plumb/formats/microscaling.h"
#include "plumb/kernels/kernels.h"
#include "plumb/model/model.h"
#include "plumb/model/pack.h"
#include "support/errors.h"
#include "support/golden.h"

namespace plumb {
namespace {

namespace fs = std::filesystem;
using testing::ErrorOf;
using testing::ExpectMessageHas;

const std::string kTiny = testing::FixtureDir("tiny-llama");

class TempDir {
 public:
  explicit TempDir(const std::string& tag)
      : path_(fs::temp_directory_path() / ("plumb-packed-" + std::to_string(::getpid()) + "-" + tag)) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

PackFormat Format(const std::string& name, bool per_row = true) {
  std::optional<PackFormat> format = ParsePackFormat(name);
  if (!format) throw MakeError("test: no format ", name);
  format->fp8_per_row = per_row;
  return *format;
}

// Writes `checkpoint` as a Hugging Face directory.
void WriteCheckpoint(const fs::path& dir, PackedCheckpoint checkpoint) {
  WriteSafetensors((dir / "model.safetensors").string(), std::move(checkpoint.tensors));
  std::ofstream(dir / "config.json") << ConfigToJson(checkpoint.config);
}

Model PackAndLoad(const Model& source, const PackOptions& options, const TempDir& dir) {
  WriteCheckpoint(dir.path(), PackModel(source.config(), source.weights(), options));
  return Model::Load(dir.path().string());
}

// Logits of every prompt position (prefill) and then of 6 greedy decode steps.
struct Logits {
  std::vector<float> prefill, decode;
};
Logits RunLogits(Model& model) {
  const testing::GoldenFixture golden(kTiny);
  ContiguousKvCache cache = model.NewKvCache();
  Logits out;
  out.prefill = model.Prefill(golden.prompt_ids(), cache, PrefillLogits::kAllRows);
  int token = golden.prompt_ids().back();
  for (int step = 0; step < 6; ++step) {
    const std::span<const float> logits = model.Decode(token, cache);
    out.decode.insert(out.decode.end(), logits.begin(), logits.end());
    token = static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }
  return out;
}

bool BitwiseEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// golden.h's metric, against a float reference.
double MaxAbsErrOverMaxAbsRef(const std::vector<float>& actual, const std::vector<float>& ref) {
  return testing::MaxAbsErrOverMaxAbsRef(actual, std::vector<double>(ref.begin(), ref.end()));
}

// ||actual - ref|| / ||ref||.
double RelativeRmsError(const std::vector<float>& actual, const std::vector<float>& ref) {
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    diff += (static_cast<double>(actual[i]) - ref[i]) * (static_cast<double>(actual[i]) - ref[i]);
    norm += static_cast<double>(ref[i]) * ref[i];
  }
  return std::sqrt(diff / norm);
}

std::vector<float> RowsOf(const WeightMatrix& w) {
  std::vector<float> values(static_cast<std::size_t>(w.rows) * w.cols);
  for (int r = 0; r < w.rows; ++r)
    kernels::DequantizeRowOf(w, r, values.data() + static_cast<std::size_t>(r) * w.cols);
  return values;
}

// Every matrix of `weights` with its name, for side-by-side checks.
void ForEachMatrix(
    const ModelWeights& a, const ModelWeights& b,
    const std::function<void(const std::string&, const WeightMatrix&, const WeightMatrix&)>& fn) {
  fn("embed_tokens", a.token_embedding, b.token_embedding);
  for (std::size_t i = 0; i < a.layers.size(); ++i) {
    const LayerWeights &x = a.layers[i], &y = b.layers[i];
    const std::string p = "layers." + std::to_string(i) + ".";
    fn(p + "q_proj", x.wq, y.wq);
    fn(p + "k_proj", x.wk, y.wk);
    fn(p + "v_proj", x.wv, y.wv);
    fn(p + "o_proj", x.wo, y.wo);
    fn(p + "gate_proj", x.w_gate, y.w_gate);
    fn(p + "up_proj", x.w_up, y.w_up);
    fn(p + "down_proj", x.w_down, y.w_down);
  }
  if (a.lm_head.rows > 0) fn("lm_head", a.lm_head, b.lm_head);
}

// `model` with every matrix replaced by the FP32 matrix `f` makes of its values.
Model WithF32Matrices(const Model& model, const std::function<float(float)>& f) {
  ModelWeights weights = model.weights();
  auto convert = [&](WeightMatrix& w) {
    std::vector<float> values = RowsOf(w);
    for (float& v : values) v = f(v);
    w = WeightMatrix::FromF32(MatrixF32{w.rows, w.cols, std::move(values)});
  };
  convert(weights.token_embedding);
  for (LayerWeights& l : weights.layers) {
    for (WeightMatrix* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) convert(*w);
  }
  if (weights.lm_head.rows > 0) convert(weights.lm_head);
  return Model(model.config(), std::move(weights));
}

// The FP32 model holding exactly the values `packed`'s matrices dequantize to.
Model DequantizedTwin(const Model& packed) {
  return WithF32Matrices(packed, [](float v) { return v; });
}

TEST(PackFormats, NamesRoundTrip) {
  const std::vector<std::string>& names = PackFormatNames();
  // f32, f16, bf16, 2 fp8, 3 int4 schemes x 3 group sizes, 4 microscaled, fp8-block128
  EXPECT_EQ(names.size(), 19u);
  for (const std::string& name : names) {
    const std::optional<PackFormat> format = ParsePackFormat(name);
    ASSERT_TRUE(format) << name;
    EXPECT_EQ(format->Name(), name);
  }
  for (const char* bad :
       {"", "F16", "fp8", "int4-sym-g16", "int4-asym-g128 ", "q4_0", "mxfp8", "nvfp4-g32"}) {
    EXPECT_FALSE(ParsePackFormat(bad)) << bad;
  }
}

TEST(PackedConfig, QuantizationConfigRoundTrips) {
  const ModelConfig tiny = LoadConfigJson(kTiny + "/config.json");
  for (const std::string& name : PackFormatNames()) {
    for (bool per_row : {true, false}) {
      for (bool embedding_packed : {true, false}) {
        ModelConfig c = tiny;
        const PackFormat format = Format(name, per_row);
        if (format.IsQuantized()) c.packing = WeightPacking{format, embedding_packed};
        const ModelConfig back = ParseConfigJson(ConfigToJson(c), "config.json");
        SCOPED_TRACE(name);
        EXPECT_EQ(ConfigToJson(back), ConfigToJson(c));
        EXPECT_EQ(back.rms_norm_eps, c.rms_norm_eps);
        EXPECT_EQ(back.eos_token_ids, c.eos_token_ids);
        ASSERT_EQ(back.packing.has_value(), format.IsQuantized());
        if (!back.packing) continue;
        EXPECT_EQ(back.packing->format.Name(), name);
        EXPECT_EQ(back.packing->embedding_packed, embedding_packed);
        if (format.kind == PackKind::kFp8) {
          EXPECT_EQ(back.packing->format.fp8_per_row, per_row);
        }
      }
    }
  }
}

TEST(PackedConfig, UnknownOrInconsistentQuantizationConfigIsRejected) {
  std::ifstream in(kTiny + "/config.json");
  const nlohmann::json base = nlohmann::json::parse(in);
  auto error = [&](const nlohmann::json& q) {
    nlohmann::json root = base;
    root["quantization_config"] = q;
    return ErrorOf([&] { ParseConfigJson(root.dump(), "dir/config.json"); });
  };
  const nlohmann::json int4 = {{"quant_method", "plumb"}, {"format", "int4-asym-g128"},
                               {"embedding", "packed"},   {"bits", 4},
                               {"group_size", 128},       {"scheme", "asym"}};
  EXPECT_NO_THROW(ParseConfigJson(nlohmann::json(base).dump(), "x"));
  auto with = [&](const char* key, const nlohmann::json& value) {
    nlohmann::json q = int4;
    if (value.is_null()) {
      q.erase(key);
    } else {
      q[key] = value;
    }
    return q;
  };
  ExpectMessageHas(error(with("quant_method", "gptq")),
                   {"dir/config.json", "quantization_config.quant_method", "gptq"});
  ExpectMessageHas(error(with("quant_method", nullptr)),
                   {"dir/config.json", "quantization_config.quant_method"});
  ExpectMessageHas(error(with("format", "int4-sym-g16")), {"quantization_config.format", "int4-sym-g16"});
  ExpectMessageHas(error(with("format", "f16")), {"quantization_config.format", "f16"});
  ExpectMessageHas(error(with("group_size", 64)), {"quantization_config.group_size", "64"});
  ExpectMessageHas(error(with("bits", 8)), {"quantization_config.bits"});
  ExpectMessageHas(error(with("scheme", "sym")), {"quantization_config.scheme"});
  ExpectMessageHas(error(with("embedding", "bf16")), {"quantization_config.embedding", "bf16"});
  ExpectMessageHas(error(with("desc_act", true)), {"quantization_config.desc_act"});
  ExpectMessageHas(error("int4"), {"quantization_config", "object"});
  const nlohmann::json fp8 = {
      {"quant_method", "plumb"}, {"format", "fp8-e4m3"}, {"embedding", "packed"}, {"weight_scale", "block"}};
  ExpectMessageHas(error(fp8), {"quantization_config.weight_scale", "block"});
}

TEST(PackedModel, F32PackGivesBitwiseTheOriginalLogits) {
  Model original = Model::Load(kTiny);
  const TempDir dir("f32");
  Model packed = PackAndLoad(original, {Format("f32"), false, 1}, dir);
  const Logits expected = RunLogits(original), actual = RunLogits(packed);
  EXPECT_TRUE(BitwiseEqual(actual.prefill, expected.prefill));
  EXPECT_TRUE(BitwiseEqual(actual.decode, expected.decode));
  EXPECT_EQ(packed.config().packing.has_value(), false);
}

// RepackModel packs in memory: the same model, bit for bit, as writing the checkpoint and loading it.
TEST(PackedModel, RepackingInMemoryIsLoadingTheWrittenCheckpoint) {
  const Model original = Model::Load(kTiny);
  for (const char* name : {"f16", "fp8-e4m3", "int4-asym-g32"}) {
    const PackOptions options{Format(name), false, 1};
    const TempDir dir(std::string("repack-") + name);
    Model written = PackAndLoad(original, options, dir);
    Model in_memory = RepackModel(original, options);
    EXPECT_EQ(in_memory.config().packing.has_value(), written.config().packing.has_value()) << name;
    const Logits expected = RunLogits(written), actual = RunLogits(in_memory);
    EXPECT_TRUE(BitwiseEqual(actual.prefill, expected.prefill)) << name;
    EXPECT_TRUE(BitwiseEqual(actual.decode, expected.decode)) << name;
  }
}

// The untied tiny-llama and the tied, biased tiny-qwen2: a tied head must not be written, biases must.
TEST(PackedModel, TiedHeadAndBiasesSurviveAnF32Pack) {
  Model original = Model::Load(testing::FixtureDir("tiny-qwen2"));
  ASSERT_TRUE(original.config().tie_word_embeddings);
  const TempDir dir("qwen2");
  Model packed = PackAndLoad(original, {Format("f32"), false, 1}, dir);
  EXPECT_FALSE(SafetensorsFile::Open((dir.path() / "model.safetensors").string()).Contains("lm_head.weight"));
  EXPECT_EQ(packed.weights().lm_head.rows, 0);
  ASSERT_FALSE(packed.weights().layers[0].bq.empty());
  const std::vector<int> prompt = {1, 5, 9, 2};
  ContiguousKvCache a = original.NewKvCache(), b = packed.NewKvCache();
  EXPECT_TRUE(BitwiseEqual(packed.Prefill(prompt, b, PrefillLogits::kAllRows),
                           original.Prefill(prompt, a, PrefillLogits::kAllRows)));
}

// A Qwen3-MoE packs with its QK-norms, every expert in the format and the router kept F32 (its logits choose
// the experts): an F32 pack is the model bit for bit; an MXFP4 pack (gpt-oss's expert format) stores each
// expert microscaled and still runs.
TEST(PackedModel, MoeExpertsPackAndTheRouterStaysF32) {
  Model original = Model::Load(testing::FixtureDir("tiny-qwen3moe"));
  const std::vector<int> prompt = {1, 93, 12, 240, 57};
  const TempDir dir("qwen3moe");
  Model f32 = PackAndLoad(original, {Format("f32"), false, 1}, dir);
  EXPECT_EQ(f32.config().num_experts, 8);
  ContiguousKvCache a = original.NewKvCache(), b = f32.NewKvCache();
  EXPECT_TRUE(BitwiseEqual(f32.Prefill(prompt, b, PrefillLogits::kAllRows),
                           original.Prefill(prompt, a, PrefillLogits::kAllRows)));
  const TempDir mx_dir("qwen3moe-mxfp4");
  Model mx = PackAndLoad(original, {Format("mxfp4"), true, 1}, mx_dir);
  const LayerWeights& layer = mx.weights().layers[0];
  ASSERT_EQ(layer.experts.size(), 8u);
  EXPECT_EQ(layer.router.type, GgmlType::F32);
  EXPECT_NE(layer.experts[5].w_up.mx_scales, nullptr);  // stored microscaled, read in place
  EXPECT_FALSE(layer.q_norm.empty());
  ContiguousKvCache c = mx.NewKvCache();
  const std::vector<float> logits = mx.Prefill(prompt, c, PrefillLogits::kAllRows);
  const std::vector<float> exact =
      original.Prefill(prompt, a = original.NewKvCache(), PrefillLogits::kAllRows);
  // MXFP4 moves the logits (4-bit weights; the exact layout is the F32 pack's check above), but it is the
  // same model: a lost expert or QK-norm moves them by the order of the logits themselves.
  EXPECT_LT(MaxAbsErrOverMaxAbsRef(logits, exact), 0.3);  // measured 0.19
  // Block-scaled FP8 (DeepSeek-V3's expert format) through the same path: each expert its own blocks.
  const TempDir block_dir("qwen3moe-fp8-block128");
  Model block = PackAndLoad(original, {Format("fp8-block128"), false, 1}, block_dir);
  const LayerWeights& block_layer = block.weights().layers[0];
  EXPECT_EQ(block_layer.router.type, GgmlType::F32);
  EXPECT_TRUE(block_layer.experts[5].w_down.Is(kernels::kBlockFp8Format));
  ContiguousKvCache d = block.NewKvCache();
  const std::vector<float> block_logits = block.Prefill(prompt, d, PrefillLogits::kAllRows);
  EXPECT_LT(MaxAbsErrOverMaxAbsRef(block_logits, exact), 0.2);  // measured 0.11
}

class HalfPack : public ::testing::TestWithParam<const char*> {};

TEST_P(HalfPack, StoredBitsAndLogitsAreThoseOfTheRoundedOriginal) {
  const bool bf16 = std::string(GetParam()) == "bf16";
  Model original = Model::Load(kTiny);
  const TempDir dir(GetParam());
  Model packed = PackAndLoad(original, {Format(GetParam()), false, 1}, dir);
  // Every element of every matrix: the stored bits are the rounding of the original value.
  ForEachMatrix(
      original.weights(), packed.weights(),
      [&](const std::string& name, const WeightMatrix& o, const WeightMatrix& p) {
        ASSERT_EQ(p.type, bf16 ? GgmlType::BF16 : GgmlType::F16) << name;  // kept as stored, not expanded
        const std::vector<float> values = RowsOf(o);
        for (int r = 0; r < p.rows; ++r) {
          for (int c = 0; c < p.cols; ++c) {
            std::uint16_t stored;
            std::memcpy(&stored, p.Row(r) + 2 * c, 2);
            const float v = values[static_cast<std::size_t>(r) * p.cols + c];
            ASSERT_EQ(stored, bf16 ? F32ToBF16(v) : F32ToF16(v)) << name << " [" << r << ", " << c << "]";
          }
        }
      });
  Model rounded = WithF32Matrices(
      original, [&](float v) { return bf16 ? BF16ToF32(F32ToBF16(v)) : F16ToF32(F32ToF16(v)); });
  const Logits expected = RunLogits(rounded), actual = RunLogits(packed);
  EXPECT_TRUE(BitwiseEqual(actual.decode, expected.decode));
  // Prefill's GEMM multiplies the F16/BF16 matrix as FP32 tiles of 64 rows and the FP32 matrix in per-thread
  // slices: OpenBLAS may order the sums of the two differently, so prefill agrees to float rounding only
  // (dots of at most 160 terms: well under 1e-5 of the largest logit).
  EXPECT_LE(MaxAbsErrOverMaxAbsRef(actual.prefill, expected.prefill), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Formats, HalfPack, ::testing::Values("f16", "bf16"));

// FP8 and INT4, each format, per-channel and per-tensor FP8 scales, embedding packed or kept.
struct QuantCase {
  std::string format;
  bool per_row;
  bool keep_embedding;
};

void PrintTo(const QuantCase& c, std::ostream* out) {
  *out << c.format << (c.per_row ? "" : " per-tensor") << (c.keep_embedding ? " keep-embedding" : "");
}

class QuantizedPack : public ::testing::TestWithParam<QuantCase> {};

TEST_P(QuantizedPack, StoredArraysAreTheQuantizersAndLogitsThoseOfTheDequantizedWeights) {
  const QuantCase& q = GetParam();
  const PackFormat format = Format(q.format, q.per_row);
  Model original = Model::Load(kTiny);
  const TempDir dir(q.format + (q.per_row ? "-c" : "-t") + (q.keep_embedding ? "-k" : ""));
  Model packed = PackAndLoad(original, {format, q.keep_embedding, 3}, dir);
  ASSERT_TRUE(packed.config().packing);
  EXPECT_EQ(packed.config().packing->format.Name(), q.format);

  ForEachMatrix(
      original.weights(), packed.weights(),
      [&](const std::string& name, const WeightMatrix& o, const WeightMatrix& p) {
        SCOPED_TRACE(name);
        const std::vector<float> values = RowsOf(o);
        const bool embedding = name == "embed_tokens" || name == "lm_head";
        if (embedding && q.keep_embedding) {
          ASSERT_TRUE(p.Is(kernels::kGgmlFormat));
          EXPECT_EQ(p.type, GgmlType::F16);
          return;
        }
        std::vector<float> expected(values.size());
        if (format.kind == PackKind::kFp8) {
          ASSERT_TRUE(p.Is(kernels::kFp8Format));
          const Fp8Matrix ref = QuantizeFp8(values.data(), o.rows, o.cols, format.fp8, format.fp8_per_row);
          ASSERT_EQ(p.fp8_per_row, format.fp8_per_row);
          ASSERT_EQ(0, std::memcmp(p.data, ref.codes.data(), ref.codes.size()));
          ASSERT_EQ(0, std::memcmp(p.fp8_scales, ref.scales.data(), ref.scales.size() * sizeof(float)));
          // The definition (docs/formats.md "FP8"): element = decoded code · scale, one FP32 rounding.
          for (std::size_t i = 0; i < expected.size(); ++i) {
            const std::size_t row = i / static_cast<std::size_t>(o.cols);
            expected[i] = Fp8ToF32(ref.codes[i], format.fp8) * ref.scales[format.fp8_per_row ? row : 0];
          }
        } else if (format.kind == PackKind::kMicroscaled) {
          ASSERT_TRUE(p.Is(kernels::kMicroscaledFormat));
          const MicroscaledMatrix ref = QuantizeMicroscaled(values.data(), o.rows, o.cols, format.mx);
          ASSERT_EQ(p.mx_scheme, format.mx);
          ASSERT_EQ(p.mx_tensor_scale, ref.tensor_scale);
          ASSERT_EQ(0, std::memcmp(p.data, ref.codes.data(), ref.codes.size()));
          ASSERT_EQ(0, std::memcmp(p.mx_scales, ref.scales.data(), ref.scales.size()));
          // The definition (docs/formats.md "Microscaled formats"): element = code's value · block scale,
          // exact; the row's value as a vector multiplies that by NVFP4's tensor scale, one rounding.
          const std::size_t row_bytes = MicroscaledRowBytes(format.mx, o.cols);
          const std::size_t blocks = static_cast<std::size_t>(MicroscaledBlocks(format.mx, o.cols));
          for (int r = 0; r < o.rows; ++r) {
            float* row = expected.data() + static_cast<std::size_t>(r) * o.cols;
            DecodeMicroscaledRow(format.mx, ref.codes.data() + r * row_bytes, ref.scales.data() + r * blocks,
                                 0, o.cols, row);
            for (int c = 0; c < o.cols; ++c) row[c] = row[c] * ref.tensor_scale;
          }
        } else if (format.kind == PackKind::kBlockFp8) {
          ASSERT_TRUE(p.Is(kernels::kBlockFp8Format));
          const BlockFp8Matrix ref = QuantizeBlockFp8(values.data(), o.rows, o.cols);
          ASSERT_EQ(ref.scales.size(),
                    static_cast<std::size_t>(Fp8BlockCount(o.rows) * Fp8BlockCount(o.cols)));
          ASSERT_EQ(0, std::memcmp(p.data, ref.codes.data(), ref.codes.size()));
          ASSERT_EQ(0, std::memcmp(p.fp8_block_scales, ref.scales.data(), ref.scales.size() * sizeof(float)));
          // The definition (docs/formats.md "Block-scaled FP8 (128×128)"): element = decoded code ·
          // scales[r / 128][c / 128], one FP32 rounding.
          for (int r = 0; r < o.rows; ++r) {
            for (int c = 0; c < o.cols; ++c) {
              const std::size_t i = static_cast<std::size_t>(r) * o.cols + c;
              expected[i] = Fp8ToF32(ref.codes[i], Fp8Format::kE4M3) *
                            ref.scales[static_cast<std::size_t>(r / 128) * Fp8BlockCount(o.cols) + c / 128];
            }
          }
        } else {
          ASSERT_TRUE(p.Is(kernels::kInt4Format));
          const Int4Matrix ref = QuantizeInt4(values.data(), o.rows, o.cols, format.int4);
          ASSERT_EQ(0, std::memcmp(p.data, ref.codes.data(), ref.codes.size()));
          ASSERT_EQ(0, std::memcmp(p.int4_scales, ref.scales.data(), ref.scales.size() * 2));
          if (!ref.zeros.empty()) {
            ASSERT_EQ(0, std::memcmp(p.int4_zeros, ref.zeros.data(), ref.zeros.size()));
          }
          const int groups = Int4Groups(o.cols, format.int4.group_size);
          const std::size_t zero_row = Int4ZeroRowBytes(format.int4, o.cols);
          for (int r = 0; r < o.rows; ++r) {
            DequantizeInt4Row(format.int4, ref.codes.data() + r * Int4RowBytes(o.cols),
                              ref.scales.data() + static_cast<std::size_t>(r) * groups,
                              ref.zeros.empty() ? nullptr : ref.zeros.data() + r * zero_row, o.cols,
                              expected.data() + static_cast<std::size_t>(r) * o.cols);
          }
        }
        EXPECT_TRUE(BitwiseEqual(RowsOf(p), expected));
      });

  // INT4's and block-scaled FP8's GEMV are defined as Dot(dequantized row, x), the FP32 model's exactly;
  // FP8's as scale · Dot(decoded row, x), which differs from Dot(decoded · scale, x) by the rounding of each
  // product: a few float ulps per projection, so 1e-5 of the largest logit is ample and still far below any
  // quantization effect (the formats' own steps are 2^-4 relative and more).
  Model twin = DequantizedTwin(packed);
  const Logits expected = RunLogits(twin), actual = RunLogits(packed);
  const bool scaled_dot = format.kind == PackKind::kFp8 ||
                          (format.kind == PackKind::kMicroscaled && format.mx == MicroscalingScheme::kNvfp4);
  if (!scaled_dot) {
    EXPECT_TRUE(BitwiseEqual(actual.decode, expected.decode));
  } else {
    EXPECT_LE(MaxAbsErrOverMaxAbsRef(actual.decode, expected.decode), 1e-5);
  }
  EXPECT_LE(MaxAbsErrOverMaxAbsRef(actual.prefill, expected.prefill), 1e-5);

  // Against the unquantized original, a bound from the format's step: the stored weights differ from the
  // original by the format's rounding, whose size relative to the weights, eps = ||W_q - W|| / ||W|| over
  // every packed matrix, follows from the step (E4M3: relative step 2^-3, rounding error within ±2^-4 of
  // each weight, so eps ≲ 2^-4/√3 ≈ 0.036 (0.025 measured); E5M2 twice that; INT4: 15 steps across a
  // group's range, error within ±half a step, so eps ≈ 0.1 on Gaussian-like weights; checked below too). Each
  // of this model's sequential projections (Q/K/V, O, gate/up, down per layer, then the head: 9 here) adds
  // relative noise of about eps to the residual stream, and the noise adds in quadrature: about 3·eps in RMS.
  // The bound is 5·eps on the RMS logit error relative to the RMS logit, which honest rounding meets and a
  // wrong scale, zero point or nibble order (errors of order 1) does not.
  double diff = 0, norm = 0;
  ForEachMatrix(original.weights(), packed.weights(),
                [&](const std::string& name, const WeightMatrix& o, const WeightMatrix& p) {
                  if (q.keep_embedding && (name == "embed_tokens" || name == "lm_head")) return;  // F16
                  const std::vector<float> a = RowsOf(o), b = RowsOf(p);
                  for (std::size_t i = 0; i < a.size(); ++i) {
                    diff += (static_cast<double>(b[i]) - a[i]) * (static_cast<double>(b[i]) - a[i]);
                    norm += static_cast<double>(a[i]) * a[i];
                  }
                });
  const double eps = std::sqrt(diff / norm);
  const Logits reference = RunLogits(original);
  const double error = RelativeRmsError(actual.prefill, reference.prefill);
  EXPECT_LE(error, 5 * eps) << "eps = " << eps;
  // FP4 (MXFP4, NVFP4): 1 mantissa bit, a relative step up to 2^-1 below the block's largest values, which
  // the OCP scale rule can also saturate: eps ≈ 0.1 on these weights, like INT4's. MXFP8: FP8's.
  const bool fp4 = format.kind == PackKind::kMicroscaled && MicroscalingElementIsFp4(format.mx);
  const bool e5m2 = format.kind == PackKind::kMicroscaled ? format.mx == MicroscalingScheme::kMxfp8E5M2
                                                          : format.fp8 == Fp8Format::kE5M2;
  EXPECT_LE(eps, format.kind == PackKind::kInt4 || fp4 ? 0.2 : e5m2 ? 0.1 : 0.05);
  RecordProperty("weight_eps", std::to_string(eps));
  RecordProperty("logit_rms_error", std::to_string(error));
}

std::vector<QuantCase> QuantCases() {
  std::vector<QuantCase> cases;
  for (const std::string& name : PackFormatNames()) {
    const PackFormat format = Format(name);
    if (!format.IsQuantized()) continue;
    cases.push_back({name, true, false});
    if (format.kind == PackKind::kFp8) cases.push_back({name, false, false});
  }
  cases.push_back({"fp8-e4m3", true, true});
  cases.push_back({"int4-sym-g32", true, true});
  cases.push_back({"nvfp4", true, true});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Formats, QuantizedPack, ::testing::ValuesIn(QuantCases()),
                         [](const auto& test_info) {
                           std::string name = test_info.param.format +
                                              (test_info.param.per_row ? "" : "_tensor") +
                                              (test_info.param.keep_embedding ? "_keep_embedding" : "");
                           for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return name;
                         });

// ---------------------------------------------------------------------------------------------------------
// Loader errors: a packed checkpoint that disagrees with its config names the file and the tensor.

class PackedLoadErrors : public ::testing::Test {
 protected:
  // The tiny model packed as `format`, with `edit` applied to its tensors before writing; Load's message.
  std::string LoadError(const std::string& format,
                        const std::function<void(std::vector<TensorToWrite>&)>& edit, bool per_row = true) {
    const TempDir dir("errors");
    PackedCheckpoint checkpoint =
        PackModel(source_.config(), source_.weights(), {Format(format, per_row), false, 1});
    edit(checkpoint.tensors);
    WriteCheckpoint(dir.path(), std::move(checkpoint));
    return ErrorOf([&] { Model::Load(dir.path().string()); });
  }
  static TensorToWrite& Find(std::vector<TensorToWrite>& tensors, const std::string& name) {
    for (TensorToWrite& t : tensors) {
      if (t.name == name) return t;
    }
    throw MakeError("test: no tensor ", name);
  }
  static void Erase(std::vector<TensorToWrite>& tensors, const std::string& name) {
    std::erase_if(tensors, [&](const TensorToWrite& t) { return t.name == name; });
  }

  Model source_ = Model::Load(kTiny);
};

TEST_F(PackedLoadErrors, Fp8) {
  const std::string w = "model.layers.1.mlp.up_proj.weight";
  ExpectMessageHas(LoadError("fp8-e4m3", [&](auto& t) { Find(t, w).dtype = DType::F8_E5M2; }),
                   {"model.safetensors", w, "F8_E5M2", "expected F8_E4M3"});
  ExpectMessageHas(LoadError("fp8-e4m3", [&](auto& t) { Erase(t, w + "_scale"); }),
                   {"missing tensor", w + "_scale"});
  ExpectMessageHas(LoadError("fp8-e4m3",
                             [&](auto& t) {
                               TensorToWrite& s = Find(t, w + "_scale");
                               s.shape = {s.shape[0] - 1};
                               s.bytes.resize(s.bytes.size() - 4);
                             }),
                   {"model.safetensors", w + "_scale", "[159]", "expected [160]"});
  ExpectMessageHas(LoadError("fp8-e5m2", [&](auto& t) { Find(t, w + "_scale").dtype = DType::I32; }),
                   {w + "_scale", "I32", "expected F32"});
  // Per-tensor config, per-channel scales.
  ExpectMessageHas(LoadError(
                       "fp8-e4m3",
                       [&](auto& t) {
                         TensorToWrite& s = Find(t, w + "_scale");
                         s.shape = {2};
                         s.bytes.resize(8);
                       },
                       false),
                   {w + "_scale", "[2]", "[] or [1]"});
  // A plain matrix where FP8 was promised.
  ExpectMessageHas(LoadError("fp8-e4m3",
                             [&](auto& t) {
                               TensorToWrite& m = Find(t, w);
                               m.dtype = DType::F16;
                               m.shape = {80, 64};
                             }),
                   {w, "F16", "expected F8_E4M3"});
}

TEST_F(PackedLoadErrors, Int4) {
  const std::string p = "model.layers.0.self_attn.o_proj";
  ExpectMessageHas(LoadError("int4-asym-g32",
                             [&](auto& t) {
                               TensorToWrite& q = Find(t, p + ".qweight");
                               q.shape = {q.shape[0] / 2, q.shape[1] * 2};
                             }),
                   {"model.safetensors", p + ".qweight", "[32, 64]", "expected [64, 32]"});
  ExpectMessageHas(LoadError("int4-asym-g32",
                             [&](auto& t) {
                               TensorToWrite& s = Find(t, p + ".scales");
                               s.shape = {s.shape[1], s.shape[0]};
                             }),
                   {p + ".scales", "[2, 64]", "expected [64, 2]"});
  ExpectMessageHas(LoadError("int4-asym-g32", [&](auto& t) { Erase(t, p + ".qzeros"); }),
                   {"missing tensor", p + ".qzeros"});
  ExpectMessageHas(
      LoadError("int4-asym-f16zero-g64", [&](auto& t) { Find(t, p + ".qzeros").dtype = DType::I16; }),
      {p + ".qzeros", "I16", "expected F16"});
  ExpectMessageHas(
      LoadError("int4-sym-g32",
                [&](auto& t) {
                  t.push_back({p + ".qzeros", DType::U8, {64, 1}, std::vector<std::uint8_t>(64)});
                }),
      {p + ".qzeros", "symmetric"});
  ExpectMessageHas(LoadError("int4-sym-g128", [&](auto& t) { Erase(t, "model.embed_tokens.scales"); }),
                   {"missing tensor", "model.embed_tokens.scales"});
}

TEST_F(PackedLoadErrors, Microscaled) {
  const std::string w = "model.layers.0.self_attn.o_proj.weight";
  ExpectMessageHas(LoadError("mxfp4", [&](auto& t) { Find(t, w + "_scale").dtype = DType::F8_E4M3; }),
                   {"model.safetensors", w + "_scale", "F8_E4M3", "U8"});
  ExpectMessageHas(LoadError("mxfp8-e4m3",
                             [&](auto& t) {
                               TensorToWrite& codes = Find(t, w);
                               codes.shape[1] -= 1;
                               codes.bytes.resize(static_cast<std::size_t>(codes.shape[0] * codes.shape[1]));
                             }),
                   {w, "shape"});
  ExpectMessageHas(LoadError("nvfp4", [&](auto& t) { Erase(t, w + "_scale_2"); }),
                   {"missing tensor", w + "_scale_2"});
  ExpectMessageHas(LoadError("nvfp4",
                             [&](auto& t) {
                               TensorToWrite& s = Find(t, w + "_scale_2");
                               const float zero = 0.0f;
                               std::memcpy(s.bytes.data(), &zero, sizeof zero);
                             }),
                   {w + "_scale_2", "positive finite"});
  ExpectMessageHas(LoadError("mxfp4",
                             [&](auto& t) {
                               t.push_back({w + "_scale_2", DType::F32, {}, std::vector<std::uint8_t>(4)});
                             }),
                   {w + "_scale_2", "mxfp4 has no tensor scale"});
}

TEST_F(PackedLoadErrors, BlockFp8) {
  const std::string w = "model.layers.0.mlp.down_proj.weight";  // [64, 160]: scales [1, 2]
  ExpectMessageHas(LoadError("fp8-block128", [&](auto& t) { Erase(t, w + "_scale_inv"); }),
                   {"missing tensor", w + "_scale_inv"});
  // Transposed (the grid of [cols/128][rows/128]) or one scale per row: both refused by shape.
  ExpectMessageHas(LoadError("fp8-block128",
                             [&](auto& t) {
                               TensorToWrite& s = Find(t, w + "_scale_inv");
                               s.shape = {s.shape[1], s.shape[0]};
                             }),
                   {"model.safetensors", w + "_scale_inv", "[2, 1]", "expected [1, 2]"});
  ExpectMessageHas(LoadError("fp8-block128",
                             [&](auto& t) {
                               TensorToWrite& s = Find(t, w + "_scale_inv");
                               s.shape = {64};
                               s.bytes.resize(64 * 4);
                             }),
                   {w + "_scale_inv", "[64]", "expected [1, 2]"});
  ExpectMessageHas(LoadError("fp8-block128", [&](auto& t) { Find(t, w + "_scale_inv").dtype = DType::I32; }),
                   {w + "_scale_inv", "I32", "expected F32"});
  ExpectMessageHas(LoadError("fp8-block128", [&](auto& t) { Find(t, w).dtype = DType::F8_E5M2; }),
                   {w, "F8_E5M2", "expected F8_E4M3"});
}

TEST_F(PackedLoadErrors, PackedTensorsWithoutQuantizationConfig) {
  const TempDir dir("noconfig");
  PackedCheckpoint checkpoint =
      PackModel(source_.config(), source_.weights(), {Format("fp8-e4m3"), false, 1});
  checkpoint.config.packing.reset();
  WriteCheckpoint(dir.path(), std::move(checkpoint));
  ExpectMessageHas(ErrorOf([&] { Model::Load(dir.path().string()); }),
                   {"model.embed_tokens.weight", "F8_E4M3", "quantization_config"});
}

TEST(PackedModel, KeepEmbeddingNeedsAQuantizedFormat) {
  const Model source = Model::Load(kTiny);
  ExpectMessageHas(ErrorOf([&] {
                     PackModel(source.config(), source.weights(), {Format("bf16"), true, 1});
                   }),
                   {"--keep-embedding", "bf16"});
}

TEST(PackedModel, ThreadCountDoesNotChangeTheBytes) {
  const Model source = Model::Load(kTiny);
  for (const char* name : {"int4-asym-g32", "fp8-e5m2"}) {
    const auto one =
        SerializeSafetensors(PackModel(source.config(), source.weights(), {Format(name), false, 1}).tensors);
    const auto four =
        SerializeSafetensors(PackModel(source.config(), source.weights(), {Format(name), false, 4}).tensors);
    EXPECT_TRUE(one == four) << name;
  }
}

}  // namespace
}  // namespace plumb
