// plumb INT4 <-> GPTQ and AWQ packings (include/plumb/formats/int4_gptq_awq.h; docs/formats.md "GPTQ and
// AWQ packings"). Both packings are handled by one routine, told apart by where an element's nibble lives
// and by the offset of the stored zero (GPTQ stores zero − 1, AWQ the zero itself).
#include "plumb/formats/int4_gptq_awq.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "plumb/core/error.h"
#include "plumb/core/extent.h"
#include "plumb/formats/dtype.h"

namespace plumb {
namespace {

struct Packing {
  const char* name;
  bool along_k;     // GPTQ: qweight words run along K; AWQ: along N, nibbles in kAwqOrder
  int zero_offset;  // zero = stored nibble + zero_offset
};
constexpr Packing kGptq{"GPTQ", true, 1};
constexpr Packing kAwq{"AWQ", false, 0};

// Where element (k, n) of qweight, and the zero of (group g, column n) in qzeros, live: word index and
// bit shift. N is out_features.
struct Slot {
  std::size_t word;
  unsigned shift;
};
unsigned NibbleOfColumn(const Packing& p, int n) {
  return p.along_k ? static_cast<unsigned>(n % 8) : static_cast<unsigned>(kAwqInverseOrder[n % 8]);
}
Slot WeightSlot(const Packing& p, int k, int n, int N) {
  if (p.along_k) {
    return {static_cast<std::size_t>(k / 8) * static_cast<std::size_t>(N) + static_cast<std::size_t>(n),
            4u * static_cast<unsigned>(k % 8)};
  }
  return {static_cast<std::size_t>(k) * static_cast<std::size_t>(N / 8) + static_cast<std::size_t>(n / 8),
          4u * NibbleOfColumn(p, n)};
}
Slot ZeroSlot(const Packing& p, int g, int n, int N) {
  return {static_cast<std::size_t>(g) * static_cast<std::size_t>(N / 8) + static_cast<std::size_t>(n / 8),
          4u * NibbleOfColumn(p, n)};
}

unsigned GetNibble(const std::vector<std::int32_t>& words, Slot s) {
  return (static_cast<std::uint32_t>(words[s.word]) >> s.shift) & 0xFu;
}
void PutNibble(std::vector<std::int32_t>& words, Slot s, unsigned nibble) {
  words[s.word] = static_cast<std::int32_t>(static_cast<std::uint32_t>(words[s.word]) | (nibble << s.shift));
}
void PutPlumbNibble(std::uint8_t* bytes, int index, unsigned nibble) {
  bytes[index / 2] = static_cast<std::uint8_t>(bytes[index / 2] | (nibble << (4 * (index % 2))));
}

bool IsZeroScale(std::uint16_t fp16) {
  return (fp16 & 0x7FFFu) == 0;
}

// The shape rules both packings share.
void CheckShape(const Packing& p, int K, int N, int G) {
  if (G != 32 && G != 64 && G != 128)
    throw MakeError(p.name, ": group size ", G, " (plumb takes 32, 64 or 128)");
  if (K <= 0 || N <= 0) throw MakeError(p.name, ": shape K = ", K, ", N = ", N, " (both must be positive)");
  if (K % 8 != 0) throw MakeError(p.name, ": in_features K = ", K, " is not a multiple of 8");
  if (K % G != 0)
    throw MakeError(p.name, ": in_features K = ", K, " is not a multiple of the group size ", G);
  if (N % 8 != 0) throw MakeError(p.name, ": out_features N = ", N, " is not a multiple of 8");
}
void CheckSize(const Packing& p, const char* field, std::size_t got, std::size_t want, const char* shape) {
  if (got != want) {
    throw MakeError(p.name, " ", field, ": ", got, " elements, expected ", shape, " = ", want);
  }
}

void Pack(const Packing& p, const Int4Matrix& m, Int4PackedWords& out) {
  const int K = m.cols;
  const int N = m.rows;
  const int G = m.params.group_size;
  CheckShape(p, K, N, G);
  out.in_features = K;
  out.out_features = N;
  out.group_size = G;
  const int groups = K / G;
  const std::size_t code_row = Int4RowBytes(K);
  const std::size_t zero_row = Int4ZeroRowBytes(m.params, K);
  const auto n_rows = static_cast<std::size_t>(N);
  if (m.codes.size() != n_rows * code_row || m.scales.size() != n_rows * static_cast<std::size_t>(groups) ||
      m.zeros.size() != n_rows * zero_row) {
    throw MakeError(p.name, ": the INT4 matrix [", N, "][", K, "] has ", m.codes.size(), " code bytes, ",
                    m.scales.size(), " scales and ", m.zeros.size(), " zero bytes; expected ",
                    n_rows * code_row, ", ", n_rows * static_cast<std::size_t>(groups), " and ",
                    n_rows * zero_row);
  }
  out.qweight.assign(Extent(K, n_rows) / 8, 0);
  out.qzeros.assign(Extent(groups, n_rows) / 8, 0);
  out.scales.assign(Extent(groups, n_rows), 0);
  const bool symmetric = m.params.scheme == Int4Scheme::kSymmetric;
  for (int n = 0; n < N; ++n) {
    const std::uint8_t* codes = m.codes.data() + Extent(n, code_row);
    const std::uint8_t* zeros = m.zeros.data() + Extent(n, zero_row);
    for (int g = 0; g < groups; ++g) {
      const std::uint16_t scale = m.scales[Extent(n, groups) + g];
      out.scales[Extent(g, n_rows) + n] = scale;
      // The zero as a real number; symmetric codes are stored offset by 8 with zero 8.
      float zero = 8.0f;
      if (m.params.scheme == Int4Scheme::kAsymmetric) {
        zero = static_cast<float>(Int4Code(zeros, g));
      } else if (m.params.scheme == Int4Scheme::kAsymmetricF16Zero) {
        std::uint16_t bits;
        std::memcpy(&bits, zeros + 2 * static_cast<std::size_t>(g), sizeof bits);
        zero = F16ToF32(bits);
      }
      const float stored = zero - static_cast<float>(p.zero_offset);
      unsigned nibble;
      if (stored >= 0.0f && stored <= 15.0f && stored == std::floor(stored)) {
        nibble = static_cast<unsigned>(stored);
      } else if (IsZeroScale(scale)) {
        // Every weight of the group is ±0 whatever the zero: write what the format's own packer writes
        // for zero 0, (0 − offset) mod 16 (GPTQ: 0xF).
        nibble = static_cast<unsigned>(-p.zero_offset) & 0xFu;
      } else {
        throw MakeError(p.name, ": row ", n, " group ", g, " has zero point ", zero, ", which ", p.name,
                        " cannot store (it holds integer zeros ", p.zero_offset, "..", 15 + p.zero_offset,
                        ")");
      }
      PutNibble(out.qzeros, ZeroSlot(p, g, n, N), nibble);
    }
    for (int k = 0; k < K; ++k) {
      const unsigned q = Int4Code(codes, k) ^ (symmetric ? 8u : 0u);  // two's complement -8..7 -> 0..15
      PutNibble(out.qweight, WeightSlot(p, k, n, N), q);
    }
  }
}

Int4Matrix Unpack(const Packing& p, const Int4PackedWords& in, Int4Scheme scheme) {
  const int K = in.in_features;
  const int N = in.out_features;
  const int G = in.group_size;
  CheckShape(p, K, N, G);
  const int groups = K / G;
  const auto n_rows = static_cast<std::size_t>(N);
  CheckSize(p, "qweight", in.qweight.size(), Extent(K, n_rows) / 8, p.along_k ? "[K/8][N]" : "[K][N/8]");
  CheckSize(p, "qzeros", in.qzeros.size(), Extent(groups, n_rows) / 8, "[K/G][N/8]");
  CheckSize(p, "scales", in.scales.size(), Extent(groups, n_rows), "[K/G][N]");

  Int4Matrix m;
  m.params = {scheme, G};
  m.rows = N;
  m.cols = K;
  const std::size_t code_row = Int4RowBytes(K);
  const std::size_t zero_row = Int4ZeroRowBytes(m.params, K);
  m.codes.assign(n_rows * code_row, 0);
  m.scales.assign(n_rows * static_cast<std::size_t>(groups), 0);
  m.zeros.assign(n_rows * zero_row, 0);
  for (int n = 0; n < N; ++n) {
    std::uint8_t* codes = m.codes.data() + Extent(n, code_row);
    std::uint8_t* zeros = m.zeros.data() + Extent(n, zero_row);
    for (int g = 0; g < groups; ++g) {
      const std::uint16_t scale = in.scales[Extent(g, n_rows) + n];
      m.scales[Extent(n, groups) + g] = scale;
      const int zero = static_cast<int>(GetNibble(in.qzeros, ZeroSlot(p, g, n, N))) + p.zero_offset;
      switch (scheme) {
        case Int4Scheme::kSymmetric:
          if (zero != 8) {
            throw MakeError(p.name, " qzeros: group ", g, " column ", n, " has zero point ", zero,
                            ", not 8: the weights are not symmetric (convert them as asym)");
          }
          break;
        case Int4Scheme::kAsymmetric:
          if (zero > 15 && !IsZeroScale(scale)) {
            throw MakeError(p.name, " qzeros: group ", g, " column ", n, " has zero point ", zero,
                            " (stored nibble 0xF), beyond a 4-bit zero (convert as asym-f16zero)");
          }
          PutPlumbNibble(zeros, g, zero > 15 ? 0u : static_cast<unsigned>(zero));  // ±0 scale: any zero
          break;
        case Int4Scheme::kAsymmetricF16Zero: {
          const std::uint16_t bits = F32ToF16(static_cast<float>(zero));  // exact: 0..16
          std::memcpy(zeros + 2 * static_cast<std::size_t>(g), &bits, sizeof bits);
          break;
        }
      }
    }
    const unsigned flip = scheme == Int4Scheme::kSymmetric ? 8u : 0u;  // 0..15 -> two's complement -8..7
    for (int k = 0; k < K; ++k)
      PutPlumbNibble(codes, k, GetNibble(in.qweight, WeightSlot(p, k, n, N)) ^ flip);
  }
  return m;
}

}  // namespace

GptqInt4 Int4ToGptq(const Int4Matrix& m) {
  GptqInt4 out;
  Pack(kGptq, m, out);
  out.g_idx.resize(static_cast<std::size_t>(m.cols));
  for (int k = 0; k < m.cols; ++k) out.g_idx[static_cast<std::size_t>(k)] = k / m.params.group_size;
  return out;
}

Int4Matrix Int4FromGptq(const GptqInt4& gptq, Int4Scheme scheme) {
  if (!gptq.g_idx.empty()) {
    CheckSize(kGptq, "g_idx", gptq.g_idx.size(), static_cast<std::size_t>(gptq.in_features), "[K]");
    for (int k = 0; k < gptq.in_features; ++k) {
      const std::int32_t g = gptq.g_idx[static_cast<std::size_t>(k)];
      if (gptq.group_size <= 0 || g != k / gptq.group_size) {
        throw MakeError("GPTQ g_idx[", k, "] = ", g,
                        ", not k / group size = ", gptq.group_size > 0 ? k / gptq.group_size : 0,
                        ": act-order (desc_act) checkpoints are not supported");
      }
    }
  }
  return Unpack(kGptq, gptq, scheme);
}

AwqInt4 Int4ToAwq(const Int4Matrix& m) {
  AwqInt4 out;
  Pack(kAwq, m, out);
  return out;
}

Int4Matrix Int4FromAwq(const AwqInt4& awq, Int4Scheme scheme) {
  return Unpack(kAwq, awq, scheme);
}

}  // namespace plumb
