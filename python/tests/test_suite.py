"""Reading a suite from Python: the manifest as written, every case's tensors, and compute() giving every op
case's expected outputs bit for bit (the definition is what the suite stores)."""
import json

import numpy as np
import pytest

import plumb
from conftest import SUITE_DIR, op_cases


def test_suite_lists_every_case_of_the_manifest(suite):
    manifest = json.loads((SUITE_DIR / "manifest.json").read_text())
    assert [c.name for c in suite] == [c["name"] for c in manifest["cases"]]
    case = suite.case("gemv.int4_sym.n37_k333")
    assert case.op == "gemv" and case.params["group_size"] == 32
    assert case.checks["y"]["metric"] == "nmse" and "bound" in case.checks["y"]


def test_case_loads_inputs_expected_outputs_and_bound_tensors(suite):
    case = suite.case("gemv.bf16.n37_k333")
    t = case.load()
    assert set(case.inputs()) == {"w", "x"} and case.expected()["y"].shape == (37,)
    assert t["w"].dtype == np.uint16 and case.dtype("w") == "BF16"  # BF16 as its bits
    assert t["y.abs_dot"].shape == (37,)


@pytest.mark.parametrize("case", op_cases(), ids=lambda c: c.name)
def test_compute_reproduces_every_op_case_bit_for_bit(case):
    dtypes = {name: case.dtype(name) for name in case.input_names}
    out = plumb.ops.compute(case.op, case.params, case.inputs(), "definition", dtypes)
    for name, expected in case.expected().items():
        assert out[name].dtype == expected.dtype and out[name].shape == expected.shape, name
        assert out[name].tobytes() == expected.tobytes(), f"{case.name} {name}"


def test_a_missing_suite_or_case_names_itself(tmp_path, suite):
    with pytest.raises(ValueError, match="manifest.json"):
        plumb.Suite(tmp_path)
    with pytest.raises(KeyError, match="no case 'gemv.nope'"):
        suite.case("gemv.nope")
    (tmp_path / "manifest.json").write_text('{"format": "plumb-fixtures", "version": 2, "cases": []}')
    with pytest.raises(plumb.PlumbError, match="version"):
        plumb.Suite(tmp_path)


def test_torch_front_end_hands_tensors_as_stored_and_checks_them(suite):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed (python/requirements.txt pins it)")
    case = suite.case("gemv.bf16.n37_k333")
    t = case.inputs(framework="torch", device="cpu")
    assert t["w"].dtype == torch.bfloat16 and t["x"].dtype == torch.float32
    # The BF16 bits, unchanged: viewed back as uint16 they are the file's.
    assert (t["w"].view(torch.int16).numpy().view(np.uint16) == case.inputs()["w"]).all()
    y = torch.nn.functional.linear(t["x"].double(), t["w"].double()).float()
    rows = case.check({"y": y})
    assert all(r.passed for r in rows) and {r.metric for r in rows} == {"nmse", "bound"}
    with pytest.raises(AssertionError, match=r"gemv.bf16.n37_k333 fails:\n.*FAIL"):
        case.check({"y": y * 1.01})
    # A BF16 output goes back as its bits; rounding y to BF16 needs the allowance that says so.
    with pytest.raises(AssertionError, match="fails"):
        case.check({"y": y.bfloat16().float()})
    rows = case.check({"y": y.bfloat16().float()}, allow=["bf16_outputs"])
    assert all(r.allowance == "bf16_outputs" for r in rows)
    with pytest.raises(ValueError, match="framework"):
        case.inputs(framework="jax")


def test_select_and_parametrize_pick_cases_by_name_and_op(suite):
    attention = suite.select(r"^attention_", exclude_ops=("attention_prefill",))
    assert attention and all(c.op == "attention_decode" for c in attention)
    assert [c.name for c in suite.select(ops=("swiglu",))] == ["swiglu.n1000"]
    mark = suite.parametrize(r"^rope\.", argname="rope_case")
    assert mark.name == "parametrize" and mark.args[0] == "rope_case"
    assert [c.name for c in mark.args[1]] == [c.name for c in suite.select(r"^rope\.")]
