#!/usr/bin/env python3
"""Writes fixtures/gguf/: small GGUF files written by the gguf reference package (gguf-py), and a JSON
manifest of exactly what was asked to be written, for tests/formats/gguf_test.cpp to compare with.

The oracle is the writer's input (SAMPLES below); the file is also read back with gguf-py's GGUFReader and
every key, type, value, tensor dim, type and offset compared with that input before anything is saved, so
the manifest states what two independent implementations (gguf-py's writer and reader) agree the file holds.

Files (layout: docs/formats.md, "GGUF container"):
  all_types_v3.gguf   every value type: edge integers (uint64 > 2^63, the most negative of each signed
                      type), float NaN/inf/-0/subnormal, an empty string, a string with a NUL and bytes
                      that are not UTF-8, a non-ASCII key, arrays of every scalar type, nested arrays
                      (2 and 3 deep); tensors F32, F16, I32, Q8_0, Q4_1 at the default alignment (32)
  all_types_v2.gguf   the same content as GGUF version 2 (v2 and v3 differ only in the version field;
                      gguf-py always writes its GGUF_VERSION constant, so this sets it to 2)
  align64_v3.gguf     general.alignment = 64 (uint32), tensors placed at multiples of 64
  big_endian_v3.gguf  written with endianess=BIG; plumb must reject it, saying it is big-endian
  manifest.json       per file: version, alignment, data_offset, metadata (typed), tensors (dims in ggml
                      order, type id, offset, n_bytes, data as hex)

Not covered, because gguf-py refuses to write it: an empty array (GGUFWriter raises "Empty array"); the
builder-based C++ tests cover it.

Usage:  python tools/reference/make_gguf_samples.py [--out DIR]     (default: fixtures/gguf)
        python tools/reference/make_gguf_samples.py --check         (regenerate in a temp dir, compare)
Needs: gguf==0.19.0, numpy (the versions pinned in tools/reference/requirements.txt, plus gguf).
"""

from __future__ import annotations

import argparse
import filecmp
import json
import math
import struct
import sys
import tempfile
from pathlib import Path

import numpy as np

import gguf
import gguf.gguf_writer
from gguf import GGMLQuantizationType as Q
from gguf import GGUFValueType as T

ARCH = "plumbtest"


def _f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


# (key, value type, value, array element type or None). gguf-py infers the element type of inner arrays
# (ints -> INT32, str -> STRING), so nested arrays here use those.
METADATA = [
    ("t.uint8.max", T.UINT8, 255, None),
    ("t.uint8.zero", T.UINT8, 0, None),
    ("t.int8.min", T.INT8, -128, None),
    ("t.int8.max", T.INT8, 127, None),
    ("t.uint16.max", T.UINT16, 65535, None),
    ("t.int16.min", T.INT16, -32768, None),
    ("t.uint32.max", T.UINT32, 2**32 - 1, None),
    ("t.int32.min", T.INT32, -(2**31), None),
    ("t.int32.neg1", T.INT32, -1, None),
    ("t.uint64.max", T.UINT64, 2**64 - 1, None),
    ("t.uint64.above_int64", T.UINT64, 2**63 + 5, None),
    ("t.int64.min", T.INT64, -(2**63), None),
    ("t.int64.max", T.INT64, 2**63 - 1, None),
    ("t.float32.pi", T.FLOAT32, _f32(math.pi), None),
    ("t.float32.nan", T.FLOAT32, float("nan"), None),
    ("t.float32.neg_inf", T.FLOAT32, float("-inf"), None),
    ("t.float32.neg_zero", T.FLOAT32, -0.0, None),
    ("t.float32.subnormal", T.FLOAT32, _f32(1e-45), None),
    ("t.float64.e", T.FLOAT64, math.e, None),
    ("t.float64.nan", T.FLOAT64, float("nan"), None),
    ("t.float64.tiny", T.FLOAT64, 5e-324, None),
    ("t.bool.true", T.BOOL, True, None),
    ("t.bool.false", T.BOOL, False, None),
    ("t.string.empty", T.STRING, "", None),
    ("t.string.text", T.STRING, "hello, GGUF", None),
    ("t.string.unicode", T.STRING, "naïve ☃ 日本", None),
    ("t.string.bytes", T.STRING, b"a\x00b\xff\xfe", None),  # NUL inside, not UTF-8
    ("t.ключ.ünï", T.STRING, "non-ASCII key", None),
    ("t.array.uint8", T.ARRAY, [0, 1, 255], T.UINT8),
    ("t.array.int8", T.ARRAY, [-128, 0, 127], T.INT8),
    ("t.array.uint16", T.ARRAY, [0, 65535], T.UINT16),
    ("t.array.int16", T.ARRAY, [-32768, 32767], T.INT16),
    ("t.array.uint32", T.ARRAY, [0, 2**32 - 1], T.UINT32),
    ("t.array.int32", T.ARRAY, [-(2**31), -1, 2**31 - 1], T.INT32),
    ("t.array.uint64", T.ARRAY, [0, 2**63, 2**64 - 1], T.UINT64),
    ("t.array.int64", T.ARRAY, [-(2**63), 2**63 - 1], T.INT64),
    ("t.array.float32", T.ARRAY, [_f32(0.1), float("nan"), float("inf")], T.FLOAT32),
    ("t.array.float64", T.ARRAY, [0.1, -2.5e300], T.FLOAT64),
    ("t.array.bool", T.ARRAY, [True, False, True], T.BOOL),
    ("t.array.string", T.ARRAY, ["", "a", "hello world", "ü"], T.STRING),
    ("t.array.nested2", T.ARRAY, [[1, -2, 3], [4]], None),
    ("t.array.nested2_strings", T.ARRAY, [["a", "b"], [""], ["c"]], None),
    ("t.array.nested3", T.ARRAY, [[[1], [2, 3]], [[-4]]], None),
]


