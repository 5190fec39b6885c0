// llama_judge: llama.cpp judged by plumb's golden fixture suite (docs/fixtures.md), by hand.
//
// It runs the suite's model cases (`layer.*`, `end_to_end.*`) through llama.cpp's C API and writes one
// results file per case, as any engine under test does, for `plumb fixtures verify` to judge. The op cases
// have no llama.cpp entry point (its C API runs whole models, not single kernels), and `kv_handoff.*` and
// `tp_layer.*` need what that API lacks (below), so those are listed as skipped.
//
// Never built in CI, and nothing of llama.cpp is copied here: scripts/judge-llama compiles this file against
// the llama.cpp that scripts/compare builds into build-llama/ (llama-cpp-python 0.3.36's vendored llama.cpp,
// static libraries) and runs it. The suite is read with plumb's header-only suite_reader.h.
//
//   llama_judge --suite fixtures/suite --models models --results DIR [--kv f16|f32]
//               [--flash-attn auto|on|off] [--threads N] [--cases REGEX] [--verbose]
//
// How the activations are read: llama.cpp's eval callback (llama_context_params.cb_eval) is asked about every
// graph node before it is computed and handed the ones it asked for after; the node names come from
// llama.cpp's Llama graph (src/models/llama.cpp, src/llama-graph.cpp at 0c1e570), so only the `llama`
// architecture is accepted for `layer` cases.
#include <ggml-backend.h>
#include <ggml.h>
#include <llama.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <span>
#include <string>
#include <vector>

#include "plumb/core/error.h"
#include "plumb/fixtures/suite_reader.h"

namespace {

using plumb::MakeError;
using plumb::fixtures::Case;
using plumb::fixtures::Suite;
using plumb::fixtures::Tensor;
using plumb::fixtures::TensorFile;

struct Options {
  std::filesystem::path suite = "fixtures/suite";
  std::filesystem::path models = "models";
  std::filesystem::path results;
  std::string kv = "f16";
  std::string flash_attn = "auto";
  int threads = 0;
  std::string cases = ".*";
  bool verbose = false;
};

// ---- llama.cpp's log -------------------------------------------------------------------------------------

// llama.cpp logs a page per model load and context: only its warnings and errors are shown unless --verbose.
// (Which attention it chose is read from the graph instead, see Capture.)
struct LogState {
  bool verbose = false;
  ggml_log_level last = GGML_LOG_LEVEL_INFO;  // GGML_LOG_LEVEL_CONT continues the previous line's level
};
LogState g_log;

void LogCallback(ggml_log_level level, const char* text, void*) {
  if (level != GGML_LOG_LEVEL_CONT) g_log.last = level;
  if (g_log.verbose || g_log.last >= GGML_LOG_LEVEL_WARN) std::fputs(text, stderr);
}

// ---- the eval callback ------------------------------------------------------------------------------------

struct Captured {
  std::vector<float> data;  // contiguous, ne[0] fastest
  std::int64_t ne[4] = {1, 1, 1, 1};
};

// What the callback sees of one llama_decode (a "pass") and of the context as a whole.
struct Capture {
  bool record = false;                           // copy the residual stream and K/V (layer cases)
  std::map<std::string, Captured> pass;          // this pass's tensors, by the keys of KeyOf
  std::map<int, ggml_tensor*> k_cache, v_cache;  // the KV cache's own tensors, by layer (they outlive passes)
  bool saw_flash_attn = false;                   // a GGML_OP_FLASH_ATTN_EXT node ran: llama.cpp chose FA
  std::string
      error;  // an exception must not unwind through ggml's scheduler: kept, and the compute cancelled
};

bool ParseLayer(const char* name, const char* prefix, int* layer) {
  const std::size_t n = std::strlen(prefix);
  if (std::strncmp(name, prefix, n) != 0) return false;
  char* end = nullptr;
  const long v = std::strtol(name + n, &end, 10);
  if (end == name + n || *end != '\0') return false;
  *layer = static_cast<int>(v);
  return true;
}

// The key under which a node is kept, or nothing for a node the judge does not read. Names can repeat:
// "Kcur-<il>" names the projection, its reshape and the RoPE output, and only the last holds the keys the
// cache stores; "Vcur-<il>" names the projection and its reshape, the same values.
std::optional<std::string> KeyOf(const ggml_tensor* t) {
  int il = 0;
  if (ParseLayer(t->name, "ffn_inp-", &il) || ParseLayer(t->name, "l_out-", &il) ||
      ParseLayer(t->name, "Vcur-", &il) || std::strcmp(t->name, "result_norm") == 0)
    return std::string(t->name);
  if (ParseLayer(t->name, "Kcur-", &il) && t->op == GGML_OP_ROPE) return std::string(t->name);
  // The embedding rows: "inp_embd" is the graph's input for embeddings passed in place of tokens (unused
  // here), so the token path's row lookup in token_embd.weight is read instead.
  if (t->op == GGML_OP_GET_ROWS && t->src[0] != nullptr &&
      std::strcmp(t->src[0]->name, "token_embd.weight") == 0)
    return std::string("embd");
  return std::nullopt;
}

// A node's values as contiguous floats, whatever its strides (a reshape or view of another node).
Captured ReadF32(const ggml_tensor* t) {
  if (t->type != GGML_TYPE_F32)
    throw MakeError("node ", t->name, " is ", ggml_type_name(t->type), ", the judge reads F32 activations");
  std::vector<std::uint8_t> raw(ggml_nbytes(t));
  ggml_backend_tensor_get(t, raw.data(), 0, raw.size());
  Captured c;
  for (int i = 0; i < 4; ++i) c.ne[i] = t->ne[i];
  c.data.resize(static_cast<std::size_t>(ggml_nelements(t)));
  std::size_t at = 0;
  for (std::int64_t i3 = 0; i3 < t->ne[3]; ++i3)
    for (std::int64_t i2 = 0; i2 < t->ne[2]; ++i2)
      for (std::int64_t i1 = 0; i1 < t->ne[1]; ++i1)
        for (std::int64_t i0 = 0; i0 < t->ne[0]; ++i0)
          std::memcpy(&c.data[at++],
                      raw.data() + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3],
                      sizeof(float));
  return c;
}

