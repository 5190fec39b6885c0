"""The example PyTorch engine (python/examples/torch_engine.py), written from the docs alone, judged on the
committed suite the way a kernel engineer judges a GPU engine: every case through Case.check / plumb.verify.

- the fp32 and f64 engines pass every check with no allowance;
- the bf16 and fp16 engines (16-bit rounding points, FP32 sums) pass with the allowances they declare;
- every planted bug (torch_engine.BUGS) fails the cases that must catch it, and only cases of the ops whose
  code it lives in; the mistakes the suite cannot catch (torch_engine.UNCAUGHT) pass, which documents them.

Each mode's outputs are computed once per module (a fixture), one torch thread: CI runs this on 2 cores."""
import pathlib
import sys

import pytest

torch = pytest.importorskip("torch", reason="python/examples/torch_engine.py needs PyTorch")

import plumb  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python" / "examples"))
import torch_engine as te  # noqa: E402

SUITE = plumb.Suite(ROOT / "fixtures" / "suite")
MODEL = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
NO_MODEL = f"{MODEL.relative_to(ROOT)} is absent (scripts/fetch-model smollm2)"

torch.set_num_threads(1)


def needs_model(case):
    return case.op in te.MODEL_OPS


@pytest.fixture(scope="module")
def results():
    """results(mode)[case name] → that case's outputs from the engine in `mode` (or the exception it raised),
    every case computed once per mode."""
    computed = {}

    def get(mode):
        if mode not in computed:
            engine, computed[mode] = te.Engine(mode), {}
            for case in SUITE:
                if needs_model(case) and not MODEL.exists():
                    continue
                try:
                    computed[mode][case.name] = engine(case)
                except Exception as e:  # noqa: BLE001 - reported by that case's test
                    computed[mode][case.name] = e
        return computed[mode]

    return get


def outputs_of(results, mode, case):
    if needs_model(case) and not MODEL.exists():
        pytest.skip(NO_MODEL)
    out = results(mode)[case.name]
    if isinstance(out, Exception):
        raise out
    return out


@pytest.mark.parametrize("mode", ["fp32", "f64"])
@SUITE.parametrize()
def test_fp32_and_f64_engines_pass_every_case_with_no_allowance(case, mode, results):
    case.check(outputs_of(results, mode, case))


@pytest.mark.parametrize("mode", ["bf16", "fp16"])
@SUITE.parametrize()
def test_16_bit_engines_pass_with_their_allowances(case, mode, results):
    case.check(outputs_of(results, mode, case), allow=te.MODES[mode].allow)


def judged_with_bug(bug, ops_with_model):
    """plumb.verify's rows for the fp32 engine with `bug` planted: every op case, and the model cases of
    ops_with_model (each model case costs seconds)."""
    cases = [c for c in SUITE if not needs_model(c) or c.op in ops_with_model]
    rows, _ = plumb.verify(SUITE, te.run(SUITE, "fp32", bug, cases))
    return rows


@pytest.mark.parametrize("bug", sorted(te.BUGS))
def test_each_planted_bug_fails_the_cases_of_its_ops(bug):
    info = te.BUGS[bug]
    model_ops = {SUITE.case(name).op for name in info.must_fail} & set(te.MODEL_OPS)
    if model_ops and not MODEL.exists():
        pytest.skip(NO_MODEL)
    rows = judged_with_bug(bug, set(info.ops) & set(te.MODEL_OPS) if model_ops else ())
    failing = {r.case for r in rows if not r.passed}
    table = plumb.format_rows([r for r in rows if not r.passed])
    assert failing, f"{bug} ({info.what}) passes every case"
    outside = {name for name in failing if SUITE.case(name).op not in info.ops}
    assert not outside, f"{bug} fails cases of other ops:\n{table}"
    assert set(info.must_fail) <= failing, f"{bug} passes {set(info.must_fail) - failing}:\n{table}"


@pytest.mark.parametrize("bug", sorted(te.UNCAUGHT))
def test_the_mistakes_the_suite_cannot_catch_pass(bug):
    """Blind spots found while writing the engine (te.UNCAUGHT says why each passes). When the suite learns to
    catch one, this fails: move it to te.BUGS."""
    rows = judged_with_bug(bug, ())
    assert all(r.passed for r in rows), plumb.format_rows([r for r in rows if not r.passed])
