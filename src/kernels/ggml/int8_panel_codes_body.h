// Codes4<T>(ops, block, e): the stored panel codes u = w + offset of elements e .. e + 3 of one block
// (Q4_0 .. Q8_0) or super-block (the K-quants), packed little-endian (element e in the low byte), e a
// multiple of 4 (int8_panel.h; docs/formats.md "Int8 panels"). Four codes come out of one 32-bit read of the
// packed bits, a shift and a mask, since the GGUF layouts put 4 consecutive elements in 4 consecutive bytes
// (docs/formats.md "GGUF blocks"). Written once over an Ops policy whose Word is one row's 32 bits
// (int8_panel.cpp: std::uint32_t and ReadU32) or 16 rows' (int8_panel_avx512.cpp: a gather into a 512-bit
// register), so the vector repacking is this reading, not a second one. Ops has Word Load(const uint8_t*),
// Word Set(uint32_t), and Shr, Shl (by an int), And, Or, Xor, Add, Mul (lane by lane, 32 bits).
// Included with PLUMB_BODY_TARGET defined (empty for the scalar one), in the includer's namespace.
#if !defined(PLUMB_BODY_TARGET)
#error "define PLUMB_BODY_TARGET before including int8_panel_codes_body.h"
#endif

template <GgmlType T, class Ops>
PLUMB_BODY_TARGET inline typename Ops::Word Codes4(const Ops& o, const std::uint8_t* b, int e) {
  const auto low_nibbles = o.Set(0x0F0F0F0Fu), low_two = o.Set(0x03030303u), low_bit = o.Set(0x01010101u);
  if constexpr (T == GgmlType::Q8_0) {
    return o.Xor(o.Load(b + 2 + e), o.Set(0x80808080u));  // w + 128
  } else if constexpr (T == GgmlType::Q4_0 || T == GgmlType::Q4_1 || T == GgmlType::Q5_0 ||
                       T == GgmlType::Q5_1) {
    constexpr Int8Layout layout = Int8LayoutOf(T);
    const auto nibbles = o.And(o.Shr(o.Load(b + layout.qs + e % 16), e < 16 ? 0 : 4), low_nibbles);
    if constexpr (!layout.five_bits) {
      return nibbles;
    } else {
      // Bits e .. e + 3 of qh, each as bit 4 of its byte: the multiply puts copies of the 4 bits 7 apart, so
      // bit i lands on bit 8i, with no carries between them.
      const auto four = o.And(o.Shr(o.Load(b + layout.qs - 4), e), o.Set(0x0Fu));
      return o.Or(nibbles, o.Shl(o.And(o.Mul(four, o.Set(0x00204081u)), low_bit), 4));
    }
  } else if constexpr (T == GgmlType::Q4_K || T == GgmlType::Q5_K) {
    const int t = e / 32, l = e % 32;  // sub-block t: nibbles of qs[32(t / 2) + l], Q5_K's bit t of qh[l]
    const std::uint8_t* qs = b + (T == GgmlType::Q5_K ? 48 : 16);
    const auto nibbles = o.And(o.Shr(o.Load(qs + 32 * (t / 2) + l), 4 * (t % 2)), low_nibbles);
    if constexpr (T == GgmlType::Q5_K)
      return o.Or(nibbles, o.Shl(o.And(o.Shr(o.Load(b + 16 + l), t), low_bit), 4));
    return nibbles;
  } else {
    const int h = e / 128, k = (e % 128) / 32, l = e % 32;  // element 128h + 32k + l
    if constexpr (T == GgmlType::Q2_K) {
      return o.And(o.Shr(o.Load(b + 16 + 32 * h + l), 2 * k), low_two);
    } else if constexpr (T == GgmlType::Q3_K) {  // low 2 bits, + 4 where hmask's bit 4h + k is set (w + 4)
      const auto low = o.And(o.Shr(o.Load(b + 32 + 32 * h + l), 2 * k), low_two);
      return o.Add(low, o.Shl(o.And(o.Shr(o.Load(b + l), 4 * h + k), low_bit), 2));
    } else {  // Q6_K: 4 low bits from ql, 2 high from qh, the 6-bit q = w + 32
      const auto low = o.And(o.Shr(o.Load(b + 64 * h + 32 * (k % 2) + l), 4 * (k / 2)), low_nibbles);
      return o.Or(low, o.Shl(o.And(o.Shr(o.Load(b + 128 + 32 * h + l), 2 * k), low_two), 4));
    }
  }
}

// Every term's codes of one group row (Word: one row) or of the whole group (Word: 16 rows), at their
// places: lane by lane, each term's G / 4 chunks 64 bytes apart, this row's 4 bytes at `column` (4j for row
// j; 0 with 16 rows, whose 64 bytes fill the chunk). `row` is the first (or only) row's bytes.
template <GgmlType T, class Ops>
PLUMB_BODY_TARGET void GroupCodes(const Ops& o, const std::uint8_t* row, const Panel& panel,
                                  const std::size_t* lane_offset, std::uint8_t* group, int column) {
  constexpr int kBlockElements = Int8LayoutOf(T).block_bytes != 0 ? 32 : 256;
  constexpr int kBlockBytes = kBlockElements == 32 ? Int8LayoutOf(T).block_bytes : KLayoutOf(T).block_bytes;
  const int G = panel.shape.term_elements;
  const std::size_t term_bytes = panel.shape.TermBytes();
  for (int lane = 0; lane < 8; ++lane) {
    std::uint8_t* term = group + lane_offset[lane];
    for (int tau = panel.shape.FirstTerm(lane); tau < panel.terms; tau += 8, term += term_bytes) {
      const int e0 = tau * G;
      const std::uint8_t* block = row + static_cast<std::size_t>(e0 / kBlockElements) * kBlockBytes;
      for (int c = 0; c < G / 4; ++c)
        o.Store(term + 64 * c + column, Codes4<T>(o, block, e0 % kBlockElements + 4 * c));
    }
  }
}
