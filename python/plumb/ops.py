"""plumb's reference ops on numpy arrays: each call runs the C++ that computes a fixture case's outputs
(src/fixtures/ops.cpp), so impl="definition" (the default) gives bit for bit what the suite stores, and
impl="kernels" what plumb's library kernels give (BLAS, SIMD, threads: `plumb fixtures run-reference`).

Tensor names and layouts are docs/fixtures.md "Ops and tensor names". Sizes (n, k, heads, block_size, ...)
come from the arrays' shapes; a shape that does not fit raises ValueError (or TypeError for a dtype)."""
import json

import numpy as np

from . import _plumb
from ._tensors import dict_from_wire, from_wire, to_wire

# The element dtype of a KV cache of each kv_dtype (BF16: uint16 bits; FP8: uint8 codes).
_KV_NUMPY = {"f32": "F32", "f16": "F16", "bf16": "BF16", "fp8_e4m3": "U8", "fp8_e5m2": "U8"}
# The weight tensors of each weight_dtype and their safetensors dtypes (None: any numpy dtype of the size).
_WEIGHT_TENSORS = {
    "f32": {"w": "F32"}, "f16": {"w": "F16"}, "bf16": {"w": "BF16"},
    "fp8_e4m3": {"w": "U8", "w_scale": "F32"}, "fp8_e5m2": {"w": "U8", "w_scale": "F32"},
    "int4_sym": {"w": "U8", "w_scales": "F16"}, "int4_asym": {"w": "U8", "w_scales": "F16", "w_zeros": "U8"},
    "gptq": {"qweight": "I32", "qzeros": "I32", "scales": "F16"},
    "awq": {"qweight": "I32", "qzeros": "I32", "scales": "F16"},
    "q4_0": {"w": "U8"}, "q4_1": {"w": "U8"}, "q8_0": {"w": "U8"},
    "mxfp4": {"w": "U8", "w_scales": "U8"}, "nvfp4": {"w": "U8", "w_scales": "U8", "w_tensor_scale": "F32"},
    "mxfp8_e4m3": {"w": "U8", "w_scales": "U8"}, "mxfp8_e5m2": {"w": "U8", "w_scales": "U8"},
    "fp8_block128": {"w": "U8", "w_scales": "F32"},
}


def compute(op, params, inputs, impl="definition", dtypes=None):
    """The outputs of op case `op` (a manifest "op") from its params and inputs, as {name: array}:
    compute(case.op, case.params, case.inputs()) recomputes a case's expected outputs. dtypes names
    tensors whose numpy dtype does not say it (BF16 as uint16)."""
    if impl not in ("definition", "kernels"):
        raise ValueError(f"impl {impl!r}: 'definition' or 'kernels'")
    dtypes = dtypes or {}
    wire = {name: to_wire(name, a, dtypes.get(name)) for name, a in inputs.items()}
    return dict_from_wire(_plumb.compute(op, json.dumps(params), wire, impl == "definition"))


def _shape(name, a, ndim):
    a = np.asarray(a)
    if a.ndim != ndim:
        raise ValueError(f"{name}: shape {a.shape}, needs {ndim} dimensions")
    return a.shape


def _weight(weight_dtype, k, weights, group_size, fp8_scale):
    """params and inputs of a gemv/gemm weight; n from the weight's shape."""
    if weight_dtype not in _WEIGHT_TENSORS:
        raise ValueError(f"weight_dtype {weight_dtype!r}: one of {sorted(_WEIGHT_TENSORS)}")
    wanted = _WEIGHT_TENSORS[weight_dtype]
    if set(weights) != set(wanted):
        raise ValueError(f"weight_dtype {weight_dtype}: tensors {sorted(wanted)}, given {sorted(weights)}")
    if weight_dtype in ("gptq", "awq"):
        cols = _shape("qweight", weights["qweight"], 2)[1]
        n = cols if weight_dtype == "gptq" else cols * 8
    else:
        n = _shape("w", weights["w"], 2)[0]
    params = {"weight_dtype": weight_dtype, "n": int(n), "k": int(k)}
    if weight_dtype in ("int4_sym", "int4_asym", "gptq", "awq"):
        if group_size is None:
            raise ValueError(f"weight_dtype {weight_dtype} needs group_size")
        params["group_size"] = int(group_size)
    if weight_dtype in ("fp8_e4m3", "fp8_e5m2"):
        params["fp8_scale"] = "per_row" if np.asarray(weights["w_scale"]).size == n and n != 1 else "per_tensor"
        if fp8_scale is not None:
            params["fp8_scale"] = fp8_scale
    return params, dict(weights), dict(wanted)