bool EvalCallback(ggml_tensor* t, bool ask, void* user) {
  auto* cap = static_cast<Capture*>(user);
  if (ask) {
    if (t->op == GGML_OP_FLASH_ATTN_EXT) cap->saw_flash_attn = true;
    // A cache write (ggml_set_rows) is a view of the layer's cache tensor, which stays allocated with the
    // context: keep that tensor, to read the cache as llama.cpp stores it after the last pass.
    if (t->op == GGML_OP_SET_ROWS && t->view_src != nullptr) {
      int il = 0;
      if (ParseLayer(t->view_src->name, "cache_k_l", &il)) cap->k_cache[il] = t->view_src;
      if (ParseLayer(t->view_src->name, "cache_v_l", &il)) cap->v_cache[il] = t->view_src;
    }
    // Asking for a node splits the graph there: end_to_end asks for nothing, so its compute is unchanged.
    return cap->record && KeyOf(t).has_value();
  }
  try {
    if (const auto key = KeyOf(t)) cap->pass[*key] = ReadF32(t);
  } catch (const std::exception& e) {
    cap->error = e.what();
    return false;  // cancels the compute; Decode reports the error
  }
  return true;
}

// ---- llama.cpp objects ------------------------------------------------------------------------------------

struct ModelDeleter {
  void operator()(llama_model* m) const { llama_model_free(m); }
};
struct ContextDeleter {
  void operator()(llama_context* c) const { llama_free(c); }
};
using ModelPtr = std::unique_ptr<llama_model, ModelDeleter>;
using ContextPtr = std::unique_ptr<llama_context, ContextDeleter>;

