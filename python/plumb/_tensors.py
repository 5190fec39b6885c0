"""Tensors between numpy and the extension: (safetensors dtype name, shape, little-endian bytes).

numpy has no bfloat16, so a BF16 tensor is a uint16 array of its bits (as safetensors.numpy cannot read it
at all); pass dtype="BF16" where a uint16 array means BF16."""
import numpy as np

TO_NUMPY = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": np.uint16, "I64": np.int64,
            "I32": np.int32, "I16": np.int16, "I8": np.int8, "U64": np.uint64, "U32": np.uint32,
            "U16": np.uint16, "U8": np.uint8, "BOOL": np.bool_}
FROM_NUMPY = {np.dtype(v): k for k, v in TO_NUMPY.items() if k != "BF16"}


def to_wire(name, array, dtype=None):
    """array as the extension takes it; dtype overrides the name numpy's dtype gives (only "BF16" for uint16)."""
    a = np.asarray(array)
    name_of = FROM_NUMPY.get(a.dtype.newbyteorder("="))
    if name_of is None:
        raise TypeError(f"tensor {name!r}: numpy dtype {a.dtype} has no safetensors name "
                        f"(use one of {sorted(str(np.dtype(d)) for d in FROM_NUMPY)})")
    if dtype is not None and dtype != name_of and not (dtype == "BF16" and name_of == "U16"):
        raise TypeError(f"tensor {name!r}: numpy dtype {a.dtype}, but {dtype} is needed"
                        + (" (BF16 as a uint16 array of its bits)" if dtype == "BF16" else ""))
    a = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<"))
    return (dtype or name_of, [int(d) for d in a.shape], a.tobytes())


def from_wire(tensor):
    dtype, shape, data = tensor
    return np.frombuffer(data, dtype=np.dtype(TO_NUMPY[dtype]).newbyteorder("<")).reshape(shape).copy()


def dict_from_wire(tensors):
    return {name: from_wire(t) for name, t in tensors.items()}