def gemv(weight_dtype, x, group_size=None, fp8_scale=None, impl="definition", **weights):
    """y [n] = W·x for x [k] and W as stored (weights by their tensor names: w, w_scale, w_scales, w_zeros,
    w_tensor_scale, qweight, qzeros, scales); FP8's scale and NVFP4's tensor scale multiply each finished dot."""
    (k,) = _shape("x", x, 1)
    params, inputs, dtypes = _weight(weight_dtype, k, weights, group_size, fp8_scale)
    inputs["x"] = np.asarray(x, dtype=np.float32)
    return compute("gemv", params, inputs, impl, dtypes)["y"]


def gemm(weight_dtype, x, group_size=None, fp8_scale=None, impl="definition", **weights):
    """Y [m][n] = X·Wᵀ for X [m][k] (gemv's weights); the definition computes every row as gemv does."""
    m, k = _shape("x", x, 2)
    params, inputs, dtypes = _weight(weight_dtype, k, weights, group_size, fp8_scale)
    params["m"] = int(m)
    inputs["x"] = np.asarray(x, dtype=np.float32)
    return compute("gemm", params, inputs, impl, dtypes)["y"]


def decode_weight(weight_dtype, k, group_size=None, fp8_scale=None, offsets_only=False, **weights):
    """(W [n][k] F32, row_scale [n]): the weight decoded row by row by the definition, which gemv multiplies
    by x (then by row_scale: FP8's scale, else 1). offsets_only: every code read as 0 (the bound's offsets)."""
    params, inputs, dtypes = _weight(weight_dtype, k, weights, group_size, fp8_scale)
    wire = {name: to_wire(name, a, dtypes.get(name)) for name, a in inputs.items()}
    rows, scales = _plumb.decode_weight(json.dumps(params), wire, offsets_only)
    return from_wire(rows), from_wire(scales)


def rmsnorm(x, weight, eps, impl="definition"):
    """out [rows][n] = x / sqrt(mean(x²) + eps) · weight, per row (kernels/scalar.h RmsNorm)."""
    rows, n = _shape("x", x, 2)
    return compute("rmsnorm", {"rows": rows, "n": n, "eps": float(eps)},
                   {"x": np.asarray(x, np.float32), "weight": np.asarray(weight, np.float32)}, impl)["out"]


def rope(x, positions, theta, pairing="rotate_half", freq_factors=None, impl="definition"):
    """x [rows][n_heads][head_dim] rotated at positions [rows] (I32); pairing rotate_half or interleaved.
    freq_factors: RoPE scaling's per-pair divisors [head_dim/2] (pair i's inv_freq divided by element i; a
    scaled suite case's input of that name), or None for none."""
    rows, heads, hd = _shape("x", x, 3)
    params = {"rows": rows, "n_heads": heads, "head_dim": hd, "theta": float(theta), "pairing": pairing}
    inputs = {"x": np.asarray(x, np.float32), "positions": np.asarray(positions, np.int32)}
    if freq_factors is not None:
        (n,) = _shape("freq_factors", freq_factors, 1)
        if n != hd // 2:
            raise ValueError(f"freq_factors: {n} divisors, needs head_dim/2 = {hd // 2}")
        inputs["freq_factors"] = np.asarray(freq_factors, np.float32)
    return compute("rope", params, inputs, impl)["out"]


def softmax(x):
    """Each row of x [rows][n] (the max subtracted; kernels/scalar.h Softmax)."""
    rows, n = _shape("x", x, 2)
    return compute("softmax", {"rows": rows, "n": n}, {"x": np.asarray(x, np.float32)})["out"]


def swiglu(gate, up, impl="definition"):
    """silu(gate) · up over [n]."""
    (n,) = _shape("gate", gate, 1)
    return compute("swiglu", {"n": n}, {"gate": np.asarray(gate, np.float32),
                                        "up": np.asarray(up, np.float32)}, impl)["out"]


