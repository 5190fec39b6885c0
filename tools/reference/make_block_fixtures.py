"""Write fixtures/blocks/: random ggml blocks and what gguf-py's own dequantizer makes of them.

    python3 tools/reference/make_block_fixtures.py [--out fixtures/blocks]
    python3 tools/reference/make_block_fixtures.py --check     # regenerate in memory, compare bytes

Needs gguf==0.19.0 (gguf-py, llama.cpp's Python package) and numpy==2.2.6. The oracle is
gguf.quants.dequantize, which gguf-py documents as matching ggml-quants.c's dequantize_row_*; the C++
test (tests/formats/gguf_blocks_test.cpp) asserts plumb::DequantizeRow gives the same float32 bits.

For every type plumb dequantizes, blocks.safetensors holds
    "<TYPE>.bytes"   U8  [n_bytes]     the stored row (random bytes, see below)
    "<TYPE>.values"  F32 [n_elements]  gguf.quants.dequantize of those bytes
The quant bytes are uniformly random, except for edge blocks whose quant bytes are all 0x00, 0xFF, 0x80,
0x7F, 0x0F or 0xF0 (nibbles 0 and 15, int8 -128 and 127, 6-bit scales 0 and 63). The f16 scale fields
(d, m, dmin) are always finite: random magnitudes 2^-12 .. 2^4 of either sign, plus 0, -0, the smallest and
largest subnormals and +-65504 in some blocks. MXFP4's E8M0 scale byte is random, with chosen codes in some
blocks (E8M0_SPECIALS). F32, F16 and BF16 rows are random bit patterns (NaNs with
payloads, infinities and subnormals included), with the special codes listed in SPECIAL_* appended.
"""

import argparse
import os
import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.constants import GGML_QUANT_SIZES
import gguf.quants

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import safetensors_io  # noqa: E402

SEED = 20250301
FILE_NAME = "blocks.safetensors"

# Byte offsets of the f16 scale fields in one block (ggml-common.h's block_* structs).
SCALE_OFFSETS = {
    T.Q4_0: [0],
    T.Q4_1: [0, 2],
    T.Q5_0: [0],
    T.Q5_1: [0, 2],
    T.Q8_0: [0],
    T.Q2_K: [80, 82],
    T.Q3_K: [108],
    T.Q4_K: [0, 2],
    T.Q5_K: [0, 2],
    T.Q6_K: [208],
}
BLOCKS = {t: (64 if GGML_QUANT_SIZES[t][0] == 32 else 16) for t in SCALE_OFFSETS}
# MXFP4 (type 39): its scale is one E8M0 byte (offset 0), every one of the 256 codes is valid, so its blocks
# are random bytes with the edge fills and, in the blocks after them, the scale codes of E8M0_SPECIALS
# (0 and 1: ggml's two subnormal scales; 127: 1/2; 254; 255: 2^127, not NaN). Drawn after every other type,
# so that adding it changed none of their bytes.
E8M0_SPECIALS = [0, 1, 2, 126, 127, 128, 253, 254, 255]
BLOCKS[T.MXFP4] = 64
EDGE_FILLS = [0x00, 0xFF, 0x80, 0x7F, 0x0F, 0xF0]
# f16 codes for the scale fields of the blocks after the edge blocks: 0, -0, smallest and largest
# subnormal (positive and negative), the largest finite value (both signs), 1.
SPECIAL_SCALES = [0x0000, 0x8000, 0x0001, 0x03FF, 0x8001, 0x83FF, 0x7BFF, 0xFBFF, 0x3C00]

PLAIN_ELEMENTS = 1024
SPECIAL_F32 = [0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0xFFC12345,
               0x00000001, 0x807FFFFF, 0x7F7FFFFF, 0x3F800000]
SPECIAL_F16 = [0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0x7C01, 0xFDFF, 0x0001, 0x83FF, 0x7BFF, 0x3C00]
SPECIAL_BF16 = [0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0x7F81, 0xFFFF, 0x0001, 0x807F, 0x7F7F, 0x3F80]


def random_scales(rng, count):
    """Finite f16 codes of sensible magnitude: +-2^u, u uniform in [-12, 4]."""
    magnitude = np.exp2(rng.uniform(-12.0, 4.0, size=count))
    sign = np.where(rng.integers(0, 2, size=count) == 1, -1.0, 1.0)
    return (sign * magnitude).astype(np.float16).view(np.uint16)