ggml_type KvType(const std::string& kv) {
  if (kv == "f16") return GGML_TYPE_F16;
  if (kv == "f32") return GGML_TYPE_F32;
  throw MakeError("--kv must be f16 or f32, not '", kv, "'");
}

llama_flash_attn_type FlashAttnType(const std::string& fa) {
  if (fa == "auto") return LLAMA_FLASH_ATTN_TYPE_AUTO;
  if (fa == "on") return LLAMA_FLASH_ATTN_TYPE_ENABLED;
  if (fa == "off") return LLAMA_FLASH_ATTN_TYPE_DISABLED;
  throw MakeError("--flash-attn must be auto, on or off, not '", fa, "'");
}

// A fresh context (an empty cache) for one case of n_tokens positions, one sequence, one ubatch per decode.
ContextPtr MakeContext(llama_model* model, int n_tokens, const Options& o, Capture* cap) {
  llama_context_params p = llama_context_default_params();
  p.n_ctx = static_cast<std::uint32_t>(n_tokens);
  p.n_batch = static_cast<std::uint32_t>(n_tokens);
  p.n_ubatch = static_cast<std::uint32_t>(n_tokens);  // the prefill is one graph, as the suite's is one pass
  p.n_seq_max = 1;
  if (o.threads > 0) p.n_threads = p.n_threads_batch = o.threads;
  p.flash_attn_type = FlashAttnType(o.flash_attn);
  p.type_k = p.type_v = KvType(o.kv);
  p.cb_eval = EvalCallback;
  p.cb_eval_user_data = cap;
  p.no_perf = true;
  llama_context* ctx = llama_init_from_model(model, p);
  if (ctx == nullptr)
    throw MakeError("llama_init_from_model failed (run with --verbose for llama.cpp's log)");
  return ContextPtr(ctx);
}

// Decodes tokens at positions pos0, pos0 + 1, ... of sequence 0; logits for the last token, or for all of
// them (a layer case: llama.cpp drops the rows without an output before the last layer's attention output,
// and the suite wants every row of every layer).
void Decode(llama_context* ctx, std::span<const llama_token> tokens, int pos0, bool all_outputs,
            const Capture& cap) {
  const int n = static_cast<int>(tokens.size());
  llama_batch b = llama_batch_init(n, 0, 1);
  struct Free {
    llama_batch& b;
    ~Free() { llama_batch_free(b); }
  } free_batch{b};
  for (int i = 0; i < n; ++i) {
    b.token[i] = tokens[static_cast<std::size_t>(i)];
    b.pos[i] = pos0 + i;
    b.n_seq_id[i] = 1;
    b.seq_id[i][0] = 0;
    b.logits[i] = all_outputs || i == n - 1;
  }
  b.n_tokens = n;
  const int rc = llama_decode(ctx, b);
  if (!cap.error.empty()) throw MakeError("reading llama.cpp's graph: ", cap.error);
  if (rc != 0) throw MakeError("llama_decode of ", n, " tokens at position ", pos0, " returned ", rc);
}

std::string MetaString(const llama_model* model, const char* key) {
  char buf[256] = {};
  if (llama_model_meta_val_str(model, key, buf, sizeof buf) < 0) return "";
  return buf;
}

class Models {
 public:
  explicit Models(std::filesystem::path dir) : dir_(std::move(dir)) {}
  llama_model* Get(const std::string& file) {
    if (const auto it = models_.find(file); it != models_.end()) return it->second.get();
    const std::filesystem::path path = dir_ / file;
    if (!std::filesystem::exists(path))
      throw MakeError(path.string(), " is missing: run scripts/fetch-model smollm2 (or --models DIR)");
    llama_model_params p = llama_model_default_params();
    p.n_gpu_layers = 0;
    llama_model* m = llama_model_load_from_file(path.string().c_str(), p);
    if (m == nullptr) throw MakeError("llama.cpp could not load ", path.string(), " (run with --verbose)");
    return models_.emplace(file, ModelPtr(m)).first->second.get();
  }