def _tensors_all_types() -> list[tuple[str, np.ndarray, Q | None]]:
    rng = np.random.default_rng(1234)
    return [
        ("t.f32", rng.standard_normal((2, 3)).astype(np.float32), None),
        ("t.f16", rng.standard_normal((4,)).astype(np.float16), None),
        ("t.i32", np.arange(-2, 3, dtype=np.int32), None),
        # Quantized tensors are given as their bytes; (rows, bytes per row) becomes dims [32, rows].
        ("t.q8_0", rng.integers(0, 256, size=(2, 34), dtype=np.uint8), Q.Q8_0),
        ("t.q4_1", rng.integers(0, 256, size=(1, 20), dtype=np.uint8), Q.Q4_1),
    ]


def _tensors_align64() -> list[tuple[str, np.ndarray, Q | None]]:
    return [
        ("a", np.arange(5, dtype=np.float32), None),
        ("b", np.arange(3, dtype=np.int16).reshape(3), None),
        ("c", np.full((2, 2), 7, dtype=np.float32), None),
    ]


SAMPLES = {
    "all_types_v3.gguf": dict(version=3, metadata=METADATA, tensors=_tensors_all_types, alignment=None),
    "all_types_v2.gguf": dict(version=2, metadata=METADATA, tensors=_tensors_all_types, alignment=None),
    "align64_v3.gguf": dict(version=3, metadata=METADATA[:3], tensors=_tensors_align64, alignment=64),
    "big_endian_v3.gguf": dict(version=3, metadata=METADATA[:2], tensors=_tensors_align64, alignment=None,
                               big_endian=True),
}


# --------------------------------------------------------------------------------------------------------
# Writing


def _write(path: Path, spec: dict) -> None:
    endian = gguf.GGUFEndian.BIG if spec.get("big_endian") else gguf.GGUFEndian.LITTLE
    saved_version = gguf.gguf_writer.GGUF_VERSION
    gguf.gguf_writer.GGUF_VERSION = spec["version"]  # the writer's header uses this module global
    try:
        w = gguf.GGUFWriter(str(path), arch=ARCH, endianess=endian)
        if spec["alignment"] is not None:
            w.add_custom_alignment(spec["alignment"])
        for key, vtype, value, sub_type in spec["metadata"]:
            w.add_key_value(key, value, vtype, sub_type=sub_type)
        for name, array, raw_dtype in spec["tensors"]():
            w.add_tensor(name, array, raw_dtype=raw_dtype)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
    finally:
        gguf.gguf_writer.GGUF_VERSION = saved_version


# --------------------------------------------------------------------------------------------------------
# The manifest: typed values, exact (floats as IEEE bit patterns, strings as hex bytes)


def _element_type(value: list, sub_type) -> T:
    return sub_type if sub_type is not None else T.get_type(value[0])


def _typed(vtype: T, value, sub_type=None) -> dict:
    name = vtype.name.lower()
    if vtype == T.FLOAT32:
        return {"type": name, "bits": struct.unpack("<I", struct.pack("<f", value))[0]}
    if vtype == T.FLOAT64:
        return {"type": name, "bits": struct.unpack("<Q", struct.pack("<d", value))[0]}
    if vtype == T.BOOL:
        return {"type": name, "value": bool(value)}
    if vtype == T.STRING:
        raw = value.encode("utf-8") if isinstance(value, str) else bytes(value)
        return {"type": name, "hex": raw.hex()}
    if vtype == T.ARRAY:
        etype = _element_type(value, sub_type)
        return {"type": name, "element_type": etype.name.lower(),
                "elements": [_typed(etype, v) for v in value]}
    return {"type": name, "value": int(value)}