def make_quant_row(rng, qtype):
    block_elements, block_bytes = GGML_QUANT_SIZES[qtype]
    n_blocks = BLOCKS[qtype]
    blocks = rng.integers(0, 256, size=(n_blocks, block_bytes), dtype=np.uint8)
    scale_bytes = np.zeros(block_bytes, dtype=bool)
    for offset in SCALE_OFFSETS[qtype]:
        scale_bytes[offset : offset + 2] = True
    for i, fill in enumerate(EDGE_FILLS):
        blocks[i, ~scale_bytes] = fill
    for offset in SCALE_OFFSETS[qtype]:
        codes = random_scales(rng, n_blocks)
        first = len(EDGE_FILLS)
        # Each scale field gets the specials in a different rotation, so that e.g. d = 0 meets a nonzero m.
        codes[first : first + len(SPECIAL_SCALES)] = np.roll(SPECIAL_SCALES, offset)
        blocks[:, offset : offset + 2] = codes.astype("<u2").view(np.uint8).reshape(n_blocks, 2)
    return blocks.reshape(-1)


def make_mxfp4_row(rng):
    block_bytes = GGML_QUANT_SIZES[T.MXFP4][1]
    blocks = rng.integers(0, 256, size=(BLOCKS[T.MXFP4], block_bytes), dtype=np.uint8)
    for i, fill in enumerate(EDGE_FILLS):
        blocks[i, 1:] = fill
    first = len(EDGE_FILLS)
    blocks[first : first + len(E8M0_SPECIALS), 0] = E8M0_SPECIALS
    return blocks.reshape(-1)


def make_plain_row(rng, qtype):
    if qtype == T.F32:
        codes = np.concatenate([rng.integers(0, 2**32, size=PLAIN_ELEMENTS, dtype=np.uint32),
                                np.array(SPECIAL_F32, dtype=np.uint32)])
        return codes.astype("<u4").view(np.uint8)
    special = SPECIAL_F16 if qtype == T.F16 else SPECIAL_BF16
    codes = np.concatenate([rng.integers(0, 2**16, size=PLAIN_ELEMENTS, dtype=np.uint16),
                            np.array(special, dtype=np.uint16)])
    return codes.astype("<u2").view(np.uint8)


def build():
    """All fixture tensors, deterministically from SEED."""
    rng = np.random.default_rng(SEED)
    tensors = {}
    for qtype in [T.F32, T.F16, T.BF16] + list(SCALE_OFFSETS) + [T.MXFP4]:
        if qtype in (T.F32, T.F16, T.BF16):
            raw = make_plain_row(rng, qtype)
        elif qtype == T.MXFP4:
            raw = make_mxfp4_row(rng)
        else:
            raw = make_quant_row(rng, qtype)
        values = np.asarray(gguf.quants.dequantize(raw.copy(), qtype), dtype=np.float32).reshape(-1)
        block_elements, block_bytes = GGML_QUANT_SIZES[qtype]
        assert values.size == raw.size // block_bytes * block_elements, qtype.name
        tensors[f"{qtype.name}.bytes"] = raw
        # Kept as raw bits: NaN payloads must survive any float handling on the way to the file.
        tensors[f"{qtype.name}.values"] = values.view(np.float32)
    metadata = {
        "generator": "tools/reference/make_block_fixtures.py",
        "oracle": f"gguf {gguf_version()} gguf.quants.dequantize",
        "seed": str(SEED),
    }
    return safetensors_io.serialize(tensors, metadata)


def gguf_version():
    from importlib.metadata import version

    return version("gguf")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser.add_argument("--out", default=os.path.join(root, "fixtures", "blocks"))
    parser.add_argument("--check", action="store_true", help="compare with the committed file, write nothing")
    args = parser.parse_args()
    blob = build()
    path = os.path.join(args.out, FILE_NAME)
    if args.check:
        with open(path, "rb") as f:
            same = f.read() == blob
        print(f"{'PASS' if same else 'FAIL'} {path} reproduces ({len(blob)} bytes)")
        return 0 if same else 1
    os.makedirs(args.out, exist_ok=True)
    with open(path, "wb") as f:
        f.write(blob)
    print(f"wrote {path} ({len(blob)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
