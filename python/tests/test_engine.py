"""A kernel engineer's test: a NumPy "engine" for the suite's dense GEMV/GEMM and RMSNorm cases, run over
the committed suite and judged by plumb.verify. The correct engine passes; each planted bug, the kind GPU
kernels have, is rejected."""
import numpy as np
import pytest

import plumb


def dense_weight(case, t):
    w = t["w"]
    if case.params["weight_dtype"] == "bf16":  # BF16 bits: the high half of an FP32
        return (w.astype(np.uint32) << 16).view(np.float32)
    return w.astype(np.float32)


def engine(case, t, bug=None):
    """One case's outputs, in float64 like a careful kernel; `bug` plants one mistake."""
    if case.op == "rmsnorm":
        x = t["x"].astype(np.float64)
        eps = case.params["eps"]
        if bug == "eps_dropped":
            rms = np.sqrt((x * x).mean(-1, keepdims=True))
        elif bug == "eps_outside_sqrt":
            rms = np.sqrt((x * x).mean(-1, keepdims=True)) + eps
        else:
            rms = np.sqrt((x * x).mean(-1, keepdims=True) + eps)
        return {"out": (x / rms * t["weight"]).astype(np.float32)}
    w, x = dense_weight(case, t).astype(np.float64), t["x"].astype(np.float64)
    k = x.shape[-1]
    if bug == "dropped_tail":  # a vectorized loop over k in steps of 8 that forgets the remainder
        k -= k % 8 or 8
    y = x[..., :k] @ w[:, :k].T
    if bug == "last_row_zero":  # the last tile of rows never written
        y[..., -1] = 0
    if bug == "one_element_off":  # one output 1% off (a wrong scale on one lane)
        y[..., 3] *= 1.01
    return {"y": y.astype(np.float32)}


def dense_cases(suite):
    return [c for c in suite if c.op == "rmsnorm"
            or c.op in ("gemv", "gemm") and c.params["weight_dtype"] in ("f32", "f16", "bf16")]


def run(suite, bug=None):
    return {c.name: engine(c, c.load(), bug) for c in dense_cases(suite)}


def test_the_correct_engine_passes(suite):
    rows, ok = plumb.verify(suite, run(suite))
    assert ok, plumb.format_rows(rows)
    assert len({r.case for r in rows}) == 9  # 3 dtypes × gemv, gemm, and three RMSNorms


@pytest.mark.parametrize("bug", ["dropped_tail", "last_row_zero", "one_element_off"])
def test_each_planted_bug_is_rejected_on_every_linear_case(suite, bug):
    rows, ok = plumb.verify(suite, run(suite, bug))
    assert not ok
    failed = {r.case for r in rows if not r.passed}
    linear = {c.name for c in dense_cases(suite) if c.op != "rmsnorm"}
    assert failed == linear, plumb.format_rows(rows)


@pytest.mark.parametrize("bug", ["eps_dropped", "eps_outside_sqrt"])
def test_rmsnorm_eps_bugs_are_rejected_by_the_near_eps_case(suite, bug):
    rows, ok = plumb.verify(suite, run(suite, bug))
    assert not ok
    # Rows with 300x outliers (rows3_n576) have a mean(x²) that dwarfs eps and hide both bugs; rows2_n77's
    # (about 1/3) shows them by a few bounds; the rows near eps by orders of magnitude.
    failed = {r.case for r in rows if not r.passed}
    assert "rmsnorm.rows4_n64.near_eps" in failed and "rmsnorm.rows3_n576" not in failed, plumb.format_rows(rows)
    assert failed <= {"rmsnorm.rows2_n77", "rmsnorm.rows4_n64.near_eps"}, plumb.format_rows(rows)
    assert all(r.margin > 1 for r in rows if not r.passed)