def _metadata_entries(spec: dict) -> list[tuple[str, T, object, T | None]]:
    entries = [("general.architecture", T.STRING, ARCH, None)]  # GGUFWriter adds it first
    if spec["alignment"] is not None:
        entries.append(("general.alignment", T.UINT32, spec["alignment"], None))
    return entries + list(spec["metadata"])


def _flat_scalars(vtype: T, value, sub_type=None) -> list:
    """The leaf values of `value`, in file order (gguf-py's reader flattens nested arrays)."""
    if vtype != T.ARRAY:
        return [value]
    etype = _element_type(value, sub_type)
    return [leaf for v in value for leaf in _flat_scalars(etype, v)]


def _same(a, b) -> bool:
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return a == b


def _check_with_reader(path: Path, spec: dict, tensors: list) -> dict:
    """Reads `path` back with gguf-py's reader, asserts it holds `spec`, returns the layout it found."""
    r = gguf.GGUFReader(str(path))
    fields = [f for f in r.fields.values() if not f.name.startswith("GGUF.")]
    entries = _metadata_entries(spec)
    assert [f.name for f in fields] == [e[0] for e in entries], path
    for field, (key, vtype, value, sub_type) in zip(fields, entries):
        assert field.types[0] == vtype, (key, field.types)
        leaves = _flat_scalars(vtype, value, sub_type)
        if vtype == T.ARRAY:
            got = [field.parts[i] for i in field.data]
        else:
            got = [field.parts[-1]]
        assert len(got) == len(leaves), key
        for part, want in zip(got, leaves):
            if isinstance(want, str) or isinstance(want, bytes):
                raw = want.encode("utf-8") if isinstance(want, str) else want
                assert bytes(part.tobytes()) == raw, key
            else:
                assert _same(type(want)(part.tolist()[0]), want), (key, part, want)
    assert r.alignment == (spec["alignment"] or 32)
    assert [t.name for t in r.tensors] == [t[0] for t in tensors]
    for rt, (name, array, _raw) in zip(r.tensors, tensors):
        assert rt.data_offset % r.alignment == 0
        assert bytes(r.data[rt.data_offset:rt.data_offset + rt.n_bytes]) == array.tobytes(), name
    return {"alignment": int(r.alignment), "data_offset": int(r.data_offset), "tensors": r.tensors}


def _manifest_entry(path: Path, spec: dict) -> dict:
    tensors = spec["tensors"]()
    entry = {"version": spec["version"], "big_endian": bool(spec.get("big_endian"))}
    if spec.get("big_endian"):
        return entry  # plumb (and, on a little-endian host, this check) only needs to reject it
    found = _check_with_reader(path, spec, tensors)
    entry["alignment"] = found["alignment"]
    entry["data_offset"] = found["data_offset"]
    entry["metadata"] = [dict(key=k, **_typed(t, v, s)) for k, t, v, s in _metadata_entries(spec)]
    entry["tensors"] = [
        {
            "name": name,
            "type": int(rt.tensor_type),
            "type_name": rt.tensor_type.name,
            "dims": [int(d) for d in rt.shape],  # ggml order: innermost first
            "offset": int(rt.data_offset - found["data_offset"]),
            "n_bytes": int(rt.n_bytes),
            "data_hex": array.tobytes().hex(),
        }
        for rt, (name, array, _raw) in zip(found["tensors"], tensors)
    ]
    return entry


def generate(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    manifest = {"generator": f"tools/reference/make_gguf_samples.py with gguf-py {_gguf_version()}",
                "files": {}}
    for name, spec in SAMPLES.items():
        _write(out / name, spec)
        manifest["files"][name] = _manifest_entry(out / name, spec)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")


def _gguf_version() -> str:
    from importlib.metadata import version
    return version("gguf")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    root = Path(__file__).resolve().parents[2]
    parser.add_argument("--out", type=Path, default=root / "fixtures" / "gguf")
    parser.add_argument("--check", action="store_true",
                        help="regenerate in a temp dir and compare with --out")
    args = parser.parse_args()
    if not args.check:
        generate(args.out)
        print(f"wrote {args.out}")
        return 0
    with tempfile.TemporaryDirectory() as scratch:
        generate(Path(scratch))
        names = sorted(list(SAMPLES) + ["manifest.json"])
        _match, mismatch, errors = filecmp.cmpfiles(args.out, scratch, names, shallow=False)
        if mismatch or errors:
            print(f"differ from a fresh generation: {mismatch + errors}", file=sys.stderr)
            return 1
    print(f"{args.out} matches a fresh generation")
    return 0


if __name__ == "__main__":
    sys.exit(main())
