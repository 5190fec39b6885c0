"""Runs docs/fixtures.md's Python reader example exactly as printed (the first ```python block under
"## Reading the suite from Python") against the committed suite: it must PASS the cases it implements, and
its check() must FAIL a perturbed result. CTest: reference.fixtures_reader (label reference)."""
import argparse
import pathlib
import subprocess
import sys
import tempfile

import numpy as np


def example_code(docs: pathlib.Path) -> str:
    text = docs.read_text(encoding="utf-8")
    section = text.split("## Reading the suite from Python", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


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
    return 0


if __name__ == "__main__":
    sys.exit(main())
