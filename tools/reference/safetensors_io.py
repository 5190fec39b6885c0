"""A small, self-contained reader and writer for the safetensors file format.

Written from the format's definition, not from any existing implementation, so that
the fixtures do not depend on the code they are meant to check:

    bytes [0, 8)        N, the header length, as an unsigned 64-bit little-endian integer
    bytes [8, 8 + N)    the header: UTF-8 JSON, an object mapping each tensor name to
                        {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]},
                        plus an optional "__metadata__" object of string -> string
    bytes [8 + N, EOF)  the data section; data_offsets are relative to its start,
                        each tensor is stored row-major (C order), little-endian

The writer is deterministic (same tensors in, same bytes out): header keys are sorted,
tensors are laid out in sorted-name order, and the header is padded with spaces so
that N is a multiple of 8 (which puts the data section on an 8-byte boundary, as the
official library does).
"""

import json
import struct

import numpy as np

# safetensors dtype name -> little-endian NumPy dtype.
DTYPES = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"),
    "U8": np.dtype("u1"),
}

METADATA_KEY = "__metadata__"
HEADER_ALIGNMENT = 8


def _dtype_name(array):
    """The safetensors dtype name of a NumPy array (byte order is normalised on write)."""
    for name, dtype in DTYPES.items():
        if array.dtype.kind == dtype.kind and array.dtype.itemsize == dtype.itemsize:
            return name
    raise ValueError(f"unsupported dtype for safetensors: {array.dtype}")


def serialize(tensors, metadata=None):
    """Return the bytes of a safetensors file holding `tensors` (a dict name -> ndarray).

    `metadata`, if given, must map strings to strings (the format allows nothing else).
    """
    header = {}
    chunks = []
    offset = 0
    for name in sorted(tensors):
        if name == METADATA_KEY:
            raise ValueError(f"{METADATA_KEY!r} is reserved and cannot name a tensor")
        array = np.asarray(tensors[name])
        dtype_name = _dtype_name(array)
        data = np.ascontiguousarray(array, dtype=DTYPES[dtype_name]).tobytes(order="C")
        header[name] = {
            "dtype": dtype_name,
            "shape": [int(n) for n in array.shape],
            "data_offsets": [offset, offset + len(data)],
        }
        chunks.append(data)
        offset += len(data)
    if metadata is not None:
        for key, value in metadata.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise ValueError("safetensors metadata must map str to str")
        header[METADATA_KEY] = dict(metadata)

    header_bytes = json.dumps(header, sort_keys=True, separators=(",", ":")).encode("utf-8")
    padding = (-len(header_bytes)) % HEADER_ALIGNMENT
    header_bytes += b" " * padding
    return struct.pack("<Q", len(header_bytes)) + header_bytes + b"".join(chunks)


def save_file(path, tensors, metadata=None):
    """Write `tensors` to `path` as a safetensors file (see serialize)."""
    with open(path, "wb") as f:
        f.write(serialize(tensors, metadata))


def parse_header(blob):
    """Split a safetensors file's bytes into (header dict, data section bytes), validating the layout.

    Checks what a careful reader must: the header fits in the file, is a JSON object,
    every entry has a known dtype, a byte range of exactly prod(shape) * itemsize bytes,
    and the ranges tile the data section with no gap and no overlap.
    """
    if len(blob) < 8:
        raise ValueError("file shorter than the 8-byte header length")
    (header_len,) = struct.unpack("<Q", blob[:8])
    if header_len > len(blob) - 8:
        raise ValueError(f"header length {header_len} runs past the end of the file")
    header = json.loads(blob[8 : 8 + header_len].decode("utf-8"))
    if not isinstance(header, dict):
        raise ValueError("header is not a JSON object")
    data = blob[8 + header_len :]

    ranges = []
    for name, entry in header.items():
        if name == METADATA_KEY:
            continue
        if entry["dtype"] not in DTYPES:
            raise ValueError(f"{name}: unsupported dtype {entry['dtype']}")
        begin, end = entry["data_offsets"]
        expected = int(np.prod(entry["shape"], dtype=np.int64)) * DTYPES[entry["dtype"]].itemsize
        if not (0 <= begin <= end <= len(data)) or end - begin != expected:
            raise ValueError(f"{name}: bad data_offsets {entry['data_offsets']} for shape {entry['shape']}")
        ranges.append((begin, end, name))

    position = 0
    for begin, end, name in sorted(ranges):
        if begin != position:
            raise ValueError(f"{name}: data section has a gap or overlap at byte {position}")
        position = end
    if position != len(data):
        raise ValueError("data section has trailing bytes not owned by any tensor")
    return header, data


def load_file(path):
    """Read a safetensors file; return (dict name -> ndarray in native byte order, metadata dict)."""
    with open(path, "rb") as f:
        blob = f.read()
    header, data = parse_header(blob)
    tensors = {}
    for name, entry in header.items():
        if name == METADATA_KEY:
            continue
        begin, end = entry["data_offsets"]
        dtype = DTYPES[entry["dtype"]]
        array = np.frombuffer(data[begin:end], dtype=dtype).reshape(entry["shape"])
        tensors[name] = array.astype(dtype.newbyteorder("="), copy=True)
    return tensors, dict(header.get(METADATA_KEY, {}))
