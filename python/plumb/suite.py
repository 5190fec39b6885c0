"""A fixture suite (docs/fixtures.md), read by plumb's C++ reader (suite_reader.h): every read is
bounds-checked, and a bad file raises ValueError naming the file and field."""
import json
import os
import re

from . import _plumb
from ._tensors import dict_from_wire
from ._torch import to_torch


class Case:
    """One case of a suite: its manifest entry, and its tensors loaded on demand (load(), inputs(),
    expected()). BF16 tensors are uint16 arrays of their bits; dtype(name) says which tensors are."""

    def __init__(self, suite, entry):
        self._suite = suite
        self.entry = entry  # the manifest's object, as written
        self.name = entry["name"]
        self.op = entry["op"]
        self.params = entry.get("params", {})
        self.description = entry.get("description", "")
        self.input_names = list(entry.get("inputs", []))
        self.output_names = [o["name"] for o in entry["outputs"]]
        self.checks = {o["name"]: o["check"] for o in entry["outputs"]}  # metric, threshold, bound, allow, why
        self._tensors = None

    def load(self):
        """Every tensor of the case file: inputs, expected outputs and the bounds' magnitude tensors."""
        if self._tensors is None:
            wire = self._suite._native.load(self.name)
            self._dtypes = {name: t[0] for name, t in wire.items()}
            self._tensors = dict_from_wire(wire)
        return {name: a.copy() for name, a in self._tensors.items()}

    def dtype(self, name):
        """The safetensors dtype of tensor `name` ("BF16" for a uint16 array that holds BF16 bits)."""
        self.load()
        return self._dtypes[name]

    def inputs(self, framework="numpy", device=None):
        """The case's inputs by name: numpy arrays, or with framework="torch" torch tensors on `device`
        (BF16 tensors as torch.bfloat16, FP8 codes and packed weights as uint8, as stored)."""
        return self._as(framework, device, self.input_names)

    def expected(self, framework="numpy", device=None):
        """The expected outputs by name, as inputs() gives tensors."""
        return self._as(framework, device, self.output_names)

    def check(self, outputs, allow=()):
        """Judges this case's outputs ({name: numpy array or torch tensor}) as `plumb fixtures verify` does,
        declaring the allowances in `allow`. Returns the rows; raises AssertionError showing every row when
        one fails, so a pytest test is `case.check(engine(case.inputs("torch")))`."""
        from .verify import format_rows, verify
        rows, ok = verify(self._suite, {self.name: outputs}, allow=allow)
        if not ok:
            raise AssertionError(f"{self.name} fails"
                                 + (f" with {', '.join(allow)} declared" if allow else "")
                                 + ":\n" + format_rows(rows))
        return rows

    def _as(self, framework, device, names):
        t = self.load()
        if framework == "numpy":
            if device is not None:
                raise ValueError(f"{self.name}: device={device!r} needs framework='torch'")
            return {name: t[name] for name in names}
        if framework != "torch":
            raise ValueError(f"{self.name}: framework must be 'numpy' or 'torch', not {framework!r}")
        return {name: to_torch(t[name], self._dtypes[name] == "BF16", device) for name in names}

    def __repr__(self):
        return f"Case({self.name!r}, op={self.op!r})"


class Suite:
    """A suite directory: manifest.json and one <case>.safetensors per case."""

    def __init__(self, path):
        self.path = os.fspath(path)
        self._native = _plumb.Suite(self.path)
        self.manifest = json.loads(self._native.manifest())
        self.cases = [Case(self, entry) for entry in self.manifest["cases"]]
        self._by_name = {c.name: c for c in self.cases}

    def case(self, name):
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"{self.path}: no case {name!r}") from None

    def __iter__(self):
        return iter(self.cases)

    def __len__(self):
        return len(self.cases)

    def select(self, pattern=None, ops=None, exclude_ops=()):
        """The cases whose name `pattern` (a Python regex) matches, searched as verify's --cases is; `ops`
        keeps those ops only, `exclude_ops` leaves ops out."""
        regex = re.compile(pattern) if pattern is not None else None
        return [c for c in self.cases
                if (regex is None or regex.search(c.name)) and (ops is None or c.op in ops)
                and c.op not in exclude_ops]

    def parametrize(self, pattern=None, ops=None, exclude_ops=(), argname="case"):
        """A pytest.mark.parametrize over select(...)'s cases, each test id the case name:

            @plumb.Suite("fixtures/suite").parametrize(r"^attention_")
            def test_my_kernel(case):
                case.check(my_kernel(case.inputs("torch", device="cuda")))"""
        import pytest
        cases = self.select(pattern, ops, exclude_ops)
        return pytest.mark.parametrize(argname, cases, ids=[c.name for c in cases])
