"""Q4_K and Q6_K quantizers, which gguf-py 0.19 lacks (gguf.quants.quantize raises NotImplementedError).

Used only to write fixture weights (fixtures/tiny-gemma3/model.q.gguf). They are simple round-to-nearest
quantizers, not ports of ggml's quantize_row_q4_K_ref / q6_K_ref (which search for better scales), so
the bytes differ from what llama-quantize would write; that does not matter for a fixture, whose golden
is computed from gguf-py's own dequantization of whatever bytes are in the file. What matters is that
the blocks have ggml's layout (ggml-common.h block_q4_K / block_q6_K), which test_reference.py checks
by a round trip through gguf.quants.dequantize.

    block_q4_K (256 values, 144 bytes): f16 d, f16 dmin, 12 bytes of 6-bit scales and mins of the eight
        32-value sub-blocks, 128 bytes of 4-bit quants; value = d * sc * q - dmin * m.
    block_q6_K (256 values, 210 bytes): 128 bytes low 4 bits, 64 bytes high 2 bits, 16 int8 scales of the
        sixteen 16-value sub-blocks, f16 d; value = d * scale * (q - 32).
"""

import numpy as np

QK_K = 256


def _f16(values):
    """Rounded to float16 and back to float32 (what the block stores and the dequantizer reads)."""
    return values.astype(np.float16).astype(np.float32)


def _safe_divide(a, b):
    return np.divide(a, b, out=np.zeros_like(a), where=b > 0)


def quantize_q4_k(values):
    """[rows, cols] float32 (cols a multiple of 256) -> [rows, cols / 256 * 144] uint8 Q4_K blocks."""
    rows, cols = values.shape
    x = values.astype(np.float32).reshape(-1, 8, 32)  # blocks, sub-blocks, values
    low = np.minimum(x.min(axis=-1), 0)  # the offset is a non-negative "min" subtracted, so low <= 0
    sub_scale = (x.max(axis=-1) - low) / 15
    sub_min = -low
    d = _f16(sub_scale.max(axis=-1) / 63)
    dmin = _f16(sub_min.max(axis=-1) / 63)
    sc = np.clip(np.rint(_safe_divide(sub_scale, d[:, None])), 0, 63).astype(np.uint8)
    m = np.clip(np.rint(_safe_divide(sub_min, dmin[:, None])), 0, 63).astype(np.uint8)
    step = d[:, None] * sc  # [blocks, 8]
    offset = dmin[:, None] * m
    q = np.clip(np.rint(_safe_divide(x + offset[..., None], np.broadcast_to(step[..., None], x.shape))), 0, 15).astype(np.uint8)

    # 12 scale bytes: j < 4: sc[j] | (sc[j+4] >> 4) << 6, then m[j] | (m[j+4] >> 4) << 6, then
    # (sc[j+4] & 15) | (m[j+4] & 15) << 4 (gguf-py's Q4_K.get_scale_min read backwards).
    scales = np.concatenate(
        [
            (sc[:, :4] & 63) | ((sc[:, 4:] >> 4) << 6),
            (m[:, :4] & 63) | ((m[:, 4:] >> 4) << 6),
            (sc[:, 4:] & 15) | ((m[:, 4:] & 15) << 4),
        ],
        axis=1,
    ).astype(np.uint8)
    # 128 quant bytes: per 64 values, byte l holds value l (low nibble) and value 32 + l (high nibble).
    pairs = q.reshape(-1, 4, 2, 32)
    qs = (pairs[:, :, 0, :] | (pairs[:, :, 1, :] << 4)).reshape(-1, 128)
    blocks = np.concatenate([d.astype(np.float16).view(np.uint8).reshape(-1, 2), dmin.astype(np.float16).view(np.uint8).reshape(-1, 2), scales, qs], axis=1)
    return blocks.reshape(rows, cols // QK_K * 144)


def quantize_q6_k(values):
    """[rows, cols] float32 (cols a multiple of 256) -> [rows, cols / 256 * 210] uint8 Q6_K blocks."""
    rows, cols = values.shape
    x = values.astype(np.float32).reshape(-1, 16, 16)  # blocks, sub-blocks, values
    sub_scale = np.abs(x).max(axis=-1) / 31  # quants in -31 .. 31 (the format allows -32)
    d = _f16(sub_scale.max(axis=-1) / 127)
    sc = np.clip(np.rint(_safe_divide(sub_scale, d[:, None])), 0, 127).astype(np.int8)
    step = d[:, None] * sc.astype(np.float32)
    q = (np.clip(np.rint(_safe_divide(x, np.broadcast_to(step[..., None], x.shape))), -32, 31) + 32).astype(np.uint8)
    q = q.reshape(-1, QK_K)

    low, high = q & 15, q >> 4
    # Per 128 values: ql byte i (< 64) holds value i (low nibble) and 64 + i (high nibble);
    # qh byte l (< 32) holds the top two bits of values l, 32 + l, 64 + l, 96 + l (bits 0, 2, 4, 6).
    low = low.reshape(-1, 2, 2, 64)
    ql = (low[:, :, 0, :] | (low[:, :, 1, :] << 4)).reshape(-1, 128)
    high = high.reshape(-1, 2, 4, 32)
    qh = (high[:, :, 0, :] | (high[:, :, 1, :] << 2) | (high[:, :, 2, :] << 4) | (high[:, :, 3, :] << 6)).reshape(-1, 64)
    blocks = np.concatenate([ql, qh, sc.view(np.uint8), d.astype(np.float16).view(np.uint8).reshape(-1, 2)], axis=1)
    return blocks.astype(np.uint8).reshape(rows, cols // QK_K * 210)


def quantize(values, qtype):
    """gguf.quants.quantize, with Q4_K and Q6_K added."""
    import gguf

    T = gguf.GGMLQuantizationType
    if qtype == T.Q4_K:
        return quantize_q4_k(values)
    if qtype == T.Q6_K:
        return quantize_q6_k(values)
    return gguf.quants.quantize(values, qtype)
