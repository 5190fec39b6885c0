"""Runs docs/fixtures.md's Python reader example exactly as printed (the first ```python block under
"## Reading the suite from Python") against the committed suite: it must PASS the cases it implements, and
its check() must FAIL a perturbed result; the speculative_verify cases must PASS an independent NumPy
recomputation of their rule, and so must the rope cases (RoPE scaling's divisors recomputed from
params.scaling too), also as an FP32 engine computes them, while a position off by one and ignored scaling
FAIL. CTest: reference.fixtures_reader (label reference)."""
import argparse
import json
import pathlib
import subprocess
import sys
import tempfile

import numpy as np


def example_code(docs: pathlib.Path) -> str:
    text = docs.read_text(encoding="utf-8")
    section = text.split("## Reading the suite from Python", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def speculative_verify(t: dict, p: dict) -> dict:
    """docs/fixtures.md "speculative_verify" recomputed with NumPy alone (no plumb code): the rule as the docs
    state it, in double, the residual normalised by its own sum."""
    rows, k, vocab = p["rows"], p["k"], p["vocab"]
    q, target = t["draft_probs"].astype(np.float64), t["target_probs"].astype(np.float64)
    accepted = np.zeros(rows, np.int32)
    tokens = np.full((rows, k + 1), -1, np.int32)
    residual = np.zeros((rows, vocab), np.float32)
    for r in range(rows):
        x, u = t["draft_tokens"][r], t["uniforms"][r]
        n = 0
        while n < k and u[n] * q[r, n, x[n]] < target[r, n, x[n]]:
            n += 1
        if n < k:
            mass = np.maximum(0.0, target[r, n] - q[r, n])
            dist = (mass / mass.sum()).astype(np.float32)  # no case has a residual of total 0
        else:
            dist = t["target_probs"][r, k]
        order = sorted(np.flatnonzero(dist), key=lambda i: (-dist[i], i))
        cumulative = np.cumsum(dist[order].astype(np.float64))
        drawn = min(int(np.searchsorted(cumulative, u[k], side="right")), len(order) - 1)  # first > u_k
        accepted[r], tokens[r, :n], tokens[r, n], residual[r] = n, x[:n], order[drawn], dist
    return {"accepted": accepted, "tokens": tokens, "residual": residual}


def check_speculative_cases(suite: str, check) -> None:
    """Every speculative_verify case of the suite passes its checks against the NumPy recomputation above."""
    from safetensors.numpy import load_file
    manifest = json.load(open(f"{suite}/manifest.json"))
    cases = [c for c in manifest["cases"] if c["op"] == "speculative_verify"]
    assert cases, "the suite has no speculative_verify case"
    for case in cases:
        t = load_file(f"{suite}/{case['file']}")
        results = speculative_verify(t, case["params"])
        for o in case["outputs"]:
            assert check(results[o["name"]], t[o["name"]], o["check"]), (case["name"], o["name"])
        print(f"{case['name']}: PASS against an independent NumPy recomputation")


def llama3_divisors(scaling: dict, theta: float, hd: int) -> np.ndarray:
    """Llama 3.1's per-pair divisors f_i from a case's params.scaling (docs/formats.md "RoPE scaling"), in
    float64 with NumPy alone: pairs whose wavelength is below L/high keep their frequency, those above L/low
    are divided by factor, and between the two f = 1 / ((1 - s)/factor + s)."""
    assert scaling["rope_type"] == "llama3", scaling
    L, factor = scaling["original_max_position_embeddings"], scaling["factor"]
    low, high = scaling["low_freq_factor"], scaling["high_freq_factor"]
    inv = float(theta) ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)
    wavelen = 2 * np.pi / inv
    s = (L / wavelen - low) / (high - low)
    return np.where(wavelen < L / high, 1.0, np.where(wavelen > L / low, factor, 1 / ((1 - s) / factor + s)))


def fp32_inv_freq(p: dict) -> np.ndarray:
    """inv_freq as transformers' and vLLM's Llama 3 RoPE computes it, in float32 throughout: 1/theta^(2i/hd),
    then (llama3 scaling) the blend (1 - s)·inv/factor + s·inv for the pairs between the two wavelengths."""
    f32, hd = np.float32, p["head_dim"]
    inv = (f32(1) / np.power(f32(p["theta"]), np.arange(0, hd, 2).astype(f32) / f32(hd))).astype(f32)
    if "scaling" not in p:
        return inv
    sc = p["scaling"]
    L, factor = f32(sc["original_max_position_embeddings"]), f32(sc["factor"])
    low, high = f32(sc["low_freq_factor"]), f32(sc["high_freq_factor"])
    wavelen = (f32(2 * np.pi) / inv).astype(f32)
    divided = np.where(wavelen > L / low, inv / factor, inv).astype(f32)
    s = ((L / wavelen - low) / (high - low)).astype(f32)
    smoothed = ((f32(1) - s) * divided / factor + s * divided).astype(f32)
    medium = ~(wavelen < L / high) & ~(wavelen > L / low)
    return np.where(medium, smoothed, divided).astype(f32)


