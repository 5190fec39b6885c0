"""Runs docs/fixtures.md's Python reader example exactly as printed (the first ```python block under
"## Reading the suite from Python") against the committed suite: it must PASS the cases it implements, and
its check() must FAIL a perturbed result; the speculative_verify cases must PASS an independent NumPy
recomputation of their rule. CTest: reference.fixtures_reader (label reference)."""
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