def _cache_params(k_cache, kv_dtype, layout):
    """n_kv_heads, head_dim and block_size of a cache in `layout` (docs/fixtures.md attention_decode)."""
    if kv_dtype not in _KV_NUMPY:
        raise ValueError(f"kv_dtype {kv_dtype!r}: one of {sorted(_KV_NUMPY)}")
    if layout == "nhd":
        _, block_size, kv_heads, hd = _shape("k_cache (nhd)", k_cache, 4)
    elif layout == "vllm":
        _, kv_heads, hd_x, block_size, x = _shape("k_cache (vllm)", k_cache, 5)
        hd = hd_x * x
    elif layout == "contiguous":
        kv_heads, block_size, hd = _shape("k_cache (contiguous)", k_cache, 3)
        return {"n_kv_heads": kv_heads, "head_dim": hd, "capacity": block_size}
    else:
        raise ValueError(f"layout {layout!r}: nhd, vllm or contiguous")
    return {"n_kv_heads": kv_heads, "head_dim": hd, "block_size": block_size}


def _window(window):
    """The "window" param: absent for 0 (no window), as in the suite's unwindowed cases."""
    return {"window": int(window)} if window else {}


def _attention(op, q, k_cache, v_cache, kv_dtype, layout, k_scale, v_scale, extra, inputs, impl):
    params = {"layout": layout, "kv_dtype": kv_dtype, **_cache_params(k_cache, kv_dtype, layout), **extra}
    kv_heads = params["n_kv_heads"]
    params["n_heads"] = int(np.asarray(q).shape[-2])
    if np.asarray(q).shape[-1] != params["head_dim"]:
        raise ValueError(f"q: head_dim {np.asarray(q).shape[-1]}, the cache's is {params['head_dim']}")
    ones = np.ones(kv_heads, np.float32)
    inputs = {**inputs, "q": np.asarray(q, np.float32), "k_cache": k_cache, "v_cache": v_cache,
              "k_scale": ones if k_scale is None else np.asarray(k_scale, np.float32),
              "v_scale": ones if v_scale is None else np.asarray(v_scale, np.float32)}
    dtypes = {"k_cache": _KV_NUMPY[kv_dtype], "v_cache": _KV_NUMPY[kv_dtype]}
    return compute(op, params, inputs, impl, dtypes)["out"]


def attention_decode(q, k_cache, v_cache, block_tables, seq_lens, kv_dtype, layout="nhd", k_scale=None,
                     v_scale=None, impl="definition", window=0):
    """out [batch][n_heads][head_dim]: one query per sequence over a paged cache (layout nhd or vllm), the
    query at position seq_lens − 1. FP8 caches hold codes (uint8), value = fp8(code) · scale per KV head.
    window > 0: a sliding window, the query at p attends to the positions t with p − t < window."""
    batch, _, _ = _shape("q", q, 3)
    tables = np.asarray(block_tables, np.int32)
    _shape("block_tables", tables, 2)
    extra = {"batch": batch, "max_blocks_per_seq": int(tables.shape[1]), **_window(window)}
    return _attention("attention_decode", q, k_cache, v_cache, kv_dtype, layout, k_scale, v_scale, extra,
                      {"block_tables": tables, "seq_lens": np.asarray(seq_lens, np.int32)}, impl)


def attention_prefill(q, k_cache, v_cache, first_pos, kv_dtype, layout="contiguous", block_tables=None,
                      k_scale=None, v_scale=None, impl="definition", window=0):
    """out [rows][n_heads][head_dim]: causal attention of q [rows][n_heads][head_dim] at positions first_pos..
    over a contiguous cache [n_kv_heads][capacity][head_dim] or a paged one (nhd, block_tables [1][blocks]);
    window as attention_decode's."""
    rows, _, _ = _shape("q", q, 3)
    extra, inputs = {"rows": rows, "first_pos": int(first_pos), **_window(window)}, {}
    if layout != "contiguous":
        if block_tables is None:
            raise ValueError(f"layout {layout}: needs block_tables [1][max_blocks_per_seq]")
        tables = np.asarray(block_tables, np.int32)
        _shape("block_tables", tables, 2)
        extra["max_blocks_per_seq"] = int(tables.shape[1])
        inputs = {"block_tables": tables, "seq_lens": np.array([first_pos + rows], np.int32)}
    return _attention("attention_prefill", q, k_cache, v_cache, kv_dtype, layout, k_scale, v_scale, extra,
                      inputs, impl)