def rotate(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, interleaved: bool) -> np.ndarray:
    """x [rows][heads][hd] rotated by cos, sin [rows][hd/2] (pairs (2i, 2i+1) or (i, i + hd/2)), in the
    dtype of cos and sin."""
    hd = x.shape[-1]
    a, b = (x[..., 0::2], x[..., 1::2]) if interleaved else (x[..., : hd // 2], x[..., hd // 2:])
    a, b = a.astype(cos.dtype), b.astype(cos.dtype)
    c, s = cos[:, None, :], sin[:, None, :]
    out = np.empty(x.shape, cos.dtype)
    ra, rb = a * c - b * s, b * c + a * s
    if interleaved:
        out[..., 0::2], out[..., 1::2] = ra, rb
    else:
        out[..., : hd // 2], out[..., hd // 2:] = ra, rb
    return out


def check_rope_cases(suite: str, check) -> None:
    """Every rope case recomputed with NumPy alone (docs/fixtures.md "rope"): angles pos·theta^(-2i/hd)/f_i
    in float64, f_i the case's freq_factors, which must match params.scaling's rule to 1 ulp. It must PASS,
    and so must an FP32 engine that computes inv_freq (and the llama3 blend) and the angles in float32 as
    transformers and vLLM do; a position off by one and, in a scaled case, the scaling ignored must FAIL."""
    from safetensors.numpy import load_file
    manifest = json.load(open(f"{suite}/manifest.json"))
    cases = [c for c in manifest["cases"] if c["op"] == "rope"]
    assert any("scaling" in c["params"] for c in cases), "the suite has no scaled rope case"
    u, worst_blend = 2.0**-24, 0.0
    for case in cases:
        p, t = case["params"], load_file(f"{suite}/{case['file']}")
        hd, interleaved = p["head_dim"], p["pairing"] == "interleaved"
        assert p["pairing"] in ("rotate_half", "interleaved"), p["pairing"]
        inv = float(p["theta"]) ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)
        f = np.ones(hd // 2)
        if "scaling" in p:
            stored = t["freq_factors"]
            assert stored.dtype == np.float32 and stored.shape == (hd // 2,), (case["name"], stored.shape)
            ours = llama3_divisors(p["scaling"], p["theta"], hd).astype(np.float32)
            ulps = np.abs(stored.view(np.int32).astype(np.int64) - ours.view(np.int32))
            assert ulps.max() <= 1, (case["name"], "freq_factors vs params.scaling, ulps", ulps)
            f = stored.astype(np.float64)
            smoothed = (stored != 1) & (stored != np.float32(p["scaling"]["factor"]))
            blend = np.abs(fp32_inv_freq(p).astype(np.float64) - inv / f) / (u * inv)
            worst_blend = max(worst_blend, float(blend[smoothed].max()))
        else:
            assert "freq_factors" not in t, case["name"]
        pos = t["positions"].astype(np.float64)[:, None]
        ref, o = t["out"], case["outputs"][0]
        assert o["name"] == "out", o

        def run(pos, f):
            angle = pos * (inv / f)
            return rotate(t["x"], np.cos(angle).astype(np.float32), np.sin(angle).astype(np.float32),
                          interleaved).astype(np.float32)

        assert check(run(pos, f), ref, o["check"]), (case["name"], "NumPy in float64")
        fp32_angle = t["positions"].astype(np.float32)[:, None] * fp32_inv_freq(p)[None, :]
        fp32 = rotate(t["x"], np.cos(fp32_angle), np.sin(fp32_angle), interleaved)
        assert fp32.dtype == np.float32 and check(fp32, ref, o["check"]), (case["name"], "an FP32 engine")
        assert not check(run(pos + 1, f), ref, o["check"]), (case["name"], "a position off by one passed")
        if "scaling" in p:
            assert not check(run(pos, np.ones(hd // 2)), ref, o["check"]), (case["name"], "scaling ignored")
        print(f"{case['name']}: PASS against an independent NumPy recomputation and an FP32 engine; a position "
              "off by one" + (" and the scaling ignored" if "scaling" in p else "") + " FAIL")
    # The checks' why: the FP32 blend is within 16 u·inv_freq_i of inv_freq_i / f_i.
    assert worst_blend <= 16, worst_blend
    print(f"llama3 scaling: the FP32 blend is within {worst_blend:.2f} u*inv_freq of inv_freq/f_i (bound: 16)")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", required=True, type=pathlib.Path)
    ap.add_argument("--suite", required=True)
    args = ap.parse_args()
    code = example_code(args.docs)
    lines = len(code.strip().splitlines())
    assert lines <= 40, f"the reader example has {lines} lines; docs promise about 30"
    with tempfile.TemporaryDirectory() as tmp:
        script = pathlib.Path(tmp) / "validate.py"
        script.write_text(code, encoding="utf-8")
        for case in ["rmsnorm.rows3_n576", "rmsnorm.rows2_n77", "gemv.f32.n37_k333", "gemv.f16.n37_k333",
                     "gemm.f32.m5_n37_k333"]:
            r = subprocess.run([sys.executable, str(script), args.suite, case], capture_output=True, text=True)
            print(r.stdout, end="")
            assert r.returncode == 0 and "PASS" in r.stdout and "FAIL" not in r.stdout, (case, r.stdout, r.stderr)
    # The example's check(), on its own: a perturbed output fails every metric, the reference passes.
    namespace: dict = {}
    exec(code.split("\nsuite, name =", 1)[0], namespace)
    check = namespace["check"]
    ref = np.linspace(-1, 1, 101, dtype=np.float32)
    bad = ref.copy()
    bad[7] += 0.5
    nan = ref.copy()
    nan[3] = np.nan
    for c in [{"metric": "nmse", "threshold": 1e-6}, {"metric": "max_abs_rel", "threshold": 1e-4},
              {"metric": "allclose", "atol": 1e-5, "rtol": 0.0, "max_mismatch_fraction": 0.0}, {"metric": "exact"}]:
        assert check(ref.copy(), ref, c), c
        assert not check(bad, ref, c), c
        assert not check(nan, ref, c), c
    print("reader example: PASS on the suite, FAIL on perturbed results")
    check_speculative_cases(args.suite, check)
    check_rope_cases(args.suite, check)
    return 0


if __name__ == "__main__":
    sys.exit(main())
