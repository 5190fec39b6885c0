"""The reference ops on numpy arrays: each typed call gives the suite's expected outputs bit for bit from
the case's tensors, quantization round-trips as the C++ does, and a bad shape or dtype is a Python
exception that names it."""
import numpy as np
import pytest

from plumb import ops
from conftest import op_cases

WEIGHT_NAMES = ("w", "w_scale", "w_scales", "w_zeros", "w_tensor_scale", "qweight", "qzeros", "scales")


def cases_of(*op_names):
    return [c for c in op_cases() if c.op in op_names]


def weights(case):
    return {n: a for n, a in case.inputs().items() if n in WEIGHT_NAMES}


@pytest.mark.parametrize("case", cases_of("gemv", "gemm"), ids=lambda c: c.name)
def test_gemv_and_gemm_of_every_weight_dtype_match_the_suite(case):
    p, t = case.params, case.inputs()
    call = ops.gemv if case.op == "gemv" else ops.gemm
    y = call(p["weight_dtype"], t["x"], group_size=p.get("group_size"), fp8_scale=p.get("fp8_scale"),
             **weights(case))
    assert y.tobytes() == case.expected()["y"].tobytes()


@pytest.mark.parametrize("case", cases_of("attention_decode", "attention_prefill"), ids=lambda c: c.name)
def test_attention_over_contiguous_and_paged_caches_matches_the_suite(case):
    p, t = case.params, case.inputs()
    common = dict(kv_dtype=p["kv_dtype"], layout=p["layout"], k_scale=t["k_scale"], v_scale=t["v_scale"],
                  window=p.get("window", 0))
    if case.op == "attention_decode":
        out = ops.attention_decode(t["q"], t["k_cache"], t["v_cache"], t["block_tables"], t["seq_lens"], **common)
    else:
        out = ops.attention_prefill(t["q"], t["k_cache"], t["v_cache"], p["first_pos"],
                                    block_tables=t.get("block_tables"), **common)
    assert out.tobytes() == case.expected()["out"].tobytes()


@pytest.mark.parametrize("case", cases_of("rmsnorm", "rope", "softmax", "swiglu", "kv_quant",
                                          "reshape_and_cache"), ids=lambda c: c.name)
def test_the_other_ops_match_the_suite(case):
    p, t, expected = case.params, case.inputs(), case.expected()
    if case.op == "rmsnorm":
        out = {"out": ops.rmsnorm(t["x"], t["weight"], p["eps"])}
    elif case.op == "rope":
        out = {"out": ops.rope(t["x"], t["positions"], p["theta"], p["pairing"], t.get("freq_factors"))}
    elif case.op == "softmax":
        out = {"out": ops.softmax(t["x"])}
    elif case.op == "swiglu":
        out = {"out": ops.swiglu(t["gate"], t["up"])}
    elif case.op == "kv_quant":
        out = {"codes": ops.kv_encode(t["x"], p["format"], t["scale"][0])}
    else:
        k, v = ops.reshape_and_cache(t["key"], t["value"], t["slot_mapping"], t["k_cache_in"], t["v_cache_in"],
                                     p["kv_dtype"], p["layout"], t["k_scale"], t["v_scale"])
        out = {"k_cache": k, "v_cache": v}
    for name, e in expected.items():
        assert out[name].tobytes() == e.tobytes(), name


def test_int4_quantize_and_dequantize_are_the_formats_own(suite):
    case = suite.case("gemv.int4_asym.n37_k333")
    t, g = case.inputs(), case.params["group_size"]
    w, _ = ops.decode_weight("int4_asym", 333, group_size=g, **weights(case))
    assert np.array_equal(ops.int4_dequantize(t["w"], t["w_scales"], t["w_zeros"], 333, "int4_asym", g), w)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 77)).astype(np.float32)
    for scheme in ("int4_sym", "int4_asym"):
        codes, scales, zeros = ops.int4_quantize(x, scheme, 32)
        assert codes.shape == (4, 39) and scales.shape == (4, 3) and scales.dtype == np.float16
        back = ops.int4_dequantize(codes, scales, zeros if zeros.size else None, 77, scheme, 32)
        step = np.repeat(scales.astype(np.float32), 32, axis=1)[:, :77]
        assert (np.abs(back - x) <= step * (1 + 1e-3)).all()  # within a step (sym clamps +8 to +7)