 private:
  std::filesystem::path dir_;
  std::map<std::string, ModelPtr> models_;
};

// ---- cases ------------------------------------------------------------------------------------------------

std::int64_t IntParam(const Case& c, const char* key) {
  if (!c.params.contains(key) || !c.params[key].is_number_integer())
    throw MakeError("case ", c.name, ": missing integer param \"", key, "\"");
  return c.params[key].get<std::int64_t>();
}

std::string StringParam(const Case& c, const char* key) {
  if (!c.params.contains(key) || !c.params[key].is_string())
    throw MakeError("case ", c.name, ": missing string param \"", key, "\"");
  return c.params[key].get<std::string>();
}

void Expect(bool ok, const Case& c, const std::string& what) {
  if (!ok) throw MakeError("case ", c.name, ": ", what);
}

Tensor F32(std::vector<std::int64_t> shape, const std::vector<float>& v) {
  return Tensor::From<float>("F32", std::move(shape), std::span<const float>(v));
}

// Lowest id among the largest: the suite's greedy rule.
int Argmax(std::span<const float> row, int skip = -1) {
  int best = -1;
  for (int i = 0; i < static_cast<int>(row.size()); ++i) {
    if (i == skip) continue;
    if (best < 0 || row[static_cast<std::size_t>(i)] > row[static_cast<std::size_t>(best)]) best = i;
  }
  return best;
}

std::string Describe(const Capture& cap, const Options& o) {
  return std::string("KV cache ") + o.kv + ", flash attention " + o.flash_attn + " -> " +
         (cap.saw_flash_attn ? "on" : "off");
}

