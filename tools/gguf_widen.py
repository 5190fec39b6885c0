#!/usr/bin/env python3
"""Writes a GGUF file's block-quantized and F16 matrices as BF16 (or F16): the same model, its weights
exactly the quantized file's values rounded once, for measuring the float formats' paths on a model that
ships only quantized (docs/quantization.md "BF16 panels"; `plumb pack` writes safetensors for the Llama
family, this keeps any GGUF architecture, Gemma 3 included). F32 tensors (norms) stay F32.

    build/venv/bin/python tools/gguf_widen.py models/gemma-3-270m-q4_k_m.gguf models/packs/gemma3-bf16.gguf

The metadata is copied as the gguf package's own gguf_new_metadata.py copies it; the rounding to BF16 is
round to nearest, ties to even (docs/formats.md "BF16").
"""
import argparse
import sys

import numpy as np

import gguf


def to_bf16_bits(values: np.ndarray) -> np.ndarray:
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    nan = (bits & 0x7FFFFFFF) > 0x7F800000
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    rounded[nan] = 0x7FFF
    return rounded


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source")
    parser.add_argument("out")
    parser.add_argument("--dtype", choices=["bf16", "f16"], default="bf16")
    args = parser.parse_args()

    reader = gguf.GGUFReader(args.source)
    arch = reader.fields[gguf.Keys.General.ARCHITECTURE].contents()
    writer = gguf.GGUFWriter(args.out, arch=arch, endianess=reader.endianess)
    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue
        val_type = field.types[0]
        sub_type = field.types[-1] if val_type == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), val_type, sub_type=sub_type)

    target = gguf.GGMLQuantizationType.BF16 if args.dtype == "bf16" else gguf.GGMLQuantizationType.F16
    tensors = []
    for t in reader.tensors:
        if t.tensor_type == gguf.GGMLQuantizationType.F32:
            data, raw = np.asarray(t.data), None
        else:
            values = gguf.quants.dequantize(t.data, t.tensor_type)
            data = to_bf16_bits(values) if args.dtype == "bf16" else values.astype(np.float16)
            raw = target
        tensors.append((t.name, data, raw))
        writer.add_tensor_info(t.name, data.shape, data.dtype, data.nbytes, raw_dtype=raw)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for _, data, _ in tensors:
        writer.write_tensor_data(data)
    writer.close()
    print(f"wrote {args.out}: {len(tensors)} tensors, the quantized ones as {args.dtype}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
