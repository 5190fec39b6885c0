// The KV hand-off file (kv/kv_handoff.h, docs/kv-cache.md "KV hand-off format"): a sequence exported after
// some tokens and imported into a fresh cache of either layout continues with logits bitwise equal to the
// uninterrupted run, for every KV dtype; every malformed or mismatched file is refused with one line naming
// the file and the field, and every prefix of a file is refused without a crash.
#include "plumb/kv/kv_handoff.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "plumb/core/error.h"
#include "plumb/formats/safetensors.h"
#include "plumb/kv/contiguous_kv_cache.h"
#include "plumb/kv/paged_kv_cache.h"
#include "plumb/model/model.h"
#include "support/golden.h"

namespace plumb {
namespace {

constexpr KvDtype kAllDtypes[] = {KvDtype::kF32, KvDtype::kF16, KvDtype::kBF16, KvDtype::kFp8E4M3,
                                  KvDtype::kFp8E5M2};
constexpr int kContext = 32;

// Scales that are not powers of two, so that a decode and re-encode would not give the stored codes back
// for free: the import has to copy bytes.
std::vector<float> Scales(const ModelConfig& c, KvDtype dtype, float base) {
  if (!IsFp8(dtype)) return {};
  std::vector<float> s;
  for (int i = 0; i < c.num_layers * c.num_kv_heads; ++i) s.push_back(base + 0.0371f * static_cast<float>(i));
  return s;
}

// One sequence in either layout; the paged one in blocks of 4 positions, so a sequence spans several.
struct Cache {
  std::unique_ptr<ContiguousKvCache> contiguous;
  std::unique_ptr<PagedKvCache> paged;
  KvSequence* seq = nullptr;