void RunEndToEnd(const Case& c, const TensorFile& in, Models& models, const Options& o) {
  llama_model* model = models.Get(StringParam(c, "model"));
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  Expect(n_vocab == IntParam(c, "vocab_size"), c, "the model's vocabulary is not the case's vocab_size");
  const std::vector<std::int32_t> prompt = in.Get("prompt").As<std::int32_t>();
  const int P = static_cast<int>(prompt.size());
  const int N = static_cast<int>(IntParam(c, "decode_steps"));
  // Decode is teacher-forced: the reference's greedy tokens are fed, so a flipped argmax in llama.cpp does
  // not change the later rows' inputs and every row stays comparable.
  std::vector<std::int32_t> feed;
  if (in.Has("decode_tokens")) {
    feed = in.Get("decode_tokens").As<std::int32_t>();
  } else {
    // Fallback for suites written before `decode_tokens` existed: the reference fed its own greedy tokens,
    // which are the first N of its `tokens` output.
    const std::vector<std::int32_t> ref = in.Get("tokens").As<std::int32_t>();
    Expect(static_cast<int>(ref.size()) >= N, c, "expected tokens shorter than decode_steps");
    feed.assign(ref.begin(), ref.begin() + N);
  }
  Expect(static_cast<int>(feed.size()) == N, c, "decode_tokens does not hold decode_steps tokens");

  Capture cap;  // observes only (which attention ran, where the cache is); asks for no node
  ContextPtr ctx = MakeContext(model, P + N, o, &cap);
  std::vector<float> logits;
  logits.reserve(static_cast<std::size_t>(N + 1) * static_cast<std::size_t>(n_vocab));
  auto take_row = [&] {
    const float* row = llama_get_logits_ith(ctx.get(), -1);
    if (row == nullptr) throw MakeError("case ", c.name, ": llama_get_logits_ith returned no row");
    logits.insert(logits.end(), row, row + n_vocab);
  };
  Decode(ctx.get(), std::span<const llama_token>(prompt), 0, false, cap);
  take_row();
  for (int s = 0; s < N; ++s) {
    const llama_token t = feed[static_cast<std::size_t>(s)];
    Decode(ctx.get(), std::span<const llama_token>(&t, 1), P + s, false, cap);
    take_row();
  }
  std::vector<std::int32_t> tokens;
  for (int r = 0; r <= N; ++r)
    tokens.push_back(
        Argmax(std::span<const float>(logits).subspan(static_cast<std::size_t>(r) * n_vocab, n_vocab)));

  std::map<std::string, Tensor> out;
  out["logits"] = F32({N + 1, n_vocab}, logits);
  out["tokens"] = Tensor::From<std::int32_t>("I32", {N + 1}, std::span<const std::int32_t>(tokens));
  plumb::fixtures::WriteTensorFile(o.results / c.file, out);
  std::printf("%s: wrote %s (%s; %d prompt tokens, %d decode steps, %s)\n", c.name.c_str(),
              (o.results / c.file).string().c_str(), Describe(cap, o).c_str(), P, N,
              in.Has("decode_tokens") ? "decode_tokens fed" : "no decode_tokens: the expected tokens fed");

  // Per row: how far the logits are (the check's max_abs_rel), the reference's greedy gap, and whether
  // llama.cpp's own top-1 is the reference's.
  const Tensor& ref_t = in.Get("logits");
  Expect(ref_t.Elements() == static_cast<std::int64_t>(logits.size()), c,
         "expected logits have another shape");
  const std::vector<float> ref = ref_t.As<float>();
  std::printf(
      "  row  step      max_abs_rel  ref top-1 (logit)   ref top-2 (logit)   ref margin  llama top-1 (logit)"
      "  llama's logit of ref top-1  same\n");
  for (int r = 0; r <= N; ++r) {
    const auto a = std::span<const float>(logits).subspan(static_cast<std::size_t>(r) * n_vocab, n_vocab);
    const auto e = std::span<const float>(ref).subspan(static_cast<std::size_t>(r) * n_vocab, n_vocab);
    double max_err = 0, max_ref = 0;
    for (int i = 0; i < n_vocab; ++i) {
      max_err = std::max(max_err, std::abs(static_cast<double>(a[i]) - e[i]));
      max_ref = std::max(max_ref, std::abs(static_cast<double>(e[i])));
    }
    const int t1 = Argmax(e), t2 = Argmax(e, t1), mine = tokens[static_cast<std::size_t>(r)];
    std::printf("  %3d  %-8s  %11.3e  %6d (%8.4f)   %6d (%8.4f)   %9.4f   %6d (%8.4f)   %26.4f  %s\n", r,
                r == 0 ? "prefill" : ("decode " + std::to_string(r)).c_str(),
                max_ref > 0 ? max_err / max_ref : 0.0, t1, e[t1], t2, e[t2], e[t1] - e[t2], mine, a[mine],
                a[t1], mine == t1 ? "yes" : "NO");
  }
}

