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