  Cache(const ModelConfig& c, KvDtype dtype, bool use_paged) {
    std::vector<float> ks = Scales(c, dtype, 0.75f), vs = Scales(c, dtype, 1.3f);
    if (use_paged) {
      PagedKvConfig pc;
      pc.n_layers = c.num_layers;
      pc.n_kv_heads = c.num_kv_heads;
      pc.head_dim = c.head_dim;
      pc.block_size = 4;
      pc.num_blocks = 2 * kContext / 4;
      pc.max_positions = kContext;
      pc.dtype = dtype;
      pc.k_scales = ks;
      pc.v_scales = vs;
      paged = std::make_unique<PagedKvCache>(pc);
      // Another sequence first, so this one's blocks are not 0, 1, 2, ... in order.
      const SeqId other = paged->Add();
      paged->Sequence(other).Reserve(5);
      seq = &paged->Sequence(paged->Add());
    } else {
      contiguous = std::make_unique<ContiguousKvCache>(c.num_layers, c.num_kv_heads, kContext, c.head_dim,
                                                       dtype, ks, vs);
      seq = contiguous.get();
    }
  }
};

KvHandoffModel IdentityOf(const ModelConfig& c) {
  return {c.model_type, c.num_layers,  c.num_heads,  c.num_kv_heads,
          c.head_dim,   c.hidden_size, c.vocab_size, std::string(64, 'a')};
}

std::vector<int> Tokens(const ModelConfig& c, int n) {
  std::vector<int> t;
  for (int i = 0; i < n; ++i) t.push_back((7 * i + 3) % c.vocab_size);
  return t;
}

bool BitwiseEqual(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
}

void CheckContinuation(const std::string& model_path) {
  Model model = Model::Load(model_path);
  const ModelConfig& c = model.config();
  constexpr int kPrompt = 5, kBefore = 3, kAfter = 4;
  const std::vector<int> tokens = Tokens(c, kPrompt + kBefore + kAfter);
  const std::span<const int> prompt(tokens.data(), kPrompt);
  for (const KvDtype dtype : kAllDtypes) {
    for (const bool from_paged : {false, true}) {
      for (const bool to_paged : {false, true}) {
        SCOPED_TRACE(std::string(KvDtypeName(dtype)) + (from_paged ? " paged" : " contiguous") + " -> " +
                     (to_paged ? "paged" : "contiguous"));
        // Uninterrupted: prompt, then every token decoded, remembering the logits after kBefore.
        Cache whole(c, dtype, from_paged);
        model.Prefill(prompt, *whole.seq);
        std::vector<std::vector<float>> expected;
        for (int i = kPrompt; i < kPrompt + kBefore + kAfter; ++i) {
          const std::span<const float> logits = model.Decode(tokens[i], *whole.seq);
          if (i >= kPrompt + kBefore) expected.emplace_back(logits.begin(), logits.end());
        }
        // Interrupted after kBefore decodes: exported, written out, read back into a fresh cache.
        Cache first(c, dtype, from_paged);
        model.Prefill(prompt, *first.seq);
        for (int i = kPrompt; i < kPrompt + kBefore; ++i) model.Decode(tokens[i], *first.seq);
        const std::span<const int> held(tokens.data(), kPrompt + kBefore);
        const std::vector<std::uint8_t> bytes = SerializeKvHandoff(ExportKv(*first.seq, held, IdentityOf(c)));
        const KvHandoff handoff = ParseKvHandoff(bytes, "handoff.safetensors");
        CheckKvHandoffModel(handoff, IdentityOf(c), "handoff.safetensors");
        EXPECT_EQ(handoff.tokens, std::vector<int>(held.begin(), held.end()));
        Cache second(c, dtype, to_paged);
        ImportKv(handoff, *second.seq, "handoff.safetensors");
        ASSERT_EQ(second.seq->length(), kPrompt + kBefore);
        // The imported cache holds the exported bytes: exporting it again gives the same file.
        EXPECT_EQ(SerializeKvHandoff(ExportKv(*second.seq, held, IdentityOf(c))), bytes);
        for (int i = 0; i < kAfter; ++i) {
          const std::span<const float> logits = model.Decode(tokens[kPrompt + kBefore + i], *second.seq);
          EXPECT_TRUE(BitwiseEqual(logits, expected[static_cast<std::size_t>(i)])) << "step " << i;
        }
      }
    }
  }
}

TEST(KvHandoff, ContinuesTinyLlamaBitwiseForEveryDtypeAndLayout) {
  CheckContinuation(testing::FixtureDir("tiny-llama/model.q4_1.gguf"));
}

TEST(KvHandoff, ContinuesTinyGemma3BitwiseForEveryDtypeAndLayout) {
  CheckContinuation(testing::FixtureDir("tiny-gemma3/model.q.gguf"));
}

// A small FP8 hand-off built by hand: 2 layers, 1 KV head, head_dim 2, 3 positions.
KvHandoff SmallHandoff() {
  KvHandoff h;
  h.model = {"llama", 2, 2, 1, 2, 4, 10, std::string(64, 'b')};
  h.dtype = KvDtype::kFp8E4M3;
  h.tokens = {1, 2, 5};
  h.next_token = 4;
  h.k_scales = {0.5f, 2.0f};
  h.v_scales = {1.0f, 3.0f};
  for (int l = 0; l < 2; ++l) {
    h.keys.push_back({1, 2, 3, 4, 5, 6});
    h.values.push_back({7, 8, 9, 10, 11, 12});
  }
  return h;
}

// The file's bytes with one metadata field replaced (or removed, for an empty value).
std::vector<std::uint8_t> WithMetadata(const std::vector<std::uint8_t>& bytes, const std::string& key,
                                       const std::string& value) {
  const SafetensorsFile file = SafetensorsFile::FromBytes(bytes, "x");
  std::map<std::string, std::string> meta = file.metadata();
  if (value.empty()) {
    meta.erase(key);
  } else {
    meta[key] = value;
  }
  std::vector<TensorToWrite> tensors;
  for (const TensorInfo& t : file.tensors()) {
    const std::span<const std::uint8_t> b = file.Bytes(t.name);
    tensors.push_back({t.name, t.dtype, t.shape, {b.begin(), b.end()}});
  }
  return SerializeSafetensors(std::move(tensors), meta);
}

// The refusal's message: one line naming the file and the field.
void ExpectRefused(const std::function<void()>& action, const std::string& field) {
  try {
    action();
    ADD_FAILURE() << "accepted; expected a refusal naming " << field;
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("handoff.safetensors"), std::string::npos) << message;
    EXPECT_NE(message.find(field), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

TEST(KvHandoff, RoundTripsEveryFieldOfASmallFile) {
  const KvHandoff h = SmallHandoff();
  const KvHandoff back = ParseKvHandoff(SerializeKvHandoff(h), "handoff.safetensors");
  EXPECT_EQ(back.model.architecture, "llama");
  EXPECT_EQ(back.model.weights_sha256, h.model.weights_sha256);
  EXPECT_EQ(back.model.hidden_size, 4);
  EXPECT_EQ(back.dtype, KvDtype::kFp8E4M3);
  EXPECT_EQ(back.tokens, h.tokens);
  EXPECT_EQ(back.next_token, 4);
  EXPECT_EQ(back.k_scales, h.k_scales);
  EXPECT_EQ(back.v_scales, h.v_scales);
  EXPECT_EQ(back.keys, h.keys);
  EXPECT_EQ(back.values, h.values);
  const SafetensorsFile file = SafetensorsFile::FromBytes(SerializeKvHandoff(h), "x");
  EXPECT_EQ(file.metadata().at("format"), "plumb.kv-handoff");
  EXPECT_EQ(file.metadata().at("format_version"), "1");
  EXPECT_EQ(file.Info("layers.1.keys").dtype, DType::F8_E4M3);
  EXPECT_EQ(file.Info("layers.1.keys").shape, (std::vector<std::int64_t>{3, 1, 2}));
}

TEST(KvHandoff, RefusesAFileOfAnotherModel) {
  const KvHandoff h = SmallHandoff();
  KvHandoffModel other = h.model;
  other.weights_sha256 = std::string(64, 'c');
  ExpectRefused([&] { CheckKvHandoffModel(h, other, "handoff.safetensors"); }, "weights_sha256");
  other = h.model;
  other.n_layers = 3;
  ExpectRefused([&] { CheckKvHandoffModel(h, other, "handoff.safetensors"); }, "n_layers");
  other = h.model;
  other.architecture = "qwen2";
  ExpectRefused([&] { CheckKvHandoffModel(h, other, "handoff.safetensors"); }, "architecture");
}

TEST(KvHandoff, RefusesACacheOfAnotherDtypeShapeScaleOrTooShortAContext) {
  const KvHandoff h = SmallHandoff();
  ContiguousKvCache f16(2, 1, 8, 2, KvDtype::kF16);
  ExpectRefused([&] { ImportKv(h, f16, "handoff.safetensors"); }, "kv_dtype");
  ContiguousKvCache wide(2, 1, 8, 4, KvDtype::kFp8E4M3, h.k_scales, h.v_scales);
  ExpectRefused([&] { ImportKv(h, wide, "handoff.safetensors"); }, "head_dim");
  ContiguousKvCache unscaled(2, 1, 8, 2, KvDtype::kFp8E4M3);
  ExpectRefused([&] { ImportKv(h, unscaled, "handoff.safetensors"); }, "scales");
  ContiguousKvCache short_context(2, 1, 2, 2, KvDtype::kFp8E4M3, h.k_scales, h.v_scales);
  ExpectRefused([&] { ImportKv(h, short_context, "handoff.safetensors"); }, "length");
  EXPECT_EQ(short_context.length(), 0);
  ContiguousKvCache fits(2, 1, 3, 2, KvDtype::kFp8E4M3, h.k_scales, h.v_scales);
  ImportKv(h, fits, "handoff.safetensors");
  EXPECT_EQ(fits.length(), 3);
  ExpectRefused([&] { ImportKv(h, fits, "handoff.safetensors"); }, "empty");
}

TEST(KvHandoff, RefusesBadMetadataNamingTheField) {
  const std::vector<std::uint8_t> good = SerializeKvHandoff(SmallHandoff());
  const struct {
    const char* key;
    const char* value;
    const char* named;
  } cases[] = {
      {"format", "something-else", "format"},
      {"format", "", "format"},
      {"format_version", "2", "format_version"},
      {"format_version", "x", "format_version"},
      {"kv_dtype", "f64", "kv_dtype"},
      {"kv_dtype", "f16", "tensors"},
      {"length", "4", "tokens"},
      {"length", "-1", "length"},
      {"length", "", "length"},
      {"n_layers", "1000000", "tensors"},
      {"n_kv_heads", "2", "layers.0.keys"},
      {"next_token", "10", "next_token"},
      {"vocab_size", "5", "tokens[2]"},
      {"weights_sha256", "", "weights_sha256"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(c.key) + " = " + c.value);
    ExpectRefused([&] { ParseKvHandoff(WithMetadata(good, c.key, c.value), "handoff.safetensors"); },
                  c.named);
  }
}

TEST(KvHandoff, RefusesEveryTruncationWithoutACrash) {
  const std::vector<std::uint8_t> good = SerializeKvHandoff(SmallHandoff());
  for (std::size_t n = 0; n < good.size(); ++n) {
    EXPECT_THROW(
        ParseKvHandoff({good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n)}, "handoff.safetensors"),
        Error)
        << n << " of " << good.size() << " bytes";
  }
  EXPECT_NO_THROW(ParseKvHandoff(good, "handoff.safetensors"));
}

TEST(KvHandoff, ExportRefusesTokenIdsThatDoNotCoverTheCache) {
  ContiguousKvCache kv(2, 1, 8, 2, KvDtype::kF32);
  kv.Reserve(2);
  kv.Commit(std::vector<int>{1, 2});
  const KvHandoffModel m = SmallHandoff().model;
  EXPECT_THROW(ExportKv(kv, std::vector<int>{1}, m), Error);
  EXPECT_NO_THROW(ExportKv(kv, std::vector<int>{1, 2}, m));
}

}  // namespace
}  // namespace plumb