void RunLayer(const Case& c, const TensorFile& in, Models& models, const Options& o) {
  llama_model* model = models.Get(StringParam(c, "model"));
  const std::string arch = MetaString(model, "general.architecture");
  Expect(arch == "llama", c,
         "the model's architecture is '" + arch +
             "': the judge reads node names of llama.cpp's llama graph only");
  const int L = static_cast<int>(IntParam(c, "n_layers"));
  const int d = static_cast<int>(IntParam(c, "hidden_size"));
  const int n_kv = static_cast<int>(IntParam(c, "n_kv_heads"));
  const int hd = static_cast<int>(IntParam(c, "head_dim"));
  const int P = static_cast<int>(IntParam(c, "prompt_len"));
  const int N = static_cast<int>(IntParam(c, "decode_steps"));
  Expect(llama_model_n_layer(model) == L && llama_model_n_embd(model) == d &&
             llama_model_n_head_kv(model) == n_kv,
         c, "the model's layers, width or KV heads are not the case's");
  const std::vector<std::int32_t> tokens = in.Get("tokens").As<std::int32_t>();
  Expect(static_cast<int>(tokens.size()) == P + N, c, "input tokens does not hold prompt_len + decode_steps");
  const int T = P + N, kvd = n_kv * hd;

  Capture cap;
  cap.record = true;
  ContextPtr ctx = MakeContext(model, T, o, &cap);

  std::vector<float> pre_in(static_cast<std::size_t>(L) * P * d), pre_att(pre_in.size()),
      pre_mlp(pre_in.size());
  std::vector<float> dec_in(static_cast<std::size_t>(N) * L * d), dec_att(dec_in.size()),
      dec_mlp(dec_in.size());
  std::vector<float> final_norm(static_cast<std::size_t>(N + 1) * d);
  // The keys and values each pass computed (GGUF order, FP32), [layer][position][kvd]: what the cache should
  // hold once rounded to its type, which checks the cache reading below (cell = position, V's layout).
  std::vector<float> fresh_k(static_cast<std::size_t>(L) * T * kvd), fresh_v(fresh_k.size());

  auto get = [&](const std::string& key, std::int64_t row_width, std::int64_t rows) -> const Captured& {
    const auto it = cap.pass.find(key);
    if (it == cap.pass.end()) throw MakeError("case ", c.name, ": llama.cpp's graph had no node ", key);
    if (static_cast<std::int64_t>(it->second.data.size()) != row_width * rows)
      throw MakeError("case ", c.name, ": node ", key, " has ", it->second.data.size(), " values, expected ",
                      row_width * rows);
    return it->second;
  };
  // One pass of n rows from position pos0: each layer's input, x + attention, x + MLP, into dst_* at
  // dst(l, r) (the prefill's [layer][row] or the decode's [step][layer] layout).
  auto collect = [&](int pos0, int n, auto dst_index, float* in_dst, float* att_dst, float* mlp_dst) {
    for (int l = 0; l < L; ++l) {
      const Captured& x = get(l == 0 ? std::string("embd") : "l_out-" + std::to_string(l - 1), d, n);
      const Captured& att = get("ffn_inp-" + std::to_string(l), d, n);
      const Captured& mlp = get("l_out-" + std::to_string(l), d, n);
      for (int r = 0; r < n; ++r) {
        const std::size_t at = dst_index(l, r), from = static_cast<std::size_t>(r) * d;
        std::copy_n(x.data.begin() + from, d, in_dst + at);
        std::copy_n(att.data.begin() + from, d, att_dst + at);
        std::copy_n(mlp.data.begin() + from, d, mlp_dst + at);
      }
      const Captured& k = get("Kcur-" + std::to_string(l), kvd, n);
      const Captured& v = get("Vcur-" + std::to_string(l), kvd, n);
      std::copy(k.data.begin(), k.data.end(),
                fresh_k.begin() + (static_cast<std::size_t>(l) * T + pos0) * kvd);
      std::copy(v.data.begin(), v.data.end(),
                fresh_v.begin() + (static_cast<std::size_t>(l) * T + pos0) * kvd);
    }
    const Captured& norm = get("result_norm", d, n);
    const int pass = pos0 == 0 ? 0 : pos0 - P + 1;
    std::copy_n(norm.data.begin() + static_cast<std::size_t>(n - 1) * d, d,
                final_norm.begin() + static_cast<std::size_t>(pass) * d);
  };

  cap.pass.clear();
  Decode(ctx.get(), std::span<const llama_token>(tokens.data(), static_cast<std::size_t>(P)), 0, true, cap);
  collect(
      0, P, [&](int l, int r) { return (static_cast<std::size_t>(l) * P + r) * d; }, pre_in.data(),
      pre_att.data(), pre_mlp.data());
  for (int s = 0; s < N; ++s) {
    cap.pass.clear();
    Decode(ctx.get(), std::span<const llama_token>(&tokens[static_cast<std::size_t>(P + s)], 1), P + s, false,
           cap);
    collect(
        P + s, 1, [&](int l, int) { return (static_cast<std::size_t>(s) * L + l) * d; }, dec_in.data(),
        dec_att.data(), dec_mlp.data());
  }

  // The cache as llama.cpp stores it (f16 values decoded back), read from its tensors after the last pass.
  // A fresh cache of one sequence puts position p in cell p; the V cache is transposed (one row per element
  // of the KV width, cells along it) unless flash attention runs. Both are checked against the fresh K/V.
  Expect(static_cast<int>(cap.k_cache.size()) == L && static_cast<int>(cap.v_cache.size()) == L, c,
         "the graph did not write one K and one V cache tensor per layer");
  const bool v_trans = !cap.saw_flash_attn;
  std::vector<float> k_cache(static_cast<std::size_t>(L) * n_kv * T * hd), v_cache(k_cache.size());
  std::int64_t differ = 0;
  double worst = 0;
  for (int l = 0; l < L; ++l) {
    for (const bool is_k : {true, false}) {
      const ggml_tensor* t = is_k ? cap.k_cache.at(l) : cap.v_cache.at(l);
      if (t->type != GGML_TYPE_F16 && t->type != GGML_TYPE_F32)
        throw MakeError("case ", c.name, ": cache tensor ", t->name, " is ", ggml_type_name(t->type));
      Expect(t->ne[0] >= kvd && t->ne[1] >= T, c, std::string("cache tensor ") + t->name + " is too small");
      std::vector<std::uint8_t> raw(ggml_nbytes(t));
      ggml_backend_tensor_get(t, raw.data(), 0, raw.size());
      const std::size_t es = ggml_type_size(t->type);
      auto value = [&](int p, int g) {
        const std::size_t off = (is_k || !v_trans) ? static_cast<std::size_t>(p) * t->nb[1] + g * es
                                                   : (static_cast<std::size_t>(g) * t->ne[1] + p) * es;
        if (t->type == GGML_TYPE_F32) {
          float f;
          std::memcpy(&f, raw.data() + off, sizeof f);
          return f;
        }
        ggml_fp16_t h;
        std::memcpy(&h, raw.data() + off, sizeof h);
        return ggml_fp16_to_fp32(h);
      };
      const std::vector<float>& fresh = is_k ? fresh_k : fresh_v;
      std::vector<float>& dst = is_k ? k_cache : v_cache;
      for (int p = 0; p < T; ++p) {
        for (int g = 0; g < kvd; ++g) {
          const float stored = value(p, g);
          const float f = fresh[(static_cast<std::size_t>(l) * T + p) * kvd + g];
          const float rounded = t->type == GGML_TYPE_F16 ? ggml_fp16_to_fp32(ggml_fp32_to_fp16(f)) : f;
          if (stored != rounded) {
            ++differ;
            worst = std::max(worst,
                             std::abs(static_cast<double>(stored) - rounded) / std::max(1e-30f, std::abs(f)));
          }
          const int h = g / hd, j = g % hd;
          // llama.cpp's keys keep GGUF's interleaved row order (RoPE on adjacent pairs); the suite's are in
          // Hugging Face's rotate-half order: element 2i goes to i, 2i + 1 to i + head_dim/2.
          const int jj = is_k ? (j % 2 == 0 ? j / 2 : j / 2 + hd / 2) : j;
          dst[((static_cast<std::size_t>(l) * n_kv + h) * T + p) * hd + jj] = stored;
        }
      }
    }
  }
  if (differ > 0 && worst > 1e-3)
    throw MakeError("case ", c.name,
                    ": the cache read back differs from the keys and values llama.cpp computed (", differ,
                    " values, worst relative ", worst, "): the cell or V layout assumed here is wrong");

  std::map<std::string, Tensor> out;
  out["prefill.layer_input"] = F32({L, P, d}, pre_in);
  out["prefill.after_attention"] = F32({L, P, d}, pre_att);
  out["prefill.after_mlp"] = F32({L, P, d}, pre_mlp);
  out["decode.layer_input"] = F32({N, L, d}, dec_in);
  out["decode.after_attention"] = F32({N, L, d}, dec_att);
  out["decode.after_mlp"] = F32({N, L, d}, dec_mlp);
  out["final_norm"] = F32({N + 1, d}, final_norm);
  out["k_cache"] = F32({L, n_kv, T, hd}, k_cache);
  out["v_cache"] = F32({L, n_kv, T, hd}, v_cache);
  plumb::fixtures::WriteTensorFile(o.results / c.file, out);
  std::printf(
      "%s: wrote %s (%s; V cache %s; k_cache/v_cache read from llama.cpp's cache tensors (%s), "
      "%lld of %lld values differ from the computed K/V rounded to it)\n",
      c.name.c_str(), (o.results / c.file).string().c_str(), Describe(cap, o).c_str(),
      v_trans ? "transposed" : "not transposed", ggml_type_name(cap.k_cache.at(0)->type),
      static_cast<long long>(differ), static_cast<long long>(2) * L * T * kvd);
}

