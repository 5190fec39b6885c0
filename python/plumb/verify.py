"""`plumb fixtures verify` on results held in memory: the same rows, from the same C++ (fixtures/verify.cpp)."""
import math
import re
from typing import NamedTuple

from . import _plumb
from ._tensors import to_wire
from ._torch import to_numpy


class Row(NamedTuple):
    case: str
    output: str
    metric: str  # the check's metric, or "bound" for its per-element bound
    value: float
    threshold: float
    passed: bool
    detail: str = ""     # why it failed, or the max abs error
    allowance: str = ""  # the allowance whose check judged the row; "" for the output's own check
    margin: float = float("nan")  # how much of what passes it used: value ÷ threshold, allclose's worst
    #                               |err| ÷ (atol + rtol·|ref|), the bound's worst ratio; nan for exact


def _posix_literal(name):
    return re.sub(r"([.^$*+?()\[\]{}|\\])", r"\\\1", name)


def verify(suite, results, cases=None, allow=()):
    """Judges results = {case name: {output name: array}} against `suite` (a Suite).

    cases=None judges exactly the cases in `results`; a string is verify's --cases regex (POSIX extended,
    searched in the name), and every matching case without results fails. allow lists the allowances the
    engine declares ("int8_activations", "bf16_activations", ...). Returns (rows, ok): a Row per output
    and per bound, and whether every row passed. Outputs are numpy arrays or torch tensors on any device; a
    BF16 output may be given as torch.bfloat16 or as a uint16 array of its bits."""
    if cases is None:
        unknown = [name for name in results if name not in suite._by_name]
        if unknown:
            raise KeyError(f"results name cases the suite {suite.path} has none of: {unknown}")
        if not results:
            raise ValueError("results is empty and no cases pattern was given: nothing to verify")
        cases = "^(" + "|".join(_posix_literal(name) for name in results) + ")$"
    wire = {}
    for name, outputs in results.items():
        case = suite._by_name.get(name)
        wire[name] = {}
        for output, array in outputs.items():
            array = to_numpy(array)
            bf16 = case is not None and output in case.output_names and case.dtype(output) == "BF16"
            wire[name][output] = to_wire(f"{name}/{output}", array, "BF16" if bf16 and str(array.dtype) == "uint16" else None)
    rows = [Row(*r) for r in _plumb.verify(suite._native, wire, cases, list(allow))]
    return rows, all(r.passed for r in rows)


def format_rows(rows):
    """The table `plumb fixtures verify` prints, for a test's failure message."""
    lines = [f"{r.case}  {r.output}  {r.metric}  {r.value:.3g}  {r.threshold:.3g}  "
             + ("-" if math.isnan(r.margin) else f"{r.margin:.3g}") + f"  {'PASS' if r.passed else 'FAIL'}"
             + (f"  [{r.allowance}]" if r.allowance else "") + ("" if r.passed else f"  ({r.detail})") for r in rows]
    failed = sum(not r.passed for r in rows)
    lines.append(f"{len(rows) - failed} of {len(rows)} checks PASS" + (f", {failed} FAIL" if failed else ""))
    return "\n".join(lines)