def test_fp8_quantize_encode_and_decode_round_trip():
    codes = np.arange(256, dtype=np.uint8)
    for fmt in ("fp8_e4m3", "fp8_e5m2"):
        values = ops.kv_decode(codes, fmt)
        finite = np.isfinite(values)
        assert np.array_equal(ops.kv_encode(values[finite], fmt)[values[finite] != 0],
                              codes[finite][values[finite] != 0])  # every finite code's value encodes to it
        w = np.random.default_rng(2).standard_normal((5, 40)).astype(np.float32)
        q, scales = ops.fp8_quantize(w, fmt, per_row=True)
        assert scales.shape == (5,) and np.allclose(ops.fp8_dequantize(q, scales, fmt), w, rtol=0.13, atol=1e-6)
    assert ops.kv_encode(np.float32([1e6, -1e6]), "fp8_e4m3").tolist() == [0x7E, 0xFE]  # SATFINITE: ±448


def test_kernels_agree_with_the_definition_to_rounding(suite):
    case = suite.case("gemm.q4_1.m5_n37_k320")
    t = case.inputs()
    a = ops.gemm("q4_1", t["x"], **weights(case))
    b = ops.gemm("q4_1", t["x"], impl="kernels", **weights(case))
    assert np.allclose(a, b, rtol=1e-4, atol=1e-4)


def test_rope_scaling_divides_each_pairs_frequency_by_freq_factors(suite):
    case = suite.case("rope.rotate_half.llama3_large")
    p, t, expected = case.params, case.inputs(), case.expected()["out"]
    assert p["scaling"]["rope_type"] == "llama3" and t["freq_factors"].shape == (p["head_dim"] // 2,)
    scaled = dict(theta=p["theta"], pairing=p["pairing"], freq_factors=t["freq_factors"])
    # plumb's library kernels (run-reference) give the definition's bits, scaled as unscaled.
    assert ops.rope(t["x"], t["positions"], impl="kernels", **scaled).tobytes() == expected.tobytes()
    # Divisors of 1 are no scaling, bit for bit; the scaling ignored is far off.
    ones = np.ones(p["head_dim"] // 2, np.float32)
    unscaled = ops.rope(t["x"], t["positions"], p["theta"], p["pairing"])
    assert ops.rope(t["x"], t["positions"], p["theta"], p["pairing"], ones).tobytes() == unscaled.tobytes()
    assert np.abs(unscaled - expected).max() > 0.1
    with pytest.raises(ValueError, match="freq_factors: 63 divisors, needs head_dim/2 = 64"):
        ops.rope(t["x"], t["positions"], p["theta"], freq_factors=t["freq_factors"][:-1])
    with pytest.raises(ValueError, match="freq_factors.*63 elements.*head_dim/2 = 64"):
        ops.compute("rope", p, {**t, "freq_factors": t["freq_factors"][:-1]})
    with pytest.raises(ValueError, match="params.scaling without"):
        ops.compute("rope", p, {"x": t["x"], "positions": t["positions"]})


def test_bad_shapes_and_dtypes_raise_python_errors_naming_them(suite):
    case = suite.case("gemv.f32.n37_k333")
    t = case.inputs()
    with pytest.raises(ValueError, match='"x".*332.*333|x.*elements'):
        ops.compute("gemv", case.params, {"w": t["w"], "x": t["x"][:-1]})
    with pytest.raises(ValueError, match="w.*bytes|elements"):
        ops.gemv("f32", t["x"], w=t["w"][:, :-1])
    with pytest.raises(TypeError, match="'w'.*F16"):
        ops.gemv("f16", t["x"], w=t["w"])
    with pytest.raises(ValueError, match="tensors"):
        ops.gemv("int4_sym", t["x"], group_size=32, w=t["w"])
    with pytest.raises(ValueError, match="not an op case"):
        ops.compute("conv2d", {}, {})
    with pytest.raises(ValueError, match="x: shape"):
        ops.rmsnorm(t["x"], t["x"], 1e-5)
    att = suite.case("attention_decode.nhd.f16").inputs()
    with pytest.raises(TypeError, match="k_cache.*F16"):
        ops.attention_decode(att["q"], att["k_cache"].astype(np.float32), att["v_cache"], att["block_tables"],
                             att["seq_lens"], "f16")
    with pytest.raises(ValueError, match="head_dim"):
        ops.attention_decode(att["q"][..., :8], att["k_cache"], att["v_cache"], att["block_tables"],
                             att["seq_lens"], "f16")
    bad_tables = att["block_tables"].copy()
    bad_tables[0, 0] = 999
    with pytest.raises(ValueError, match="block_tables entry 999"):
        ops.attention_decode(att["q"], att["k_cache"], att["v_cache"], bad_tables, att["seq_lens"], "f16")
    with pytest.raises(ValueError, match="group_size"):
        ops.int4_quantize(np.ones((2, 64), np.float32), "int4_sym", 0)
    with pytest.raises(ValueError, match="scales"):
        ops.int4_dequantize(np.zeros((2, 32), np.uint8), np.zeros((2, 1), np.float16), None, 64, "int4_sym", 32)