// ---- main -------------------------------------------------------------------------------------------------

const char* kUsage =
    "usage: llama_judge --results DIR [--suite DIR] [--models DIR] [--kv f16|f32] [--flash-attn "
    "auto|on|off]\n"
    "                   [--threads N] [--cases REGEX] [--verbose]\n"
    "Runs the suite's layer and end_to_end cases through llama.cpp and writes DIR/<case>.safetensors for\n"
    "`plumb fixtures verify` (scripts/judge-llama does both).\n";

Options ParseArgs(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw MakeError(a, " needs a value\n", kUsage);
      return argv[++i];
    };
    if (a == "--suite")
      o.suite = value();
    else if (a == "--models")
      o.models = value();
    else if (a == "--results")
      o.results = value();
    else if (a == "--kv")
      o.kv = value();
    else if (a == "--flash-attn")
      o.flash_attn = value();
    else if (a == "--threads")
      o.threads = std::stoi(value());
    else if (a == "--cases")
      o.cases = value();
    else if (a == "--verbose")
      o.verbose = true;
    else if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else {
      throw MakeError("unknown flag ", a, "\n", kUsage);
    }
  }
  if (o.results.empty()) throw MakeError("--results is required\n", kUsage);
  KvType(o.kv);
  FlashAttnType(o.flash_attn);
  return o;
}