def reshape_and_cache(key, value, slot_mapping, k_cache, v_cache, kv_dtype, layout="nhd", k_scale=None,
                      v_scale=None):
    """(k_cache, v_cache) after writing key, value [tokens][n_kv_heads][head_dim] at slot_mapping [tokens]
    (I64; negative: a padding token, nothing written), each element encoded as kv_encode does."""
    tokens, kv_heads, _ = _shape("key", key, 3)
    params = {"layout": layout, "kv_dtype": kv_dtype, "tokens": tokens, **_cache_params(k_cache, kv_dtype, layout)}
    ones = np.ones(kv_heads, np.float32)
    inputs = {"key": np.asarray(key, np.float32), "value": np.asarray(value, np.float32),
              "slot_mapping": np.asarray(slot_mapping, np.int64), "k_cache_in": k_cache, "v_cache_in": v_cache,
              "k_scale": ones if k_scale is None else np.asarray(k_scale, np.float32),
              "v_scale": ones if v_scale is None else np.asarray(v_scale, np.float32)}
    dtypes = {"k_cache_in": _KV_NUMPY[kv_dtype], "v_cache_in": _KV_NUMPY[kv_dtype]}
    out = compute("reshape_and_cache", params, inputs, "definition", dtypes)
    return out["k_cache"], out["v_cache"]


def kv_encode(x, kv_dtype, scale=1.0):
    """x (F32, any shape) stored as a KV cache of kv_dtype stores it: f16/bf16 round to nearest even (BF16 as
    uint16 bits), FP8 code = cvt(x / scale, SATFINITE) as CUDA's __nv_cvt_float_to_fp8 (the kv_quant op)."""
    return from_wire(_plumb.kv_encode(to_wire("x", np.asarray(x, np.float32)), kv_dtype, float(scale)))


def kv_decode(codes, kv_dtype, scale=1.0):
    """The F32 values of a cache's elements: exact for f16/bf16, fp8(code) · scale for FP8."""
    dtype = _KV_NUMPY.get(kv_dtype)
    return from_wire(_plumb.kv_decode(to_wire("codes", codes, dtype), kv_dtype, float(scale)))


def fp8_quantize(w, format, per_row=True):
    """(codes [rows][cols] uint8, scales [rows] or [1]) for an F32 weight, as vLLM quantizes weights:
    scale = amax / max finite, code = cvt(w · (1/scale), SATFINITE) (formats/fp8.h QuantizeFp8)."""
    codes, scales = _plumb.fp8_quantize(to_wire("w", np.asarray(w, np.float32)), format, bool(per_row))
    return from_wire(codes), from_wire(scales)


def fp8_dequantize(codes, scales, format):
    """The weight an FP8 matrix [rows][cols] with per-row ([rows]) or per-tensor ([1]) scales stands for."""
    rows, _ = _shape("codes", codes, 2)
    values = kv_decode(codes, format)
    scales = np.asarray(scales, np.float32)
    if scales.size not in (1, rows):
        raise ValueError(f"scales: {scales.size} values, needs 1 or rows = {rows}")
    return values * scales.reshape(-1, 1)  # one FP32 product per element, as the row scale is applied


def int4_quantize(w, scheme, group_size):
    """(codes [rows][ceil(cols/2)] uint8, scales [rows][groups] float16, zeros [rows][ceil(groups/2)] uint8,
    empty for int4_sym) of an F32 weight, round to nearest per group (formats/int4.h QuantizeInt4)."""
    wire = _plumb.int4_quantize(to_wire("w", np.asarray(w, np.float32)), scheme, int(group_size))
    return tuple(from_wire(t) for t in wire)


def int4_dequantize(codes, scales, zeros, cols, scheme, group_size):
    """The F32 weight [rows][cols] of INT4 arrays in plumb's layout (formats/int4.h DequantizeInt4Row)."""
    zeros = np.zeros((np.asarray(codes).shape[0], 0), np.uint8) if zeros is None else zeros
    return from_wire(_plumb.int4_dequantize(to_wire("codes", codes, "U8"), to_wire("scales", scales, "F16"),
                                            to_wire("zeros", zeros, "U8"), int(cols), scheme, int(group_size)))