int Run(int argc, char** argv) {
  const Options o = ParseArgs(argc, argv);
  g_log.verbose = o.verbose;
  llama_log_set(LogCallback, nullptr);
  llama_backend_init();
  std::printf("llama.cpp system info: %s\n", llama_print_system_info());
  const Suite suite = Suite::Open(o.suite);
  std::filesystem::create_directories(o.results);
  const std::regex select(o.cases, std::regex::extended);
  Models models(o.models);
  int ran = 0, op_cases = 0;
  for (const Case& c : suite.cases()) {
    if (!std::regex_search(c.name, select)) continue;
    if (c.op == "kv_handoff") {
      std::printf(
          "%s: skipped: llama.cpp's C API cannot import another engine's KV file (its state API reads "
          "only llama.cpp's own session format)\n",
          c.name.c_str());
    } else if (c.op == "tp_layer") {
      std::printf(
          "%s: skipped: llama.cpp's C API has no tensor-parallel rank computation with given shard "
          "weights\n",
          c.name.c_str());
    } else if (c.op == "layer" || c.op == "end_to_end") {
      const auto start = std::chrono::steady_clock::now();
      const TensorFile in = suite.Load(c);
      if (c.op == "layer") {
        RunLayer(c, in, models, o);
      } else {
        RunEndToEnd(c, in, models, o);
      }
      ++ran;
      std::printf("  (%.1f s)\n",
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    } else {
      ++op_cases;
    }
  }
  std::printf(
      "%d model cases run; %d op cases not run (llama.cpp's C API runs whole models, not single ops)\n", ran,
      op_cases);
  if (ran == 0) throw MakeError("no layer or end_to_end case matched --cases '", o.cases, "'");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "llama_judge: %s\n", e.what());
    return 1;
  }
}
